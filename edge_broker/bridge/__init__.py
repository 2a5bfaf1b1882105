"""Bridges to cloud brokers (issue 19; docs/bridge.md).

- ``config``: the ``[[bridges]]`` section → :class:`BridgeConfig` / :class:`TopicMapping`.
- ``topics``: local ⇄ remote topic rewriting and the 3.1.1 echo filter (loop prevention).
- ``queue``: the bounded outbound queue (pending, in flight, overflow policy).
- ``store``: the queue's durable append-only log under the state directory.
- ``transport``: TCP, TLS and WebSocket byte streams to the remote broker.
- ``link``: one bridge: the MQTT client on our sans-io codec, reconnect with backoff.
- ``service``: every bridge of a broker (``Broker.bridges``): outbound hook, inbound publish,
  authorization of the bridge principal, ``$SYS`` and metrics values.
- ``commands``: ``edge-broker bridge status``.
"""
