"""autoparser.template"""
