"""Every example of seed 000 (token rules) with '.' and again with '/' (PATTERNS.md §3)."""

from __future__ import annotations

import pytest

from edge_broker.matching.errors import RuleError
from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet
from edge_broker.matching.token_rules import PubRule, SubRule

SEPARATORS = [".", "/"]


def sep_(text: str, sep: str) -> str:
    """The seed's text written with ``sep`` (PATTERNS.md "The separator")."""
    return text.replace(".", sep)


# -- publish rules -------------------------------------------------------------------------------

PUB_EXAMPLES = [
    # Exact rule: only store.sell.status is allowed.
    ("store.sell.status", "store.sell.status", True),
    ("store.sell.status", "store.sell", False),
    ("store.sell.status", "store.sell.status.v2", False),
    ("store.sell.status", "store.buy.status", False),
    # Prefix tree: store.sell.# allows store.sell, store.sell.status, store.sell.status.v2, etc.
    ("store.sell.#", "store.sell", True),
    ("store.sell.#", "store.sell.status", True),
    ("store.sell.#", "store.sell.status.v2", True),
    ("store.sell.#", "store", False),
    ("store.sell.#", "store.buy", False),
    # Alternatives: orders.(eu|us|a*).#
    ("orders.(eu|us|a*).#", "orders.eu", True),
    ("orders.(eu|us|a*).#", "orders.us.west", True),
    ("orders.(eu|us|a*).#", "orders.asia.east", True),
    ("orders.(eu|us|a*).#", "orders.ru", False),
    # Tail > vs #
    ("events.#", "events", True),
    ("events.#", "events.click", True),
    ("events.#", "events.click.v2", True),
    ("events.>", "events.click", True),
    ("events.>", "events.click.v2", True),
    ("events.>", "events", False),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("rule", "channel", "allowed"), PUB_EXAMPLES)
