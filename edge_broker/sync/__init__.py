"""edge_broker.sync"""
