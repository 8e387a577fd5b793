"""autoparser.analysis"""
