"""edge_broker.audit"""
