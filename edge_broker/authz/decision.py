"""The gate pipeline's answer (AUTHZ.md §2): allowed or not, and which gate and rule decided."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..mqtt.reason_codes import ReasonCode


class GateName(StrEnum):
    """Which gate decided, as a Decision, the audit log and ``explain`` name it; the gate itself
    is a :class:`~edge_broker.authz.gate.PolicyGate`."""

    SYNTAX = "syntax"
    RESERVED = "reserved"
    AUTHORIZER = "authorizer"
    PERMISSIONS = "permissions"
    TOKEN = "token"
    ACL = "acl"
    CLAIMS = "claims"


@dataclass(frozen=True, slots=True)
class Decision:
    """``allowed`` with the deciding ``gate`` and ``rule`` id (``None`` when no rule applied).

    A denial carries the MQTT 5 ``reason_code`` the client should see and a ``reason`` text for
    the Reason String. ``disconnect`` is set when the client must be disconnected (authorizer
    outcome ``disconnect``). ``recheck`` marks a subscription whose deliveries must be checked
    on the concrete topic (AUTHZ.md §2 gate 4: overlapped by an earlier permission).
    """

    allowed: bool
    gate: GateName | None = None
    rule: str | None = None
    reason_code: ReasonCode = ReasonCode.SUCCESS
    reason: str | None = None
    disconnect: bool = False
    recheck: bool = False

    @property
    def denied(self) -> bool:
        return not self.allowed


ALLOW = Decision(True)


def deny(
    gate: GateName,
    rule: str | None,
    reason: str,
    reason_code: ReasonCode = ReasonCode.NOT_AUTHORIZED,
) -> Decision:
    return Decision(False, gate, rule, reason_code, reason)
