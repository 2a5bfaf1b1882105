"""The sans-io MQTT session engine (DESIGN.md "Where the core is going"): protocol state that
changes only by the bytes and the time it is given, with no socket, no asyncio and no clock of
its own. ``broker/`` is the asyncio layer around it.

    states.py       the connection states and transitions, and the packets each state admits:
                    the one table the reader and the broker's handler table derive from
    connection.py   one server-side connection: framing, its state (``states.py``),
                    the pre-authentication byte budget, keep-alive, connect-timeout and token
                    deadlines
    deadlines.py    what falls due when: will delays and session expiries of offline sessions
    aliases.py      topic aliases of one connection: inbound resolution, outbound assignment
    flow.py         a session's QoS 1/2 state: packet ids, in-flight table, PUBACK/PUBREC/
                    PUBREL/PUBCOMP transitions, both Receive Maximum windows
"""
