"""smokermqtt: an MQTT 5 client with SMOKER authentication and claims, for MicroPython boards.

See firmware_clients/micropython/README.md. Modules: sha512, ed25519, canonjson, ids, claims,
packets (MQTT 5 bytes), client (the socket client), provision (files written on the host).
"""
