"""autoparser.chat"""
