"""Applying a new policy at run time (AUTHZ.md §2 "Policies change at run time"; issue 4 reload).

``apply_config`` is the one path every policy change takes: SIGHUP and ``edge-broker reload``
(a new config file), and signed bundles from the cloud (``edge_broker.sync``). It never fails
open: the new configuration was validated by :func:`~edge_broker.config.load_config`, and here
everything is compiled (authorizers instantiated, permission sets, gates) before anything is
swapped; a failure keeps the old policy and says why. After the swap the generation moves,
authentication chains are rebuilt on the next CONNECT (new password file, token keys), and
live password connections are judged again (entry removed or hash changed: ended; roles and
tenants changed: applied), and every session — online and offline — is judged again on the
one path of ``broker/rejudge.py``: subscriptions the new policy denies are removed (logged,
counted, audited) with what was queued under them, those it allows take the new policy's
``recheck`` marking.

Listeners cannot change without a restart; a reload that changes them applies everything else
and logs that the listener changes wait for a restart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from .rejudge import RejudgeHost, recheck_credentials, recheck_subscriptions, remove_subscription

__all__ = ["ReloadResult", "apply_config", "recheck_subscriptions", "remove_subscription"]

if TYPE_CHECKING:
    from ..authz.policy import Policy
    from ..config import Config
    from .scheduler import Scheduler

log = logging.getLogger("edge_broker.broker")


class ReloadHost(RejudgeHost, Protocol):
    """What a policy change swaps in the broker (``Broker`` is one), besides what judging the
    sessions again needs."""

    config: Config
    policy: Policy
    generation: int  # bumped by every policy change

    @property
    def timers(self) -> Scheduler: ...

    def build_policy(self, config: Config) -> Policy: ...

    def reset_authentication(self) -> None: ...

    def end_sessions_of_lost_owners(self, why: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ReloadResult:
    ok: bool
    message: str
    subscriptions_checked: int = 0
    subscriptions_removed: int = 0


async def apply_config(broker: ReloadHost, new: Config, source: str) -> ReloadResult:
    """Compile ``new``'s policy, swap it in, re-check subscriptions (module docstring)."""
    old = broker.config
    if new.listeners != old.listeners:
        log.warning(
            "%s: listener changes take effect after a restart; applying the rest",
            source,
            extra={"event": "reload_listeners_kept"},
        )
        new = replace(new, listeners=old.listeners)
    if new.bridges != old.bridges:  # issue 19: the running bridges keep their queues and links
        log.warning(
            "%s: bridge changes take effect after a restart; applying the rest",
            source,
            extra={"event": "reload_bridges_kept"},
        )
        new = replace(new, bridges=old.bridges)
    if new.topics.separator != old.topics.separator:
        message = (
            f"{source}: topics.separator cannot change at run time; restart the broker to change it"
        )
        log.error(message, extra={"event": "reload_refused"})
        _audit(broker, "policy_rejected", message)
        return ReloadResult(False, message)
    try:
        policy = broker.build_policy(new)
    except Exception as exc:  # a plugin's constructor, a key file gone since validation, ...
        message = f"{source}: the new policy cannot be compiled ({exc}); the running policy is kept"
        log.error(message, extra={"event": "reload_refused"})
        _audit(broker, "policy_rejected", message)
        return ReloadResult(False, message)
    old_pipeline = broker.policy.pipeline
    if old_pipeline is not None and policy.pipeline is not None:
        # per-rule counters are monotonic across policy changes (Prometheus counters)
        policy.pipeline.hits, policy.pipeline.denials = old_pipeline.hits, old_pipeline.denials
    broker.config = new
    broker.policy = policy
    broker.timers.at("reload", broker.clock())  # a tick now: connect timeout, $SYS (scheduler.py)
    broker.reset_authentication()
    broker.generation += 1
    ended = recheck_credentials(broker, new, source)  # first: the survivors' new roles count
    # sessions whose owner was removed, or whose id the new password file binds to others
    sessions_ended = broker.end_sessions_of_lost_owners(source)
    checked, removed = await recheck_subscriptions(broker, source)
    message = (
        f"{source}: policy applied (generation {broker.generation}); "
        f"{checked} subscription(s) checked, {removed} removed"
    )
    if ended:
        message += f"; {ended} connection(s) ended (password entry removed or changed)"
    if sessions_ended:
        message += f"; {sessions_ended} session(s) ended (owner removed or id bound to others)"
    log.info(
        message,
        extra={
            "event": "policy_applied",
            "generation": broker.generation,
            "subscriptions_removed": removed,
        },
    )
    _audit(broker, "policy_applied", message)
    return ReloadResult(True, message, checked, removed)


def _audit(broker: ReloadHost, event: str, detail: str) -> None:
    if broker.audit is not None:
        broker.audit.event(event, detail=detail)
