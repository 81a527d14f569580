"""Held-out evaluation during SFT/RFT: the model being trained answers held-out kernel tasks, MooreEval verifies the
answers, and pass@1 and the speedups go to metrics.jsonl under `eval/`.

The prompts are the data stage's (`musacoder.data.solutions.generate`: the bench/RL prompt with the reference's
metadata and the six-step scheme, as `musacoder data solutions` writes them), so the model is asked what it is
trained on; generation and verification are the bench runner's, into one bench-format run directory per evaluation,
`OUT/eval/step-N/`. With t tasks, n samples each (one turn), c_i of them passing for task i, and S the speedups vs
eager (s > 0) of the passing samples that MooreEval timed:

    eval/pass_at_1        = mean_i c_i / n          (bench's Pass@1, `musacoder.bench.metrics.score_block`)
    eval/speedup_mean     = mean s over S           (arithmetic mean; None, JSON null, when S is empty)
    eval/speedup_geomean  = exp(mean log s) over S  (geometric mean; None, JSON null, when S is empty)
    eval/tasks, eval/samples = t, and the answers evaluated (t * n)

The names, and None for "nothing timed", are the ones `train rl` logs (`musacoder.rl.trainer.Trainer.evaluate`),
so `musacoder report` plots either stage's held-out curve under one key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from musacoder.data.runs import Turn
from musacoder.manifest import MANIFEST_NAME
from musacoder.sft.config import SFTEvalConfig


def eval_metrics(turns_by_task: dict[str, Sequence[Turn]]) -> dict[str, Any]:
    """The `eval/` row of one evaluation from each task's first-turn results (formulas in the module docstring)."""
    from musacoder.bench.metrics import TurnScore, score_block

    per_task = [[TurnScore(passed=t.passed, speedup_vs_eager=t.speedup) for t in turns if t.turn == 1]
                for turns in turns_by_task.values()]
    block = score_block(per_task, k=1)
    speedups = [s.speedup_vs_eager for scores in per_task for s in scores if s.passed and s.speedup_vs_eager]
    return {"eval/pass_at_1": block["pass_at_k"],
            "eval/speedup_mean": sum(speedups) / len(speedups) if speedups else None,
            "eval/speedup_geomean": block["geomean_speedup"],
            "eval/tasks": len(per_task), "eval/samples": sum(len(s) for s in per_task)}


def evaluate(model, tokenizer, cfg: SFTEvalConfig, run_dir: Path, *, verifier=None) -> dict[str, Any]:
    """Generate with `model` for `cfg.tasks`, verify into `run_dir` (a rerun resumes it), return `eval_metrics`.
    The model is put in eval mode for the generation and back in train mode after; the tokenizer's padding side is
    restored."""
    from musacoder.data.runs import load_run
    from musacoder.data.solutions import generate
    from musacoder.models.hf_local import HFLocalClient

    backend = cfg.backend or _default_backend()
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    try:
        client = HFLocalClient(model, tokenizer, batch_size=cfg.batch_size, name="hf:<model in training>")
        generate(Path(cfg.tasks), run_dir, model="hf:<model in training>", client=client, backend=backend,
                 samples=cfg.samples, turns=1, keep_optimizing=False, metadata=cfg.metadata, six_step=cfg.six_step,
                 temperature=cfg.temperature, max_tokens=cfg.max_new_tokens, seed=cfg.seed, workers=cfg.workers,
                 verify=cfg.verify, tasks=cfg.select or None, verifier=verifier, progress=False)
    finally:
        tokenizer.padding_side = padding_side
        if was_training:
            model.train()
    return eval_metrics({key: entry["turns"] for key, entry in load_run(run_dir).items()})


def _default_backend() -> str:
    from musacoder.bench.suites import default_backend

    return default_backend()[0]


def eval_callback(cfg: SFTEvalConfig, tokenizer, out_dir: Path, write_row: Callable[[dict[str, Any]], None], *,
                  verifier=None):
    """A `TrainerCallback` that evaluates before the first step of a fresh run, every `cfg.every` optimiser steps
    and after the last, on the main process, and hands each `{"step", "eval/…"}` row to `write_row`."""
    from transformers import TrainerCallback

    class HeldOutEval(TrainerCallback):
        def __init__(self):
            self.done: set[int] = set()

        def _run(self, state, model) -> None:
            step = state.global_step
            if step in self.done or not state.is_world_process_zero or model is None:
                return
            self.done.add(step)
            run_dir = out_dir / "eval" / f"step-{step}"
            if (run_dir / MANIFEST_NAME).exists():  # evaluated and logged before this process resumed the run
                return
            row = evaluate(model, tokenizer, cfg, run_dir, verifier=verifier)
            write_row({"step": step, **row})

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if state.global_step == 0:
                self._run(state, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if cfg.every and state.global_step % cfg.every == 0:
                self._run(state, model)

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self._run(state, model)

    return HeldOutEval()
