"""Shared helpers: the dagrun binary (skip when there is none) and torch (skip when missing)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
TESTDATA = os.path.join(HERE, "testdata")


@pytest.fixture(scope="session")
def dagrun_bin():
    from dagrun_torch import DagrunNotFound, find_dagrun
    try:
        return find_dagrun()
    except DagrunNotFound as e:
        pytest.skip(str(e))
