import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_helpers, whatever pytest's import mode


@pytest.fixture
def fixture_tasks():
    from bench_helpers import load_fixture_tasks

    return load_fixture_tasks()
