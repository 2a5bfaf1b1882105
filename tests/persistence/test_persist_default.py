"""Persistence is on by default exactly when a state directory is given (systemd's
StateDirectory=, $EDGE_BROKER_STATE_DIR, or [persistence] state_dir), and can always be forced."""

from __future__ import annotations

import pytest

from edge_broker.config import loads_config


@pytest.fixture(autouse=True)
def no_state_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.delenv("EDGE_BROKER_STATE_DIR", raising=False)


def test_off_for_ad_hoc_runs() -> None:
    assert loads_config("").persistence.enabled is False


@pytest.mark.parametrize("variable", ["STATE_DIRECTORY", "EDGE_BROKER_STATE_DIR"])
def test_on_when_the_environment_gives_a_state_directory(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "/var/lib/edge-broker")
    assert loads_config("").persistence.enabled is True
    assert loads_config("[persistence]\nenabled = false\n").persistence.enabled is False


def test_on_when_the_config_names_a_state_directory() -> None:
    assert loads_config('[persistence]\nstate_dir = "/tmp/x"\n').persistence.enabled is True
    assert loads_config("[persistence]\nenabled = true\n").persistence.enabled is True
