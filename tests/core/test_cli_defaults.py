"""`musacoder tasks list` prints every name whole, and `musacoder doctor` says what it is checking while it runs."""

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from musacoder.cli import app

LONG = "99_A_task_name_long_enough_that_a_table_fitted_to_a_narrow_terminal_would_cut_it"


def test_tasks_list_never_cuts_a_name(tmp_path):
    level = tmp_path / "level1"
    level.mkdir()
    src = (Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py").read_text()
    (level / f"{LONG}.py").write_text(src)
    env = {**os.environ, "COLUMNS": "40"}
    p = subprocess.run([sys.executable, "-m", "musacoder.cli", "tasks", "list", "--kernelbench-dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert LONG in p.stdout and "batch_size=64, dim=4096" in p.stdout and "…" not in p.stdout


def test_tasks_list_defaults_to_the_examples_whatever_the_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELBENCH_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["tasks", "list"])
    assert res.exit_code == 0, res.output
    assert "relu" in res.output and "3 task(s)" in res.output


def test_doctor_reports_progress_per_check(monkeypatch):
    import musacoder.cli as cli

    seen = []
    for name in ("_doctor_isolation", "_doctor_tools", "_doctor_glue"):
        monkeypatch.setattr(cli, name, lambda name=name: seen.append(name) or f"report of {name}")
    statuses = []

    class Status:
        def __init__(self, text):
            statuses.append(text)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr("rich.console.Console.status", lambda self, text, **kw: Status(text))
    res = CliRunner().invoke(app, ["doctor"])
    assert res.exit_code == 0, res.output
    assert seen == ["_doctor_isolation", "_doctor_tools", "_doctor_glue"]
    assert [s.split(":")[0] for s in statuses] == ["doctor [1/3]", "doctor [2/3]", "doctor [3/3]"]
    assert "report of _doctor_glue" in res.output
