import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--dualpipe", default=os.environ.get("DUALPIPE_BIN", "build/dualpipe"),
                     help="the dualpipe command to test (default: build/dualpipe)")


@pytest.fixture
def dualpipe(request):
    path = request.config.getoption("--dualpipe")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no dualpipe command at {path}: build it first, or give --dualpipe PATH")
    return path


@pytest.fixture
def package():
    """The Python package `dualpipe` as installed (scripts/setup.sh, or pip install .)."""
    try:
        import dualpipe
    except ImportError as e:
        pytest.fail(f"the Python package dualpipe is not installed ({e}): run scripts/setup.sh, or pip install .")
    return dualpipe
