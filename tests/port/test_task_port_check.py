"""The task-port check over the six small KernelBench tasks: originals and ports give identical outputs."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = Path("/work/shared/kernelbench-small")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SMALL / "level1").is_dir(), reason="kernelbench-small not available")]


def _script():
    spec = importlib.util.spec_from_file_location("musa_task_port_check", ROOT / "benchmarks" / "musa_task_port_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_small_tasks_same_outputs(tmp_path):
    out = tmp_path / "r.json"
    rc = _script().main(["--kernelbench-dir", str(SMALL), "--levels", "1", "--json", str(out), "--max-input-mb", "64"])
    res = json.loads(out.read_text())
    assert res["counts"] == {"same": 6}, res
    assert rc == 0
