"""autoparser.gbnf"""
