"""Issue 16: ``edge-broker check`` prints the memory budget of the [limits] and warns when it
exceeds the systemd unit's MemoryMax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from edge_broker.broker.server import Broker
from edge_broker.config import loads_config

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "edge-broker.service"


def check(tmp_path: Path, limits: str, unit: Path = UNIT) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "c.toml"
    f.write_text('[[listeners]]\nname = "a"\nport = 1883\n' + limits)
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", "check", "--config", str(f), "--unit", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_default_limits_fit_memory_max(tmp_path):
    """Issue 16: the defaults used to add up to 2,652 MiB (max_connections × max_packet_size
    being read and × write_buffer_high unsent); the read pool and the write-buffer total bound
    those broker-wide, so the defaults fit the unit's MemoryMax=200M with room to spare."""
    r = check(tmp_path, "")
    assert r.returncode == 0, r.stderr
    assert "memory budget" in r.stdout and "session queues" in r.stdout
    assert "WARNING" not in r.stdout
    assert "fits MemoryMax=200.0 MiB" in r.stdout
    total = float(next(x for x in r.stdout.splitlines() if x.split()[:1] == ["total"]).split()[1])
    # 181.5 MiB: every term measured again at about the default limits (issue 34), with
    # 12,000 subscriptions and 16,000 retained messages / 12 MiB
    assert total <= 185.0, r.stdout


def test_large_limits_exceed_memory_max_and_say_which_term(tmp_path):
    r = check(tmp_path, "[limits]\nread_buffer_size = 1048576\n")
    assert r.returncode == 0, r.stderr  # a warning, not an error
    assert "WARNING: the budget" in r.stdout and "MemoryMax=200.0 MiB" in r.stdout
    assert "largest term is packets being read" in r.stdout


def test_small_limits_fit(tmp_path):
    r = check(
        tmp_path,
        "[limits]\nmax_connections = 10\nmax_packet_size = 65536\n"
        "max_queued_bytes = 262144\nmax_subscriptions_per_client = 50\n"
        "max_retained_bytes = 8388608\nmax_retained_messages = 5000\n",
    )
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stdout
    assert "fits MemoryMax=200.0 MiB" in r.stdout


def test_unit_memory_max_is_read(tmp_path):
    unit = tmp_path / "u.service"
    unit.write_text("[Service]\nMemoryMax=1G\n")
    r = check(tmp_path, "[limits]\nmax_connections = 10\n", unit)
    assert "MemoryMax=1,024.0 MiB" in r.stdout


def test_cache_byte_bounds_are_limits_keys_counted_in_the_budget(tmp_path):
    """Issue 16: the decision, ACL and routing cache bounds were constants; they are [limits]
    keys, the caches obey them and check counts them (the gates' caches only when on)."""
    small = Broker(loads_config("[limits]\nrouting_cache_bytes = 2000\n"))
    default = Broker(loads_config(""))
    for broker in (small, default):
        trie = broker.topic_space("~").trie
        trie.add("a/#", "k", 1)
        for i in range(100):
            trie.match(f"a/{i}")
    assert small.topic_space("~").trie.cached_bytes <= 2000
    assert default.topic_space("~").trie.cached_bytes > 10_000
    r = check(tmp_path, "[limits]\nrouting_cache_bytes = 4194304\n")
    # + the per-source connect-rate buckets (issue 31): 10,000 × 250 B
    assert "10.4 MiB  2 × routing_cache_bytes + max_connect_sources × 250 B" in r.stdout
    r = check(tmp_path, "[limits]\ndecision_cache_bytes = 1048576\n[claims]\nenabled = true\n")
    assert (
        "5.4 MiB  2 × routing_cache_bytes + decision_cache_bytes (claims) + max_conn" in r.stdout
    ), r.stdout + r.stderr


def test_check_prints_the_tenant_and_principal_shares(tmp_path):
    r = check(tmp_path, "[limits]\nmax_connections = 100\ntenant_share = 0.4\n")
    assert r.returncode == 0, r.stderr
    assert "limits.tenant_share 0.4" in r.stdout and "limits.principal_share 0.25" in r.stdout
    quotas = r.stdout[r.stdout.index("quotas:") :].splitlines()
    line = next(x for x in quotas if x.strip().startswith("connections"))
    assert "per tenant           40;" in line and "per principal           25" in line
    r = check(tmp_path, "[limits]\ntenant_share = 0.2\n")  # below principal_share: an error
    assert r.returncode == 1
    assert "principal_share" in r.stderr and "lower it or raise tenant_share" in r.stderr


