"""edge_broker.pipeline"""
