"""Which handler takes a client packet in each connection state, derived from the engine's
state table (``engine/states.py``): one ``handle_*`` module per packet type, as Mosquitto's
``handle_*.c``.

Each packet class has one handler (:data:`HANDLER_OF`); only enhanced authentication in
progress (MQTT 5 §4.12) answers AUTH and DISCONNECT differently (:data:`DURING_AUTH`). A
state's row holds exactly the packets its ``ADMITTED`` row names, so the table cannot drift
from the engine's; the states that refuse packets the codec lets through (CONNECTING,
AUTHENTICATING) map every other client packet to the refusal. A handler returns None when
done, or an awaitable the connection waits for before it handles the next packet.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.states import ADMITTED, ConnState
from ..mqtt.packets import (
    CLIENT_SENDS,
    PACKET_TYPE_OF,
    Auth,
    Connect,
    Disconnect,
    Pingreq,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Subscribe,
    Unsubscribe,
)
from .handle_auth import handle_auth_continue, handle_reauth, refuse_before_auth
from .handle_connect import handle_connect
from .handle_disconnect import handle_disconnect
from .handle_ping import handle_pingreq
from .handle_publish import (
    handle_puback,
    handle_pubcomp,
    handle_publish,
    handle_pubrec,
    handle_pubrel,
)
from .handle_subscribe import handle_subscribe
from .handle_unsubscribe import handle_unsubscribe
from .handler_api import Handler

HANDLER_OF: Mapping[type, Handler] = {
    Connect: handle_connect,
    Publish: handle_publish,
    Puback: handle_puback,
    Pubrec: handle_pubrec,
    Pubrel: handle_pubrel,
    Pubcomp: handle_pubcomp,
    Subscribe: handle_subscribe,
    Unsubscribe: handle_unsubscribe,
    Pingreq: handle_pingreq,
    Disconnect: handle_disconnect,
    Auth: handle_reauth,
}
"""The handler of each client packet (MQTT 5 Table 2-1)."""

DURING_AUTH: Mapping[type, Handler] = {Auth: handle_auth_continue, Disconnect: refuse_before_auth}
"""AUTHENTICATING: the client's next AUTH continues the exchange; DISCONNECT gives up."""

_CLIENT_PACKETS = tuple(cls for cls, ptype in PACKET_TYPE_OF.items() if ptype in CLIENT_SENDS)


def _row(state: ConnState) -> dict[type, Handler]:
    """The handlers of ``state``: exactly its admitted packets; before CONNACK the rest is
    refused. A plain dict, never changed after import: it is looked up once per packet, and a
    read-only proxy costs a fifth more per lookup."""
    named = DURING_AUTH if state is ConnState.AUTHENTICATING else HANDLER_OF
    row = {cls: named[cls] for cls in _CLIENT_PACKETS if PACKET_TYPE_OF[cls] in ADMITTED[state]}
    if state in (ConnState.CONNECTING, ConnState.AUTHENTICATING):
        for cls in _CLIENT_PACKETS:
            row.setdefault(cls, refuse_before_auth)
    return row


HANDLERS: tuple[dict[type, Handler], ...] = tuple(_row(state) for state in ConnState)
"""``HANDLERS[state]`` → {packet class: handler}, indexed by the state's number (a tuple: the
lookup per packet costs no hashing). AWAIT_CONNECT holds CONNECT only and CONNECTED everything
but CONNECT because the reader already refuses the rest (``engine/states.py``
``READER_ADMITS``); CLOSED holds nothing because a closing connection handles no more
packets."""
