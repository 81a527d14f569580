"""A verified generation run as the data stages read it: per task, its prompt, its reference source and every
verified response (`Turn`), from a bench-format run directory (`musacoder.bench.rundir`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One verified response of a generation run."""

    task: str
    sample: int
    turn: int
    response: str
    status: str
    feedback: str
    speedup: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "ok"


def load_run(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Task key → {"prompt", "source", "turns": [Turn, …]} from a bench-format run directory (responses and
    verdicts; a response without a verdict is left out)."""
    from musacoder.bench.rundir import RunDir

    rd = RunDir(run_dir)
    verdicts = rd.read_verdicts()
    out: dict[str, dict[str, Any]] = {}
    for rec in rd.read_tasks():
        key = rec["key"]
        prompt = rd.read_prompt(key)
        if prompt is None:
            continue
        path = Path(rec.get("path") or "")
        out[key] = {"prompt": prompt, "source": path.read_text(encoding="utf-8") if path.is_file() else "",
                    "turns": []}
    for (key, sample, turn), rec in sorted(verdicts.items()):
        if key not in out:
            continue
        text = rd.read_response(key, sample, turn)
        if text is None:
            continue
        v = rec["verdict"]
        out[key]["turns"].append(Turn(task=key, sample=sample, turn=turn, response=text, status=v.get("status", ""),
                                      feedback=v.get("feedback", ""), speedup=v.get("speedup_vs_eager")))
    return out
