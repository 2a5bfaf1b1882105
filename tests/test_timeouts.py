"""A hung test fails with its traceback instead of stalling CI: pyproject's global ``timeout``
(pytest-timeout) bounds every test; a soak test gets ``SOAK_TIMEOUT`` unless it names its own."""

from __future__ import annotations

import pytest

from tests.conftest import SOAK_TIMEOUT, pytest_collection_modifyitems

pytest_plugins = ["pytester"]


def test_every_test_has_the_global_timeout(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300


def test_soak_tests_get_the_soak_timeout_unless_they_set_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_plain(): pass

        @pytest.mark.soak
        def test_soak(): pass

        @pytest.mark.soak
        @pytest.mark.timeout(7)
        def test_soak_own(): pass
        """
    )
    items, _ = pytester.inline_genitems("-m", "soak or not soak")
    pytest_collection_modifyitems(items)
    limits = {
        item.name: (mark.args[0] if (mark := item.get_closest_marker("timeout")) else None)
        for item in items
    }
    assert limits == {"test_plain": None, "test_soak": SOAK_TIMEOUT, "test_soak_own": 7}
