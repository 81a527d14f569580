"""The task-port check over the six small KernelBench tasks: originals and ports give identical outputs."""

import json
from pathlib import Path

import pytest

SMALL = Path("/work/shared/kernelbench-small")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SMALL / "level1").is_dir(), reason="kernelbench-small not available")]


def test_small_tasks_same_outputs(tmp_path, benchmark_script):
    out = tmp_path / "r.json"
    rc = benchmark_script("musa_task_port_check").main(["--kernelbench-dir", str(SMALL), "--levels", "1", "--json",
                                                         str(out), "--max-input-mb", "64"])
    res = json.loads(out.read_text())
    assert res["counts"] == {"same": 6}, res
    assert rc == 0
