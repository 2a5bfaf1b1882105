"""``scripts/test`` runs pytest with ``--dist loadgroup``; tests/conftest.py puts the tests that
share an expensive fixture on one worker: every user of the Spark session in one group, the
tests of a module sharing a module-scoped fixture in that module's group, the rest anywhere."""

from __future__ import annotations

import pytest

from tests.conftest import pytest_collection_modifyitems

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
