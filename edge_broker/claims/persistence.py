"""Where claims live between restarts (SMOKER.md "Claim store"; issue 6).

Claims are documents of the TinyDB table ``claims`` on the append-only log (``store.KeyedLog``
table ``tinydb:claims``, keyed by document id), so that ``TinyDB(path, storage=LogStorage)``
queries them (``edge-broker claim list``) while the broker writes them through the keyed log,
one durable record per claim (group commit, fsync before the PUBACK).

A document: ``tenant``, ``topic``, ``owner``, ``type`` (for queries), ``restriction`` (the
canonical JSON the owner signed, as text), ``signature`` (the 64 signature bytes), ``at`` (Unix
time stored). About half the size of the wire form, whose attached signature repeats the
restriction in base64. Every document is re-verified when loaded (``verify_record``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..matching.names import DEFAULT_TENANT
from ..mqtt.reason_codes import ReasonCode
from ..store import Delete, KeyedLog, Op, Put
from ..store.keyed import TINYDB_PREFIX
from .errors import ClaimError, shown
from .model import Claim
from .parse import load_json, parse_restriction
from .signature import verify_claim

CLAIMS_LOG = "claims.log"  # the claim store's file in the broker's state directory
TINYDB_TABLE = "claims"
LOG_TABLE = TINYDB_PREFIX + TINYDB_TABLE


class ClaimPersistence(Protocol):
    """What the claim service needs of a store; ``put``/``delete`` return once durable."""

    def records(self) -> Iterable[tuple[str, str, Any]]:
        """Every stored ``(tenant, topic, document)``."""
        ...

    async def put(self, tenant: str, topic: str, value: Any) -> None: ...

    async def delete(self, tenant: str, topic: str) -> None: ...


def record_value(claim: Claim, stored_at: float, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
    """The stored document of ``claim``."""
    restriction = claim.restriction
    return {
        "tenant": tenant,
        "topic": restriction.topic_name,
        "owner": restriction.owner,
        "type": restriction.restriction_type.value,
        "restriction": restriction.canonical_bytes().decode("utf-8"),
        "signature": claim.signature,
        "at": stored_at,
    }


def verify_record(topic: str, value: Any) -> Claim:
    """The claim in a stored document, re-verified; ``ClaimError`` says why it is compromised."""
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("restriction"), str)
        or not isinstance(value.get("signature"), bytes)
    ):
        raise ClaimError(ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR, "the record holds no claim")
    text: str = value["restriction"]
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ClaimError(
            ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR, "the stored restriction is not UTF-8"
        ) from None
    claim = Claim(parse_restriction(load_json(data, "the stored restriction")), value["signature"])
    verify_claim(claim)
    if claim.topic_name != topic:
        raise ClaimError(
            ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
            f"the record is stored under {shown(topic)} but claims {shown(claim.topic_name)}",
        )
    return claim


def _where(key: object, doc: Any) -> tuple[str, str]:
    """(tenant, topic) a document says it belongs to; a placeholder topic when it does not say."""
    if isinstance(doc, dict):
        tenant, topic = doc.get("tenant"), doc.get("topic")
        if isinstance(tenant, str) and isinstance(topic, str):
            return tenant, topic
    return DEFAULT_TENANT, f"<claim store document {key!r}>"


class KeyedClaimStore:
    """``ClaimPersistence`` on a ``KeyedLog`` whose claims TinyDB can query (module docstring)."""

    __slots__ = ("keyed", "_ids", "_next_id")

    def __init__(self, keyed: KeyedLog) -> None:
        self.keyed = keyed
        self._ids: dict[tuple[str, str], list[int]] = {}
        self._next_id = 1
        for key, doc in keyed.iter_items(LOG_TABLE):
            if isinstance(key, int):
                self._ids.setdefault(_where(key, doc), []).append(key)
                self._next_id = max(self._next_id, key + 1)

    @classmethod
    def open(
        cls, path: str, *, fsync: str | float = "always", readonly: bool = False
    ) -> KeyedClaimStore:
        return cls(KeyedLog.open(path, fsync=fsync, readonly=readonly))

    def records(self) -> Iterable[tuple[str, str, Any]]:
        for key, doc in self.keyed.iter_items(LOG_TABLE):
            tenant, topic = _where(key, doc)
            yield tenant, topic, doc

    async def put(self, tenant: str, topic: str, value: Any) -> None:
        await self.keyed.commit(self._put_ops(tenant, topic, value))

    async def delete(self, tenant: str, topic: str) -> None:
        ops = self._delete_ops(tenant, topic)
        if ops:
            await self.keyed.commit(ops)

    def put_sync(self, tenant: str, topic: str, value: Any) -> None:
        """``put`` for tools without an event loop (blocks until durable)."""
        self.keyed.commit_sync(self._put_ops(tenant, topic, value))

    def delete_sync(self, tenant: str, topic: str) -> None:
        ops = self._delete_ops(tenant, topic)
        if ops:
            self.keyed.commit_sync(ops)

    def close(self) -> None:
        self.keyed.close()

    def _put_ops(self, tenant: str, topic: str, value: Any) -> list[Op]:
        ids = self._ids.get((tenant, topic))
        if ids is None:
            ids = self._ids[(tenant, topic)] = [self._next_id]
            self._next_id += 1
        document = {**value, "tenant": tenant, "topic": topic}
        # a topic found under several ids (a tampered store) ends with exactly one
        ops: list[Op] = [Put(LOG_TABLE, ids[0], document)]
        ops.extend(Delete(LOG_TABLE, extra) for extra in ids[1:])
        del ids[1:]
        return ops

    def _delete_ops(self, tenant: str, topic: str) -> list[Op]:
        return [Delete(LOG_TABLE, key) for key in self._ids.pop((tenant, topic), ())]

    async def aclose(self) -> None:
        await self.keyed.aclose()
