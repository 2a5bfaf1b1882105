"""edge_broker.auth"""
