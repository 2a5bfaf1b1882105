"""A tenant's isolated topic space (AUTHZ.md §1): its subscription index, retained messages and
shared subscription groups. Nothing crosses topic spaces.

Subscriptions that use runtime patterns (PATTERNS.md §2: ``*``, ``>``, ``p*``, ``p#``, ``p>``;
``broker/pattern_subscriptions.py``) live in a second index, a :class:`PatternTrie` created on
first use, with the same key/value shape; :meth:`TopicSpace.match` returns the hits of both.

The subscription trie maps a filter to ``{key: value}``: for an ordinary subscription the key is
the client id and the value its :class:`SubscriptionEntry`; a shared subscription group
(MQTT 5 §4.8.2) is one entry whose key is ``(SHARE_PREFIX, group)`` and value a
:class:`SharedGroup`.

Two pattern texts can name one pattern (with ``/``, ``+`` is ``*``: ``a/+/#`` and ``a/*/#``); a
session may hold both, as two subscriptions, but the pattern index has one slot per pattern and
key. The slot holds the latest of them, and unsubscribing one text leaves the other routed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from ..matching.errors import RuleError
from ..matching.mqtt_topics import SHARE_PREFIX
from ..matching.names import DEFAULT_TENANT
from ..matching.pattern_trie import PatternTrie
from ..matching.routing_index import DEFAULT_RESULT_CACHE_BYTES
from ..matching.subscription_patterns import SubscriptionPattern, parse_pattern
from ..matching.subscription_trie import SubscriptionTrie
from .limits.limit_hits import LimitHits
from .message import Message
from .retained import MemoryRetainedStore, RetainedStore
from .session import SubscriptionEntry

SubscriptionKey = str | tuple[str, str]

TENANT_CACHE_SHARE = 128
"""A tenant's space but the default one gets routing caches of ``routing_cache_bytes`` / 128
(8 KiB each with the default): ``max_tenants`` spaces × two caches of 1 MiB would be 1 GiB."""


def space_cache_bytes(tenant: str, routing_cache_bytes: int) -> int:
    """``[limits] routing_cache_bytes`` for the default tenant's space, a share for others."""
    if tenant == DEFAULT_TENANT:
        return routing_cache_bytes
    return routing_cache_bytes // TENANT_CACHE_SHARE


class TenantSpaces(Protocol):
    """What :func:`new_tenant_refusal` reads and calls of the broker."""

    @property
    def topic_spaces(self) -> dict[str, TopicSpace]: ...
    def topic_space(self, tenant: str) -> TopicSpace: ...
    def free_empty_topic_spaces(self) -> int: ...
    @property
    def limit_hits(self) -> LimitHits: ...


def new_tenant_refusal(
    broker: TenantSpaces, tenant: str, max_tenants: int, client_id: str
) -> str | None:
    """The Reason String when a CONNECT into ``tenant`` would make the broker hold more than
    ``max_tenants`` topic spaces besides the default one ([limits] max_tenants, issue 34);
    otherwise ``None``, and the space is made now (counted before the next CONNECT). Spaces
    nobody uses any more are freed first."""
    spaces = broker.topic_spaces
    if tenant in spaces:
        return None
    if len(spaces) - (DEFAULT_TENANT in spaces) >= max_tenants:
        broker.free_empty_topic_spaces()
        if len(spaces) - (DEFAULT_TENANT in spaces) >= max_tenants:
            shown = tenant if len(tenant) <= 64 else f"{tenant[:64]}... ({len(tenant)} bytes)"
            reason = (
                f"the broker already holds {max_tenants} tenants' topic spaces (limits.max_tenants)"
                f"; tenant {shown!r} would be one more"
            )
            broker.limit_hits.hit("limits.max_tenants", f"CONNECT refused: {reason}", client_id)
            return reason
    broker.topic_space(tenant)
    return None


class SharedGroup:
    """Members of ``$share/<group>/<filter>``; each message goes to one of them, round robin,
    preferring online members (MQTT 5 §4.8.2)."""

    __slots__ = ("name", "topic_filter", "members", "_next")

    def __init__(self, name: str, topic_filter: str) -> None:
        self.name = name
        self.topic_filter = topic_filter
        self.members: dict[str, SubscriptionEntry] = {}
        self._next = 0

    def pick(self, qos: int) -> SubscriptionEntry | None:
        """The next online member; for QoS 1/2 an offline member's session if none is online
        (its queue keeps the message); ``None`` when the message cannot be delivered."""
        members = list(self.members.values())
        n = len(members)
        if not n:
            return None
        start = self._next % n
        for i in range(n):
            entry = members[(start + i) % n]
            conn = entry.session.connection
            if conn is not None and not conn.paused:
                self._next = start + i + 1
                return entry
        if qos == 0:
            return None
        entry = members[start]
        self._next = start + 1
        return entry