def test_seed_publish_examples(sep: str, rule: str, channel: str, allowed: bool) -> None:
    parsed = PubRule.parse(sep_(rule, sep), sep)
    assert parsed.matches(sep_(channel, sep)) is allowed
    rules = PubRuleSet([parsed], sep)
    assert rules.allowed(sep_(channel, sep)) == (sep_(rule, sep) if allowed else None)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("store.?.status", "store.?.status: '?' is not allowed in publish rules"),
        ("store.*.status", "store.*.status: '*' is not allowed in publish rules"),
        ("store.#.status", "store.#.status: '#' must be the last segment"),
        ("store..sell", "store..sell: empty segment at position 2"),
    ],
)
def test_seed_invalid_publish_rules(sep: str, rule: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        PubRule.parse(sep_(rule, sep), sep)
    assert str(info.value).startswith(sep_(message, sep))
    assert info.value.rule == sep_(rule, sep)


# -- subscribe rules -----------------------------------------------------------------------------

SUB_EXAMPLES = [
    # Strict branch: store.sell.#
    ("store.sell.#", "store.sell", True),
    ("store.sell.#", "store.sell.status", True),
    ("store.sell.#", "store.sell.*", True),
    ("store.sell.#", "store.sell.#", True),
    ("store.sell.#", "store.*", False),
    ("store.sell.#", "store.buy.status", False),
    # Any-literal position: store.?.status.#
    ("store.?.status.#", "store.fi.status", True),
    ("store.?.status.#", "store.de.status.v2", True),
    ("store.?.status.#", "store.*.status", False),
    # Wildcard position: store.*.status
    ("store.*.status", "store.*.status", True),
    ("store.*.status", "store.fi.status", True),
    ("store.*.status", "store.fi.status.v2", False),
    # Alternatives: store.(sell|bay|b*).#
    ("store.(sell|bay|b*).#", "store.sell", True),
    ("store.(sell|bay|b*).#", "store.buy.status.v2", True),
    ("store.(sell|bay|b*).#", "store.bag.>", True),
    ("store.(sell|bay|b*).#", "store.pay.status", False),
    # Tail # vs >
    ("a.b.#", "a.b", True),
    ("a.b.#", "a.b.c", True),
    ("a.b.#", "a.b.c.d", True),
    ("a.b.>", "a.b.c", True),
    ("a.b.>", "a.b.c.d", True),
    ("a.b.>", "a.b", False),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("rule", "pattern", "allowed"), SUB_EXAMPLES)
def test_seed_subscribe_examples(sep: str, rule: str, pattern: str, allowed: bool) -> None:
    parsed = SubRule.parse(sep_(rule, sep), sep)
    assert parsed.accepts(sep_(pattern, sep)) is allowed
    rules = SubRuleSet([parsed], sep)
    assert rules.allowed(sep_(pattern, sep)) == (sep_(rule, sep) if allowed else None)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "store.sell|bay.status",
            "store.sell|bay.status: segment 'sell|bay': '|' outside parentheses; "
            "write '(sell|bay)'",
        ),
        (
            "store.(sell.status|buy).#",
            "store.(sell.status|buy).#: alternatives '(sell.status|buy)' contain the separator",
        ),
        ("store.#.status", "store.#.status: '#' must be the last segment"),
        ("store..sell", "store..sell: empty segment at position 2"),
    ],
)
def test_seed_invalid_subscribe_rules(sep: str, rule: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        SubRule.parse(sep_(rule, sep), sep)
    assert str(info.value).startswith(sep_(message, sep))


@pytest.mark.parametrize("sep", SEPARATORS)
def test_seed_multi_segment_alternative_is_two_rules(sep: str) -> None:
    """The seed's advice for `store.(sell.status|buy).#`: use two separate rules."""
    rules = SubRuleSet([sep_("store.sell.status.#", sep), sep_("store.buy.#", sep)], sep)
    assert rules.allowed(sep_("store.sell.status.x", sep)) == sep_("store.sell.status.#", sep)
    assert rules.allowed(sep_("store.buy.x", sep)) == sep_("store.buy.#", sep)
    assert rules.allowed(sep_("store.sell.x", sep)) is None


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("kind", [PubRule, SubRule])
def test_seed_limits(sep: str, kind: type[PubRule] | type[SubRule]) -> None:
    """Max 32 segments, max 128 bytes per segment, max 16 alternatives (both rule kinds)."""
    kind.parse(sep.join(["s"] * 32), sep)
    kind.parse(sep.join(["s"] * 31 + ["#"]), sep)
    kind.parse("x" * 128, sep)
    kind.parse("(" + "|".join(f"v{i}" for i in range(16)) + ")", sep)
    with pytest.raises(RuleError, match="33 segments; at most 32"):
        kind.parse(sep.join(["s"] * 33), sep)
    with pytest.raises(RuleError, match="33 segments; at most 32"):
        kind.parse(sep.join(["s"] * 32 + ["#"]), sep)
    with pytest.raises(RuleError, match="129 bytes; at most 128"):
        kind.parse("x" * 129, sep)
    with pytest.raises(RuleError, match="17 alternatives; at most 16"):
        kind.parse("(" + "|".join(f"v{i}" for i in range(17)) + ")", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_seed_001_token_rules_exact_and_prefix_tree(sep: str) -> None:
    """Seed 001: token channel rules `a.b.c` (exact) and `a.b.c.#` (base channel and deeper)."""
    pub = PubRuleSet([sep_("a.b.c", sep), sep_("x.y.#", sep)], sep)
    assert pub.allowed(sep_("a.b.c", sep)) == sep_("a.b.c", sep)
    assert pub.allowed(sep_("a.b.c.d", sep)) is None
    assert pub.allowed(sep_("x.y", sep)) == sep_("x.y.#", sep)
    assert pub.allowed(sep_("x.y.z.w", sep)) == sep_("x.y.#", sep)
    # "your runtime subscription must be a subset of what your token allows":
    sub = SubRuleSet([sep_("orders.#", sep)], sep)
    assert sub.allowed(sep_("orders.eu.*", sep)) == sep_("orders.#", sep)
    assert sub.allowed(sep_("orders.>", sep)) == sep_("orders.#", sep)
    assert sub.allowed(sep_("*.eu", sep)) is None
    assert sub.allowed("#") is None
