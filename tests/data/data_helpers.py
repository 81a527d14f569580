"""Shared helpers of the data tests: a scripted verifier and `dir:` response folders."""

from __future__ import annotations

from pathlib import Path

from musacoder.feedback import render_feedback
from musacoder.records import Verdict

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TASKS = REPO / "examples" / "tasks"


class ScriptedVerifier:
    """Reads the verdict from the response's last line: `VERDICT ok 1.5` (status, speedup) or `VERDICT incorrect`.
    Has the signature of `musacoder.judge.batch.verify_many`."""

    def __init__(self):
        self.jobs = []

    def __call__(self, jobs, *, workers=1, config=None):
        for job in jobs:
            self.jobs.append(job)
            words = job.candidate.strip().splitlines()[-1].split()
            status = words[1] if len(words) > 1 and words[0] == "VERDICT" else "extract_error"
            speedup = float(words[2]) if len(words) > 2 else None
            v = Verdict(status=status, task=job.task.key, correct=status == "ok", legal=status == "ok",
                        pass_fraction=1.0 if status == "ok" else 0.0, speedup=speedup, speedup_vs_eager=speedup,
                        runtime_ms=1.0 / speedup if speedup else None, ref_runtime_ms=1.0 if speedup else None,
                        error="wrong values" if status != "ok" else None)
            v.feedback = render_feedback(v)
            yield job, v


def write_responses(root: Path, responses: dict[tuple[str, int, int], str]) -> Path:
    """Files of a `dir:` model: responses[(task name, sample, turn)] = text."""
    from musacoder.models.pregenerated import response_filename

    for (task, sample, turn), text in responses.items():
        path = root / task / response_filename(sample, turn)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