class TopicSpace:
    __slots__ = (
        "tenant",
        "trie",
        "patterns",
        "retained",
        "shared",
        "_pattern_texts",
        "_cache_bytes",
        "sys_retained",
    )

    def __init__(
        self,
        tenant: str,
        separator: str = "/",
        retained: RetainedStore | None = None,
        cache_bytes: int = DEFAULT_RESULT_CACHE_BYTES,  # [limits] routing_cache_bytes
        sys_retained: RetainedStore | None = None,
    ):
        self.tenant = tenant
        # the broker-wide $SYS values every tenant but the default one shares (sys_topics.py)
        self.sys_retained = sys_retained
        self._cache_bytes = cache_bytes
        self.trie: SubscriptionTrie[SubscriptionKey, object] = SubscriptionTrie(
            separator, cache_bytes=cache_bytes
        )
        self.patterns: PatternTrie[SubscriptionKey, object] | None = None
        self.retained: RetainedStore = (
            retained if retained is not None else MemoryRetainedStore(separator)
        )
        self.shared: dict[tuple[str, str], SharedGroup] = {}
        # (key, pattern's body and tail) -> {text: value} for every text naming that pattern
        self._pattern_texts: dict[tuple[SubscriptionKey, object], dict[str, object]] = {}

    def subscribe(
        self,
        entry: SubscriptionEntry,
        topic_filter: str,
        pattern: SubscriptionPattern | None = None,
    ) -> None:
        """Add or replace the session's subscription on the (inner) ``topic_filter``; with
        ``pattern`` (its compiled runtime pattern) in the pattern index."""
        client_id = entry.session.client_id
        if entry.share_group is None:
            if pattern is None:
                self.trie.add(topic_filter, client_id, entry)
            else:
                self._add_pattern(pattern, client_id, entry)
            return
        key = (entry.share_group, topic_filter)
        group = self.shared.get(key)
        if group is None:
            group = self.shared[key] = SharedGroup(entry.share_group, topic_filter)
            if pattern is None:
                self.trie.add(topic_filter, (SHARE_PREFIX, entry.share_group), group)
            else:
                self._add_pattern(pattern, (SHARE_PREFIX, entry.share_group), group)
        group.members[client_id] = entry

    def _patterns(self) -> PatternTrie[SubscriptionKey, object]:
        if self.patterns is None:
            self.patterns = PatternTrie(self.trie.separator, cache_bytes=self._cache_bytes)
        return self.patterns

    def _add_pattern(
        self, pattern: SubscriptionPattern, key: SubscriptionKey, value: object
    ) -> None:
        texts = self._pattern_texts.setdefault((key, (pattern.steps, pattern.tail)), {})
        texts.pop(pattern.text, None)
        texts[pattern.text] = value  # the latest last
        self._patterns().add(pattern, key, value)

    def _remove(self, topic_filter: str, key: SubscriptionKey) -> None:
        """From whichever index holds it: a session has one entry per filter text."""
        if self.trie.remove(topic_filter, key) or self.patterns is None:
            return
        try:
            pattern = parse_pattern(topic_filter, self.trie.separator)
        except RuleError:
            return  # not a valid pattern: it can only have been in the MQTT trie
        canonical = (key, (pattern.steps, pattern.tail))
        texts = self._pattern_texts.get(canonical)
        if texts is None or texts.pop(topic_filter, None) is None:
            return  # not subscribed under this text
        if texts:  # another text names the same pattern: it stays routed
            self.patterns.add(pattern, key, next(reversed(texts.values())))
            return
        del self._pattern_texts[canonical]
        self.patterns.remove(pattern, key)

    def unsubscribe(self, entry: SubscriptionEntry, topic_filter: str) -> None:
        client_id = entry.session.client_id
        if entry.share_group is None:
            self._remove(topic_filter, client_id)
            return
        key = (entry.share_group, topic_filter)
        group = self.shared.get(key)
        if group is None:
            return
        group.members.pop(client_id, None)
        if not group.members:
            del self.shared[key]
            self._remove(topic_filter, (SHARE_PREFIX, entry.share_group))

    def match(self, topic: str) -> tuple[Mapping[SubscriptionKey, object], ...]:
        """Subscriber mappings of every filter and pattern matching ``topic``. Patterns never
        match ``$`` topics (no channel name starts with ``$``, PATTERNS.md §1)."""
        hits = self.trie.match(topic)
        patterns = self.patterns
        if patterns is None or not len(patterns) or topic[:1] == "$":
            return hits
        more = patterns.match(topic)
        return hits + more if more else hits

    def retained_matching(
        self, topic_filter: str, pattern: SubscriptionPattern | None, now: float
    ) -> Iterator[Message]:
        """Retained messages selected by a new subscription (MQTT filter or runtime pattern);
        the shared ``$SYS`` values for a filter that names that root (patterns never match a
        ``$`` topic)."""
        if pattern is None:
            yield from self.retained.matching(topic_filter, now)
            sys_retained = self.sys_retained
            if sys_retained is not None and topic_filter[:1] == "$":
                yield from sys_retained.matching(topic_filter, now)
            return
        for message in self.retained.matching("#", now):
            if pattern.matches(message.topic):
                yield message

    def is_empty(self) -> bool:
        """No subscription and no retained message but the broker's own ``$SYS`` ones: nothing
        a new space would not hold as well (issue 16: empty tenant spaces are freed)."""
        return (
            not len(self.trie)
            and (self.patterns is None or not len(self.patterns))
            and not self.shared
            and self.retained.only_dollar_topics()
        )

    def subscription_count(self) -> int:
        indexed = len(self.trie) + (len(self.patterns) if self.patterns is not None else 0)
        indexed += sum(len(texts) - 1 for texts in self._pattern_texts.values())  # aliases
        return indexed - len(self.shared) + sum(len(g.members) for g in self.shared.values())
