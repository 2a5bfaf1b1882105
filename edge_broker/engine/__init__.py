"""The sans-io MQTT session engine (DESIGN.md "Where the core is going"): protocol state that
changes only by the bytes and the time it is given, with no socket, no asyncio and no clock of
its own. ``broker/`` is the asyncio layer around it.

    states.py       the connection states and transitions, and the packets each state admits:
                    the one table the reader and the broker's handler table derive from
    connection.py   one server-side connection: framing, its state (``states.py``),
                    the pre-authentication byte budget, keep-alive, connect-timeout and token
                    deadlines, the PUBACK/PUBREC/PUBREL/PUBCOMP transitions of the attached
                    session's flow and every reply, and the one output buffer
    events.py       what the engine reports (``receive``, ``handle_timer``, the acks' ``Flow``)
    negotiation.py  CONNECT: client id and will refusals, Keep Alive, expiry, windows, CONNACK
                    properties, resumption; what the end of a connection does
    publish.py      PUBLISH validation and the acknowledgements' bytes
    deadlines.py    what falls due when: will delays and session expiries of offline sessions
    aliases.py      topic aliases of one connection: inbound resolution, outbound assignment
    flow.py         a session's QoS 1/2 tables: packet ids, in-flight table, held QoS 2 ids,
                    the outgoing Receive Maximum window, what a resumed session resends
"""
