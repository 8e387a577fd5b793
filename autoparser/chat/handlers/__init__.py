"""autoparser.chat.handlers"""
