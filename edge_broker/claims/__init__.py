"""SMOKER client-managed topic claims (SMOKER.md; seed 002). One idea per module:

- ``smoker_id``: base32 IDs of Ed25519 keys; ``model``: Claim, Restriction, Permission and the
  canonical signed bytes; ``parse``: strict claim JSON; ``signature``: sign and verify;
  ``topics``: the system topics and the restricted area.
- ``evaluate``: the PUBACK table for claims and unclaims; ``access``: the access decision;
  ``throttle``: flood limits; ``info``: the claim information request.
- ``persistence``: claim documents on the append-only log (TinyDB-queryable); ``service``: the
  live index, durable claim/unclaim, quarantine; ``system``: the calls the broker makes.
- ``commands``: ``edge-broker keygen`` and ``edge-broker claim …``.

The enhanced authentication lives in ``edge_broker.auth.smoker``, a client in
``edge_broker.smoker_client``.
"""
