"""edge_broker.claims"""
