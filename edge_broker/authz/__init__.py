"""edge_broker.authz"""
