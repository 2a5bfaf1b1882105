"""edge_broker.matching"""
