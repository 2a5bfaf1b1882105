"""An example authorizer plugin for edge-broker (README "Authorizers").

Configure it with::

    [[authorizers]]
    name = "guard"
    class = "topic_guard:TopicGuard"     # the module must be importable (PYTHONPATH)
    timeout = 0.5
    fallback = "deny"
    options = { forbidden_prefix = "forbidden/", admin_prefix = "admin/" }

Behaviour (modelled on the publish and subscription authorizer examples of HiveMQ's
extension SDK):
- admins (username "admin") may publish and subscribe under ``admin/``: allow;
- anything under ``forbidden/``: deny with 0x87 and a reason;
- a PUBLISH with the user property ``notallowed``: disconnect with 0x98 Administrative action;
- topic ``slow/...``: takes 2 s to answer (shows the timeout and its fallback);
- topic ``boom/...``: raises (shows that a failing plugin falls back, the broker keeps running);
- everything else: next (the default permissions decide).
"""

from __future__ import annotations

import asyncio
from typing import Any

from edge_broker.authz.authorizers import Outcome, PublishRequest, SubscribeRequest


class TopicGuard:
    def __init__(self, options: dict[str, Any]) -> None:
        self.forbidden = str(options.get("forbidden_prefix", "forbidden/"))
        self.admin = str(options.get("admin_prefix", "admin/"))

    async def _decide(self, topic: str, username: str | None) -> Outcome | None:
        if topic.startswith("slow/"):
            await asyncio.sleep(2)
        if topic.startswith("boom/"):
            raise RuntimeError("the example plugin fails on purpose")
        if topic.startswith(self.admin) and username == "admin":
            return Outcome.allow()
        if topic.startswith(self.forbidden):
            return Outcome.deny(0x87, f"{topic} is forbidden by the topic guard")
        return None

    async def authorize_publish(self, request: PublishRequest) -> Outcome:
        if any(key == "notallowed" for key, _ in request.user_properties):
            return Outcome.disconnect(0x98, "user property not allowed")
        return await self._decide(request.topic, request.identity.username) or Outcome.next()

    async def authorize_subscribe(self, request: SubscribeRequest) -> Outcome:
        return await self._decide(request.topic_filter, request.identity.username) or Outcome.next()
