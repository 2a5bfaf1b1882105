"""How tests/conftest.py shapes a run. ``scripts/test`` runs pytest with ``--dist loadgroup``: the
tests that share an expensive fixture go to one worker (every user of the Spark session in one
group, the tests of a module sharing a module-scoped fixture in that module's group, the rest
anywhere). In CI a hypothesis property runs fewer examples; soak tests and local runs keep all.
An xdist run ends with where its time went: seconds per worker and the longest groups."""

from __future__ import annotations

from typing import Any

import hypothesis  # noqa: F401  (imported once: the inline runs below must not import their own)
import pytest

from tests.conftest import (
    CI_MIN_EXAMPLES,
    ROOT,
    ci_examples,
    group_of,
    pytest_collection_modifyitems,
)

pytest_plugins = ["pytester"]


def test_shared_fixtures_put_their_tests_in_one_group(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mod="""
        import pytest

        @pytest.fixture(scope="session")
        def spark(): return 1

        @pytest.fixture(scope="module")
        def module_thing(): return 2

        @pytest.fixture
        def uses_module_thing(module_thing): return module_thing

        def test_plain(): pass
        def test_spark(spark): pass
        def test_spark_and_module(spark, module_thing): pass
        def test_module(module_thing): pass
        def test_module_indirectly(uses_module_thing): pass

        @pytest.mark.xdist_group("mine")
        def test_own_group(module_thing): pass
        """
    )
    items, _ = pytester.inline_genitems("-p", "no:xdist")
    pytest_collection_modifyitems(items)
    groups = {
        item.name: [mark.args[0] for mark in item.iter_markers("xdist_group")] for item in items
    }
    assert groups == {
        "test_plain": [],
        "test_spark": ["spark"],
        "test_spark_and_module": ["spark"],
        "test_module": ["test_mod.py"],
        "test_module_indirectly": ["test_mod.py"],
        "test_own_group": ["mine"],
    }


PROPERTIES = """
import pytest
from hypothesis import given, settings, strategies as st

RUNS = []

@settings(max_examples=300, database=None)
@given(st.integers())
def test_many(x): RUNS.append(x)

@settings(max_examples=40, database=None)
@given(st.integers())
def test_few(x): pass

@given(st.integers())
def test_default(x): pass

@pytest.mark.soak
@settings(max_examples=300, database=None)
@given(st.integers())
def test_soak(x): pass

@pytest.mark.parametrize("p", [1, 2])
@settings(max_examples=90, database=None)
@given(st.integers())
def test_cases(p, x): pass
"""


def _examples(pytester: pytest.Pytester, ci: str | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    module = pytester.makepyfile(test_props=PROPERTIES)
    items, _ = pytester.inline_genitems(str(module), "-p", "no:xdist", "-m", "soak or not soak")
    pytest_collection_modifyitems(items)
    return items, {
        item.name: item.obj._hypothesis_internal_use_settings.max_examples for item in items
    }


def test_ci_runs_fewer_examples_and_soak_keeps_all(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (ci_examples(300), ci_examples(60), ci_examples(12)) == (100, CI_MIN_EXAMPLES, 12)
    items, counts = _examples(pytester, "true", monkeypatch)
    assert counts == {
        "test_many": 100,
        "test_few": CI_MIN_EXAMPLES,
        "test_default": 33,
        "test_soak": 300,
        "test_cases[1]": 30,  # the two cases share one test function, scaled once
        "test_cases[2]": 30,
    }
    many = next(item for item in items if item.name == "test_many")
    many.obj()  # hypothesis runs what the settings say
    assert 0 < len(many.module.RUNS) <= 100


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_outside_ci_every_example_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    _, counts = _examples(pytester, ci, monkeypatch)
    assert counts == {
        "test_many": 300,
        "test_few": 40,
        "test_default": 100,
        "test_soak": 300,
        "test_cases[1]": 90,
        "test_cases[2]": 90,
    }


def test_a_group_runs_on_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two xdist workers under ``--dist loadgroup`` (as scripts/test runs), the tests sharing
    a module-scoped fixture all run on one worker, whatever pytest keeps node ids in."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems  # noqa\n")
    pytester.makepyfile(
        test_shared="""
        import os, pytest

        @pytest.fixture(scope="module")
        def shared(): return 1

        def _note(kind):
            with open(f"{kind}-{os.environ['PYTEST_XDIST_WORKER']}", "a") as f:
                f.write("x")

        @pytest.mark.parametrize("i", range(8))
        def test_grouped(shared, i): _note("grouped")

        @pytest.mark.parametrize("i", range(8))
        def test_free(i): _note("free")
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=16)
    grouped = sorted(p.name for p in pytester.path.glob("grouped-*"))
    assert len(grouped) == 1, grouped  # one worker ran all eight
    assert (pytester.path / grouped[0]).read_text() == "x" * 8


def test_an_xdist_run_says_where_its_time_went(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of the run names each worker's seconds and the longest groups (else files), so
    a CI log shows its longest pole without a second run."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(
        "from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa\n"
    )
    pytester.makepyfile(
        test_grouped="""
        import pytest

        @pytest.fixture(scope="module")
        def shared(): return 1

        @pytest.mark.parametrize("i", range(3))
        def test_grouped(shared, i): pass
        """,
        test_alone="def test_alone(): pass\n",
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4)
    assert "test_grouped.py" in result.stdout.str() and "test_alone.py" in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*where the time went*",
            "seconds per xdist worker (the run's wall is the largest): gw0 *, gw1 *",
            "*longest xdist groups*",
            "*.[0-9]  test_*.py",
            "*.[0-9]  test_*.py",  # a group (test_grouped.py) and a file (test_alone.py)
        ]
    )


def test_group_of_a_node_id() -> None:
    assert group_of("tests/a.py::test_x[1]@tests/a.py") == "tests/a.py"
    assert group_of("tests/p.py::test_y@spark") == "spark"
    assert group_of("tests/b.py::test_z") == "tests/b.py"
    assert group_of("tests/b.py::test_mail[user@host]") == "tests/b.py"  # an @ in a parameter
