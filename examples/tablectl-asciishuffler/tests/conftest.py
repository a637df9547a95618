"""The driver's own tests run tablectl's conformance kit (its pytest plugin)."""

import pytest

pytest_plugins = ["tablectl.conformance.plugin"]


@pytest.fixture
def tablectl_driver() -> str:
    return "asciishuffler"
