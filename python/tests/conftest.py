"""Shared helpers: the dagrun binary (skip when there is none) and torch (skip when missing).

With DAGRUN_TORCH_TEST_INSTALLED=1 (and DAGRUN_TORCH_TEST_REPO, the
checkout) the tests run against the installed
dagrun_torch (a wheel, as a user has it: scripts/test.sh installs one in a
fresh virtual environment) instead of the checkout's python/ folder, and a
missing dagrun binary is a failure, not a skip: the wheel carries one.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "testdata")
INSTALLED = os.environ.get("DAGRUN_TORCH_TEST_INSTALLED") == "1"
# The dagrun checkout (its specs/models/graphs): the folder above python/,
# or DAGRUN_TORCH_TEST_REPO where the tests run from a copy.
REPO = os.environ.get("DAGRUN_TORCH_TEST_REPO") or os.path.dirname(os.path.dirname(HERE))
if not INSTALLED:
    sys.path.insert(0, os.path.dirname(HERE))


def package_env():
    """The environment for a child Python that must import the same
    dagrun_torch as these tests."""
    env = dict(os.environ)
    if not INSTALLED:
        env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="session")
def dagrun_bin():
    from dagrun_torch import DagrunNotFound, find_dagrun
    if INSTALLED:
        from dagrun_torch import wheel_binary
        own = wheel_binary()
        assert own, "the installed dagrun_torch carries no dagrun binary"
        return own
    try:
        return find_dagrun()
    except DagrunNotFound as e:
        pytest.skip(str(e))
