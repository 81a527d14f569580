"""Shared helpers for the benchmark tests: a fake verifier that reads its verdict from the response text."""

from __future__ import annotations

import re
from pathlib import Path

from musacoder.records import Verdict

FIXTURES = Path(__file__).parent / "fixtures"


def fake_verdict(text: str, task_key: str) -> Verdict:
    """`PASS <speedup> [<speedup vs compile>]` → ok; `FAIL` → incorrect; anything else → extract_error."""
    m = re.search(r"PASS ([\d.]+)(?: ([\d.]+))?", text)
    if m:
        s = float(m.group(1))
        c = float(m.group(2)) if m.group(2) else None
        return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, speedup=s,
                       speedup_vs_eager=s, speedup_vs_compile=c, reward=1.0, task=task_key,
                       feedback=f"correct, {s}x faster than eager")
    if "FAIL" in text:
        return Verdict(status="incorrect", compiled=True, legal=True, pass_fraction=0.4, reward=-0.3,
                       task=task_key, feedback="outputs differ from the reference: FIXME-MARKER")
    return Verdict(status="extract_error", task=task_key, feedback="no code found")


class FakeVerifier:
    """Same signature as `musacoder.judge.batch.verify_many`; records the jobs it saw."""

    def __init__(self, fail_after: int | None = None):
        self.jobs = []
        self.fail_after = fail_after

    def __call__(self, jobs, *, workers=1, config=None):
        for job in jobs:
            if self.fail_after is not None and len(self.jobs) >= self.fail_after:
                raise KeyboardInterrupt("simulated interruption")
            self.jobs.append(job)
            yield job, fake_verdict(job.candidate, job.task.key)


def load_fixture_tasks():
    from musacoder.tasks import load_task

    return [load_task(p) for p in sorted((FIXTURES / "tasks").glob("*.py"))]


def write_responses(root: Path, table: dict[str, dict[str, str]]) -> Path:
    """table: task name → {"<sample>.txt" or "<sample>.turn<k>.txt": text}."""
    for task, files in table.items():
        for name, text in files.items():
            (root / task).mkdir(parents=True, exist_ok=True)
            (root / task / name).write_text(text)
    return root


class ScriptedClient:
    """A model client answering from a table (task name, sample, turn) → text; records every request."""

    name = "scripted"

    def __init__(self, table: dict[tuple[str, int, int], str]):
        self.table = table
        self.requests = []

    def generate(self, requests, sampling):
        from musacoder.models import Completion

        for req in requests:
            self.requests.append(req)
            text = self.table.get((req.task, req.sample, req.turn))
            yield req, Completion(text=text, error=None if text is not None else "no script")

    def close(self):
        pass


# relu: s0 passes at once; s1 fails then passes; s2 never passes.
# linear: s0 fails and has no turn 2 (conversation ends); s1 has no response at all; s2 passes slowly.
SCRIPT = {
    ("1_relu_tiny", 0, 1): "PASS 2.0 1.5",
    ("1_relu_tiny", 0, 2): "PASS 3.0 2.0",
    ("1_relu_tiny", 0, 3): "PASS 4.0 3.0",
    ("1_relu_tiny", 1, 1): "<think>hidden-thoughts</think> FAIL",
    ("1_relu_tiny", 1, 2): "PASS 1.2",
    ("1_relu_tiny", 2, 1): "garbage",
    ("1_relu_tiny", 2, 2): "FAIL",
    ("1_relu_tiny", 2, 3): "FAIL",
    ("2_scale_linear_tiny", 0, 1): "FAIL",
    ("2_scale_linear_tiny", 2, 1): "PASS 0.5",
}
