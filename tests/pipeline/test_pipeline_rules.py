"""The compile job's row checks (edge_broker/pipeline/rules.py) give the broker's own verdicts:
every invalid kind make-fleet injects is refused with the parser's reason; the valid rows pass.
Pure Python: no Spark."""

from __future__ import annotations

import base64

import pytest

from edge_broker.pipeline.fleet import ACL_ROWS, INVALID_KINDS, SETS
from edge_broker.pipeline.rules import check_acl, check_device, check_grant, check_permission

CHECKS = {
    "permissions": check_permission,
    "acl": check_acl,
    "grants": check_grant,
    "devices": check_device,
}


def _names_an_unknown_set(table: str, row: dict[str, str]) -> bool:
    return table == "devices" and row["sets"] == "nosuchset"


ROW_INVALID = [(t, r) for t, r in INVALID_KINDS if not _names_an_unknown_set(t, r)]


@pytest.mark.parametrize(
    ("table", "row"), ROW_INVALID, ids=[f"{t}-{i}" for i, (t, _) in enumerate(ROW_INVALID)]
)
def test_invalid_rows_are_refused_with_a_reason(table: str, row: dict[str, str]) -> None:
    reason = CHECKS[table](dict(row))
    assert reason, f"{table} row {row} was accepted"


def test_a_device_naming_an_unknown_set_is_left_to_the_join() -> None:
    """A row alone cannot know which sets exist: the row check accepts it and the compile job's
    join reports it (test_pipeline_compile.py counts ``unknown-set`` among the invalid rows)."""
    unknown = [r for t, r in INVALID_KINDS if _names_an_unknown_set(t, r)]
    assert len(unknown) == 1
    assert check_device(dict(unknown[0])) is None


def test_valid_rows_pass() -> None:
    for name, rules in SETS.items():
        for rule in rules:
            assert check_permission({"set": name, **rule}) is None
    for row in ACL_ROWS:
        assert check_acl(dict(row)) is None
    assert check_grant({"tenant": "t1", "direction": "pub", "rule": "sensors/>"}) is None
    assert check_grant({"tenant": None, "direction": "sub", "rule": "store/?/status/#"}) is None
    smoker = base64.b32encode(bytes(32)).decode()
    assert (
        check_device({"client_id": smoker, "smoker_id": smoker, "tenant": "t1", "sets": "sensor"})
        is None
    )


def test_reasons_are_the_parsers_words() -> None:
    assert "'#' must be the last segment" in (
        check_permission({"set": "s", "topic": "a/#/b"}) or ""
    )
    assert "'WRITE' is not one of" in (
        check_permission({"set": "s", "topic": "a", "activity": "WRITE"}) or ""
    )
    assert "'>' must be the last segment" in (
        check_grant({"direction": "pub", "rule": "a/>/b"}) or ""
    )
    assert "direction" in (check_grant({"direction": "both", "rule": "a"}) or "")
    assert "key_exprs" in (
        check_acl(
            {
                "id": "r",
                "permission": "deny",
                "messages": "put",
                "key_exprs": "a/**/**",
                "interfaces": "eth0",
            }
        )
        or ""
    )
    assert "tenant" in (check_device({"client_id": "c", "tenant": "a b", "sets": "s"}) or "")
    assert "sets" in (check_device({"client_id": "c", "sets": ""}) or "")
    assert "glob" in (check_device({"client_id": "c?", "sets": "s"}) or "")
