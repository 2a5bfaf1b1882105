from bridge_support import mosquitto_factory  # noqa: F401  (fixture)
