"""Per-client publish quotas (issue 16): ``[limits] publish_rate`` / ``publish_burst``
(PUBLISH packets per second) and ``publish_byte_rate`` / ``publish_byte_burst`` (topic and
payload bytes per second), two token buckets per connection.

Beyond a quota: MQTT 5 QoS 1/2 get PUBACK/PUBREC 0x97 Quota exceeded with a Reason String
naming the key (MQTT 5 §3.4.2.1 does not allow 0x96 in a PUBACK) and the message is dropped;
MQTT 5 QoS 0 gets DISCONNECT 0x96 Message rate too high (nothing else would tell it); MQTT 3.x
is disconnected (it has no way to be refused). The clock is the time the packet's bytes were
read (``Connection.last_rx``): no extra clock read on the hot path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...config import LimitsConfig


class PublishQuota:
    """The two token buckets of one connection; a rate of 0 disables that bucket."""

    __slots__ = ("rate", "burst", "tokens", "byte_rate", "byte_burst", "byte_tokens", "at")

    def __init__(self, limits: LimitsConfig, now: float) -> None:
        self.rate = limits.publish_rate
        self.burst = float(limits.publish_burst)
        self.tokens = self.burst
        self.byte_rate = limits.publish_byte_rate
        self.byte_burst = float(limits.publish_byte_burst)
        self.byte_tokens = self.byte_burst
        self.at = now

    @classmethod
    def from_limits(cls, limits: LimitsConfig, now: float) -> PublishQuota | None:
        if not limits.publish_rate and not limits.publish_byte_rate:
            return None
        return cls(limits, now)

    def take(self, now: float, size: int) -> str | None:
        """Spend one message and ``size`` bytes; the ``[limits]`` key that refused, or None."""
        elapsed = now - self.at
        self.at = now
        if self.rate:
            tokens = self.tokens + elapsed * self.rate
            if tokens > self.burst:
                tokens = self.burst
            if tokens < 1.0:
                self.tokens = tokens
                return "publish_rate"
            self.tokens = tokens - 1.0
        if self.byte_rate:
            tokens = self.byte_tokens + elapsed * self.byte_rate
            if tokens > self.byte_burst:
                tokens = self.byte_burst
            if tokens < size:
                self.byte_tokens = tokens
                return "publish_byte_rate"
            self.byte_tokens = tokens - size
        return None


def quota_reason(limit: str, limits: LimitsConfig) -> str:
    if limit == "publish_rate":
        return (
            f"more than limits.publish_rate ({limits.publish_rate:g} messages/s, "
            f"burst {limits.publish_burst})"
        )
    return (
        f"more than limits.publish_byte_rate ({limits.publish_byte_rate:g} bytes/s, "
        f"burst {limits.publish_byte_burst})"
    )
