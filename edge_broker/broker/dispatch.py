"""Which handler takes a client packet in each connection state: the broker's half of
``mqtt/session_states.py`` (one ``handle_*`` module per packet type, as Mosquitto's
``handle_*.c``).

A state's row maps the packet classes that state admits to their handler; the states that
refuse packets the codec lets through (CONNECTING, AUTHENTICATING) map every other client
packet to the refusal. A handler returns None when done, or an awaitable the connection waits
for before it handles the next packet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..mqtt.packets import (
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
from ..mqtt.session_states import ADMITTED, CLIENT_SENDS, ConnState
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

if TYPE_CHECKING:
    from .connection import Connection

Handler = Callable[["Connection", Any], Awaitable[None] | None]

_CONNECTING_HANDLERS: dict[ConnState, Mapping[type, Handler]] = {
    ConnState.AWAIT_CONNECT: {Connect: handle_connect},
    ConnState.AUTHENTICATING: {Auth: handle_auth_continue, Disconnect: refuse_before_auth},
}
_CONNECTED_HANDLERS: Mapping[type, Handler] = {
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
_CLIENT_PACKETS = tuple(cls for cls, ptype in PACKET_TYPE_OF.items() if ptype in CLIENT_SENDS)


def _row(state: ConnState) -> dict[type, Handler]:
    """The handlers of ``state``: exactly its admitted packets (checked here, at import, so the
    table cannot drift from ``ADMITTED``); before CONNACK the rest is refused. A plain dict,
    never changed after import: it is looked up once per packet, and a read-only proxy costs
    a fifth more per lookup."""
    named = (
        _CONNECTED_HANDLERS if state is ConnState.CONNECTED else _CONNECTING_HANDLERS.get(state, {})
    )
    admitted = {cls for cls in _CLIENT_PACKETS if PACKET_TYPE_OF[cls] in ADMITTED[state]}
    if set(named) != admitted:
        raise AssertionError(f"handlers of {state.name} do not match the packets it admits")
    row = dict(named)
    if state in (ConnState.CONNECTING, ConnState.AUTHENTICATING):
        for cls in _CLIENT_PACKETS:
            row.setdefault(cls, refuse_before_auth)
    return row


HANDLERS: MappingProxyType[ConnState, dict[type, Handler]] = MappingProxyType(
    {state: _row(state) for state in ConnState}
)
"""state → {packet class: handler}. AWAIT_CONNECT holds CONNECT only and CONNECTED everything
but CONNECT because the reader already refuses the rest (``mqtt/reader.py``); CLOSED holds
nothing because a closing connection handles no more packets."""
