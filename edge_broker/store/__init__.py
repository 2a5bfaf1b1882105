"""edge_broker.store"""