def test_open_tenants_and_claims_are_budgeted(tmp_path):
    """Issue 34: tenant spaces and claims were not in the budget."""
    r = check(tmp_path, "")
    assert "tenant spaces" in r.stdout and "no listener with tenant_choice = open" in r.stdout
    f = tmp_path / "open.toml"
    f.write_text('[[listeners]]\nname = "a"\nport = 1883\ntenant_choice = "open"\n')
    r = subprocess.run(
        [sys.executable, "-m", "edge_broker", "check", "--config", str(f), "--unit", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    line = next(x for x in r.stdout.splitlines() if x.split()[:2] == ["tenant", "spaces"])
    # max_tenants (500) x (2,000 B + 2 x routing_cache_bytes / 128): the tenants are bounded
    assert float(line.split()[2]) == 8.8 and "tenant_choice = open" in line, r.stdout
    assert "max_tenants" in line and "fits MemoryMax" in r.stdout, r.stdout


def test_claims_term_is_the_lesser_of_count_and_pool() -> None:
    """min(max_claims_total × per-claim cost at max_claim_bytes, max_claims_bytes): the byte
    pool at the defaults (10,000 claims of 16 KiB would be 266 MiB), the count when less."""
    from edge_broker.ops.memory_budget import claim_bytes, memory_budget

    def claims(text: str) -> int:
        config = loads_config('[[listeners]]\nname = "a"\nport = 1883\n' + text)
        return next(t.bytes for t in memory_budget(config) if t.name == "claims")

    assert claims("") == 0
    assert claims("[claims]\nenabled = true\n") == 4 * 1024 * 1024
    assert claims("[claims]\nenabled = true\nmax_claims_bytes = 1048576\n") == 1048576
    assert claims("[claims]\nenabled = true\nmax_claims_total = 10\n") == 10 * (
        1700 + int(1.6 * 16384)
    )
    assert claims(
        "[claims]\nenabled = true\nmax_claims_total = 500\nmax_claim_bytes = 2048\n"
        "max_claims_bytes = 1073741824\n"
    ) == 500 * claim_bytes(2048)


def test_claims_at_the_defaults_fit_memory_max() -> None:
    """With a SMOKER listener (claims and their decision cache on) and the other defaults, the
    worst case stays under the shipped unit's MemoryMax (issue 34)."""
    from edge_broker.ops.memory_budget import budget_report

    config = loads_config(
        '[[listeners]]\nname = "a"\nport = 1883\nauth_methods = ["smoker", "anonymous"]\n'
    )
    lines, over = budget_report(config, ROOT / "systemd" / "edge-broker.service")
    assert not over, "\n".join(lines)


def bridge(name: str = "cloud", keys: str = "") -> str:
    return (
        f'[[bridges]]\nname = "{name}"\naddress = "mqtt.example.com"\n{keys}'
        '[[bridges.topics]]\ndirection = "out"\nlocal = "sensors/#"\n'
    )


SMALL = "queue_max_messages = 10000\nqueue_max_bytes = 4194304\n"


def budget_line(out: str, name: str) -> str:
    return next(x for x in out.splitlines() if x.strip().startswith(name))


def test_bridge_queues_are_a_budget_term(tmp_path):
    """Issue 34: a bridge whose uplink is down holds up to its queue bounds in memory; check
    counts queue_max_bytes + queue_max_messages × the measured per-message cost, per bridge
    (twice the bounds: twice the term), and more per message when the queue is durable."""
    none = check(tmp_path, "")
    assert "no [[bridges]]" in budget_line(none.stdout, "bridge queues")
    one = check(tmp_path, bridge(keys=SMALL))
    line = budget_line(one.stdout, "bridge queues")
    assert "queue_max_bytes + queue_max_messages × 192 B" in line, line
    assert float(line.split()[2]) == round((4194304 + 10000 * 192) / (1 << 20), 1)
    two = check(tmp_path, bridge(keys=SMALL) + bridge("other", SMALL))
    assert float(budget_line(two.stdout, "bridge queues").split()[2]) == round(
        2 * (4194304 + 10000 * 192) / (1 << 20), 1
    )
    durable = check(tmp_path, f'[persistence]\nstate_dir = "{tmp_path}"\n' + bridge())
    assert "× 372 B (persistence on)" in budget_line(durable.stdout, "bridge queues")


def test_one_default_bridge_fits_memory_max(tmp_path):
    """Issue 34: the default limits with one bridge at its default queue bounds (in memory or
    durable) stay under the unit's MemoryMax=200M; the old bounds (100,000 messages, 32 MiB)
    did not."""
    for extra in ("", f'[persistence]\nstate_dir = "{tmp_path}"\n'):
        r = check(tmp_path, extra + bridge())
        assert r.returncode == 0, r.stderr
        assert "WARNING" not in r.stdout, r.stdout
        assert "fits MemoryMax=200.0 MiB" in r.stdout
    old = check(tmp_path, bridge(keys="queue_max_messages = 100000\nqueue_max_bytes = 33554432\n"))
    assert "WARNING: the budget" in old.stdout
    assert "largest term is bridge queues" in old.stdout
