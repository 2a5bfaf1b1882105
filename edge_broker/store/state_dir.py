"""Where the broker's logs live: one decision for the broker's sessions and retained messages,
the claims store, the bridges' queues and the policy-sync state."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "EDGE_BROKER_STATE_DIR"
SYSTEM_STATE_DIR = "/var/lib/edge-broker"
USER_STATE_DIR = "var/edge-broker"  # relative to the working directory


def state_dir(config: object) -> Path:
    """The broker's state directory: ``[persistence] state_dir`` when the config has one, else
    ``$EDGE_BROKER_STATE_DIR``, else /var/lib/edge-broker when writable, else ./var/edge-broker.

    ``config`` is the loaded configuration (``edge_broker.config.Config``); only its
    ``persistence.state_dir`` is read, so the stores below the configuration can call this."""
    persistence = getattr(config, "persistence", None)
    configured = getattr(persistence, "state_dir", None)
    if isinstance(configured, str) and configured:
        return Path(configured)
    from_env = os.environ.get(STATE_DIR_ENV)
    if from_env:
        return Path(from_env)
    if os.access(SYSTEM_STATE_DIR, os.W_OK):
        return Path(SYSTEM_STATE_DIR)
    return Path(USER_STATE_DIR)
