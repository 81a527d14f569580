"""Suites: which tasks a benchmark run covers.

    kernelbench:level1[,level2,…]   KernelBench problems from --kernelbench-dir (default $KERNELBENCH_DIR)
    kernelbench                     all levels found there
    examples                        the small CPU tasks shipped in the repository's examples/tasks/
    dir:PATH                        every KernelBench-format *.py in PATH (or PATH/levelN/*.py)

`--tasks GLOB[,GLOB…]` keeps tasks whose name (`19_ReLU`) or key (`level1/19_ReLU`) matches a glob. `--set NAME=VALUE`
size overrides go to every task that defines the constant; a name no task defines is an error (a typo).
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any

from musacoder.records import Task


class SuiteError(ValueError):
    """The suite cannot be resolved; the message says what to pass."""


def group_of(task: Task, suite_label: str) -> str:
    return f"level{task.level}" if task.level is not None else suite_label


def examples_dir() -> Path:
    """`examples/tasks` in the working directory, else next to the source tree (editable installs)."""
    here = Path(__file__).resolve()
    for cand in (Path.cwd() / "examples" / "tasks", here.parents[3] / "examples" / "tasks"):
        if cand.is_dir():
            return cand
    raise SuiteError("suite 'examples': no examples/tasks/ folder found (run from the repository root, or use "
                     "--suite dir:PATH)")


def _load_flat_dir(folder: Path) -> list[Task]:
    from musacoder.tasks import TaskError, load_task

    tasks = []
    for f in sorted(folder.glob("*.py")):
        if f.name.startswith("_"):
            continue
        try:
            tasks.append(load_task(f))
        except TaskError:
            continue  # not a problem file (helpers, __init__); skipped
    return sorted(tasks, key=lambda t: (t.problem_id if t.problem_id is not None else 1 << 30, t.name))


def resolve_suite(suite: str, *, kernelbench_dir: str | None = None, patterns: list[str] | None = None,
                  overrides: dict[str, Any] | None = None) -> tuple[list[Task], str]:
    """The suite's tasks (filtered by `patterns`, overrides applied) and the group label for level-less tasks."""
    from musacoder.tasks import load_kernelbench_dir

    kind, _, arg = suite.partition(":")
    if kind == "kernelbench":
        root = kernelbench_dir or os.environ.get("KERNELBENCH_DIR")
        if not root:
            raise SuiteError("suite kernelbench needs --kernelbench-dir PATH or KERNELBENCH_DIR (a folder with "
                             "level1/, level2/, … of problem files)")
        levels = None
        if arg:
            levels = []
            for part in arg.split(","):
                m = re.fullmatch(r"(?:level)?(\d+)", part.strip())
                if not m:
                    raise SuiteError(f"bad suite {suite!r}: expected kernelbench:level1[,level2,…]")
                levels.append(int(m.group(1)))
        tasks, label = load_kernelbench_dir(root, levels=levels), "kernelbench"
    elif kind == "examples" and not arg:
        tasks, label = _load_flat_dir(examples_dir()), "examples"
    elif kind == "dir" and arg:
        folder = Path(arg)
        if not folder.is_dir():
            raise SuiteError(f"suite {suite!r}: folder not found")
        if any(d.is_dir() and re.fullmatch(r"level\d+", d.name) for d in folder.iterdir()):
            tasks = load_kernelbench_dir(folder)
        else:
            tasks = _load_flat_dir(folder)
        label = folder.resolve().name or "tasks"
    else:
        raise SuiteError(f"unknown suite {suite!r}: expected kernelbench:level1[,level2,…], examples or dir:PATH")
    if patterns:
        tasks = [t for t in tasks if any(fnmatch.fnmatch(t.name, p) or fnmatch.fnmatch(t.key, p) for p in patterns)]
    if not tasks:
        raise SuiteError(f"suite {suite!r} has no tasks" + (f" matching {', '.join(patterns)}" if patterns else ""))
    return apply_suite_overrides(tasks, overrides or {}), label


def apply_suite_overrides(tasks: list[Task], overrides: dict[str, Any]) -> list[Task]:
    """Give each task the overrides it defines a constant for; a name no task defines is an error."""
    from musacoder.tasks import size_constants

    if not overrides:
        return tasks
    used: set[str] = set()
    out = []
    for t in tasks:
        known = size_constants(t.source)
        mine = {k: v for k, v in overrides.items() if k in known}
        used |= mine.keys()
        out.append(t.model_copy(update={"overrides": {**t.overrides, **mine}}))
    unused = sorted(set(overrides) - used)
    if unused:
        raise SuiteError(f"--set {', '.join(unused)}: no task in the suite defines that size constant")
    return out


def default_backend(run_dir: Path | None = None) -> tuple[str, str]:
    """The backend a run uses when `--backend` is not given, and why: a run directory that already has a
    `config.json` keeps the backend it was started with (so a resume on another machine verifies what it started
    verifying), else `cuda` where PyTorch sees a CUDA GPU and `cpu` where it does not. A cuda default on a machine
    without a GPU would make every sample `illegal` or `infra_error` without anything saying why."""
    import json

    if run_dir is not None:
        try:
            started = json.loads((Path(run_dir) / "config.json").read_text()).get("backend")
        except (OSError, ValueError, AttributeError):
            started = None
        if isinstance(started, str) and started:
            return started, f"the backend {run_dir} was started with"
    import torch

    if torch.cuda.is_available():
        return "cuda", f"a CUDA GPU is visible ({torch.cuda.get_device_name(0)})"
    return "cpu", "no CUDA GPU is visible here; pass --backend cuda to ask for CUDA kernels anyway"
