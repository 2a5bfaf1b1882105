"""A tenant's isolated topic space (AUTHZ.md §1): its subscription index, retained messages and
shared subscription groups. Nothing crosses topic spaces.

The subscription trie maps a filter to ``{key: value}``: for an ordinary subscription the key is
the client id and the value its :class:`SubscriptionEntry`; a shared subscription group
(MQTT 5 §4.8.2) is one entry whose key is ``("$share", group)`` and value a :class:`SharedGroup`.
"""

from __future__ import annotations

from ..matching.subscription_trie import SubscriptionTrie
from .retained import MemoryRetainedStore, RetainedStore
from .session import SubscriptionEntry

SubscriptionKey = str | tuple[str, str]


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
    __slots__ = ("tenant", "trie", "retained", "shared")

    def __init__(self, tenant: str, separator: str = "/", retained: RetainedStore | None = None):
        self.tenant = tenant
        self.trie: SubscriptionTrie[SubscriptionKey, object] = SubscriptionTrie(separator)
        self.retained: RetainedStore = (
            retained if retained is not None else MemoryRetainedStore(separator))
        self.shared: dict[tuple[str, str], SharedGroup] = {}

    def subscribe(self, entry: SubscriptionEntry, topic_filter: str) -> None:
        """Add or replace the session's subscription on the (inner) ``topic_filter``."""
        client_id = entry.session.client_id
        if entry.share_group is None:
            self.trie.add(topic_filter, client_id, entry)
            return
        key = (entry.share_group, topic_filter)
        group = self.shared.get(key)
        if group is None:
            group = self.shared[key] = SharedGroup(entry.share_group, topic_filter)
            self.trie.add(topic_filter, ("$share", entry.share_group), group)
        group.members[client_id] = entry

    def unsubscribe(self, entry: SubscriptionEntry, topic_filter: str) -> None:
        client_id = entry.session.client_id
        if entry.share_group is None:
            self.trie.remove(topic_filter, client_id)
            return
        key = (entry.share_group, topic_filter)
        group = self.shared.get(key)
        if group is None:
            return
        group.members.pop(client_id, None)
        if not group.members:
            del self.shared[key]
            self.trie.remove(topic_filter, ("$share", entry.share_group))

    def subscription_count(self) -> int:
        return len(self.trie) - len(self.shared) + sum(len(g.members) for g in self.shared.values())
