"""edge-broker: an MQTT 3.1/3.1.1/5.0 broker for gateways, built around authorization."""

__version__ = "0.1.0"
