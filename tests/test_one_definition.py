"""One definition each (CONVENTIONS.md, issue 21 item 5): the words of the specs that decide
access are spelled in one module, so no second copy can disagree with it (two copies of the
reserved-topic rule once disagreed about the ``.`` separator and let clients publish into
SMOKER's system topics). docs/architecture.md lists where each lives."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from edge_broker.authz.acl_config import AclMessage
from edge_broker.authz.acl_mqtt import PUBLISH_MESSAGES
from edge_broker.authz.request import message_kind
from edge_broker.matching import mqtt_topics
from edge_broker.matching.subscription_patterns import is_runtime_pattern, parse_pattern
from edge_broker.mqtt import names as codec_names
from edge_broker.mqtt.packets import Properties

PACKAGE = Path(__file__).resolve().parent.parent / "edge_broker"

# spelling → the one module (under edge_broker/) allowed to write it as a string literal
SPELLED_IN: dict[str, str] = {
    "$share": "matching/mqtt_topics.py",
    # the codec's wire spelling: mqtt/ imports nothing of ours (checked equal below)
    "$share/": "mqtt/names.py",
    "$SYS": "matching/reserved_topics.py",
    "$SYS/": "matching/reserved_topics.py",
    "access/claim": "matching/reserved_topics.py",
    "access/unclaim": "matching/reserved_topics.py",
    "access/claims/": "matching/reserved_topics.py",
}


def _literals(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_reserved_topics_and_share_are_spelled_once() -> None:
    copies = [
        f"edge_broker/{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for text, line in _literals(path)
        if text in SPELLED_IN and path.relative_to(PACKAGE).as_posix() != SPELLED_IN[text]
    ]
    assert not copies, f"import the one definition instead of spelling it again: {copies}"


def test_the_codec_spells_share_as_matching_does() -> None:
    assert codec_names.SHARE_PREFIX == mqtt_topics.SHARE_PREFIX + "/"


def test_no_second_table_of_acl_publish_messages() -> None:
    """The put/delete/query/reply order lives in authz/acl_mqtt.py alone."""
    users = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "AclMessage.DELETE" in path.read_text(encoding="utf-8")
    )
    assert users == ["authz/acl_mqtt.py"]
    props = Properties(response_topic="r", correlation_data=b"c")
    assert PUBLISH_MESSAGES[message_kind(True, b"", props)] is AclMessage.DELETE
    assert PUBLISH_MESSAGES[message_kind(False, b"x", props)] is AclMessage.QUERY


def test_runtime_pattern_detection_is_the_parsers_view() -> None:
    """Whatever is_runtime_pattern calls a runtime pattern is parsed as one (or refused), and
    every MQTT filter is left to MQTT."""
    for text in ("a/*", "a/b*", ">", "a/p>", "re#", "a/p#", "*/x"):
        assert is_runtime_pattern(text)
        parse_pattern(text)
    for text in ("#", "a/#", "+/b", "a/b", "$SYS/#"):
        assert not is_runtime_pattern(text)
    assert is_runtime_pattern("a.re#", ".") and not is_runtime_pattern("a.#", ".")


# -- issue 28 item 4: one definition per concept ---------------------------------------------

# names that may be defined (def, class, or a module-level assignment) in one module only
DEFINED_ONCE: tuple[str, ...] = (
    "DEFAULT_TENANT",
    "PUBREL_HEAD",
    "MAX_TOPIC_BYTES",
    "_password_entries",
    # MQTT topic validation: matching/mqtt_topics.py (the codec's copy is gone)
    "validate_topic_name",
    "validate_topic_filter",
)


@cache
def _modules() -> tuple[tuple[Path, str, ast.Module], ...]:
    """Every module of the package as (path, text, tree), parsed once for all the tests."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.append((path, text, ast.parse(text)))
    return tuple(found)


def _definitions(name: str) -> list[str]:
    found = []
    for path, _, tree in _modules():
        for node in tree.body:
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            if name in names:
                found.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}")
    return found


def test_each_concept_is_defined_once() -> None:
    copies = {name: _definitions(name) for name in DEFINED_ONCE}
    assert all(len(where) <= 1 for where in copies.values()), copies
    assert _definitions("DEFAULT_TENANT") == ["matching/names.py:20"]


def test_the_default_tenant_is_spelled_once() -> None:
    """PATTERNS.md D14's ``~`` as a string literal only where DEFAULT_TENANT is defined."""
    copies = sorted(
        f"{path.relative_to(PACKAGE).as_posix()}:{line}"
        for path in PACKAGE.rglob("*.py")
        for text, line in _literals(path)
        if text == "~" and path.relative_to(PACKAGE).as_posix() != "matching/names.py"
    )
    assert not copies, f"import DEFAULT_TENANT instead: {copies}"


def test_one_json5_reader() -> None:
    """JSON5 is read by authz/json5_text.py alone (fast, with the json5 package's messages)."""
    readers = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path, _, tree in _modules()
        if any(
            isinstance(node, ast.Import | ast.ImportFrom)
            and any(
                (getattr(node, "module", None) or alias.name).split(".")[0] == "json5"
                for alias in node.names
            )
            for node in ast.walk(tree)
        )
    )
    assert readers == ["authz/json5_text.py"]


def test_the_authentication_methods_build_identity_in_one_place() -> None:
    """What the connection says of an accepted client (client id, tenant asked for, certificate
    CN, interface, addresses) is copied into its Identity by AuthRequest.identity_for alone."""
    builders = sorted(
        f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}"
        for path, _, tree in _modules()
        if path.parent.name == "auth"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Identity"
    )
    assert [b.split(":")[0] for b in builders] == ["auth/method_api.py"], builders


def test_tls_contexts_are_built_in_one_module() -> None:
    """Every SSLContext (listeners, bridges, policy sync's uplink) comes from edge_broker/tls.py;
    config/preflight.py only tries the listener's files in a scratch context."""
    builders = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path, text, _ in _modules()
        if "create_default_context" in text or "load_cert_chain" in text
    )
    assert builders == ["config/preflight.py", "tls.py"], builders
    assert _definitions("_no_password") == []
    assert [w.split(":")[0] for w in _definitions("tls_context")] == ["broker/listeners.py"]


def test_the_bundle_body_is_encoded_in_one_module() -> None:
    """The canonical body of a policy bundle (format id, header checks, CBOR) is built by
    sync/bundle.py alone; the Spark compiler calls its bundle_body/sign_body instead of
    importing its private checks."""
    builders = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path, text, _ in _modules()
        if "BODY_FORMAT" in text
    )
    assert builders == ["sync/bundle.py"], builders
    private_imports = sorted(
        f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno}"
        for path, _, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").endswith("bundle")
        and any(alias.name.startswith("_") for alias in node.names)
    )
    assert not private_imports, private_imports


def test_the_matching_tries_name_their_node_types_apart() -> None:
    """Five trie modules each had a class ``_Node`` for five different shapes (MQTT filters,
    seed-001 patterns, key expressions, first-match rules, concrete topics); a class name is
    now defined once in matching/, so a reader (and a grep) finds the one that is meant."""
    seen: dict[str, list[str]] = {}
    for path, _, tree in _modules():
        if path.parent.name != "matching":
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(path.name)
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}
