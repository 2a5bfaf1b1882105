"""edge_broker.broker"""
