"""Stages 2 and 3: solutions, repair trajectories, optimisation rewrites and reviewer samples, all from verified
generations.

A model (any client: `openai:`, `vllm:`, `hf:`, `dir:`) answers prompts that carry the reference's shape/stride/dtype
metadata and ask for the six-step solution scheme; generation, verification by MooreEval, multi-turn feedback and
resuming are the benchmark runner's (`musacoder.bench.runner.run_bench`, into a run directory whose prompts are
written here first). The datasets are then pure functions of the run's records:

- `solution_rows`: accepted first-turn answers;
- `repair_rows`: a failed turn followed by an accepted one, the context exactly as RL builds it
  (`musacoder.prompts.conversation`: earlier answers without `<think>`, `=== System Feedback for Round N ===` messages);
- `optimise_rows`: a slower accepted kernel, its feedback (the "correct → optimise" branch) and a faster accepted one;
- `reviewer_rows`: a rejected kernel to review, answered with MooreEval's verdict (the label) and its findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from musacoder.data.rft import kernel_code
from musacoder.data.runs import Turn, load_run
from musacoder.prompts import first_turn_messages

REVIEW_PROMPT = """\
Review this candidate `ModelNew` for the PyTorch reference below. It is verified by compiling it, comparing its \
outputs with the reference on random inputs, and checking that it calls no PyTorch compute op. Find what is wrong \
with it, if anything. Start your answer with `Verdict: <status>`, where status is one of ok, compile_error, \
runtime_error, incorrect, illegal, timeout, crashed; then explain the bug and how to fix it.

Reference program (`Model`):
```python
{reference}
```

Candidate:
```python
{candidate}
```"""

REVIEW_STATUSES = ("compile_error", "runtime_error", "incorrect", "illegal", "timeout", "crashed")


def stage2_messages(source: str, backend: str, metadata: str | None, six_step: bool) -> list[dict[str, str]]:
    """First-turn messages of a task for data generation: the bench/RL prompt (`musacoder.prompts`), with the
    metadata block and, when `six_step`, the six-step scheme appended to the user message."""
    return first_turn_messages(source, backend, metadata=metadata, six_step=six_step)


def _row(kind: str, messages: list[dict[str, str]], t: Turn) -> dict[str, Any]:
    return {"messages": messages, "loss_turn": len(messages) - 1, "kind": kind, "task": t.task, "sample": t.sample,
            "turn": t.turn, "status": t.status, "speedup": t.speedup}


def solution_rows(prompt: Sequence[dict[str, str]], turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """One row per accepted first-turn response: prompt + the response (kept whole, reasoning included)."""
    return [_row("solution", [*map(dict, prompt), {"role": "assistant", "content": t.response}], t)
            for t in turns if t.turn == 1 and t.passed]


def repair_rows(prompt: Sequence[dict[str, str]], samples: dict[int, list[Turn]]) -> list[dict[str, Any]]:
    """One row per sample whose turn j (> 1) was accepted after failed turns 1..j−1: the conversation RL would have
    shown at turn j (`musacoder.prompts.conversation`), then the accepted response. Infrastructure errors end a
    trajectory (they say nothing about the kernel)."""
    from musacoder.prompts import conversation

    rows = []
    for turns in samples.values():
        turns = sorted(turns, key=lambda t: t.turn)
        for j, t in enumerate(turns):
            if t.status == "infra_error":
                break
            if t.passed:
                earlier = turns[:j]
                if earlier and [e.turn for e in turns[:j + 1]] == list(range(1, j + 2)):
                    messages = conversation(prompt, [e.response for e in earlier],
                                            [(e.feedback, e.passed) for e in earlier])
                    rows.append(_row("repair", messages + [{"role": "assistant", "content": t.response}], t))
                break
    return rows


def optimise_rows(prompt: Sequence[dict[str, str]], turns: Sequence[Turn], *, min_gain: float = 0.1,
                  max_pairs: int = 2) -> list[dict[str, Any]]:
    """Rewrites of a slower accepted kernel into the task's fastest accepted one: for the fastest F and each slower
    S (slowest first) with speedup(F) ≥ (1 + min_gain)·speedup(S), at most `max_pairs` of them, the conversation
    prompt → S → feedback on S (correct: optimise only, with its timings) → F. Untimed kernels are left out."""
    from musacoder.prompts import conversation

    timed = sorted((t for t in turns if t.passed and t.speedup is not None and t.speedup > 0),
                   key=lambda t: (t.speedup, t.sample, t.turn))
    if len(timed) < 2:
        return []
    fastest = timed[-1]
    rows = []
    for slow in timed[:-1]:
        if len(rows) >= max_pairs or fastest.speedup < (1 + min_gain) * slow.speedup:
            break
        messages = conversation(prompt, [slow.response], [(slow.feedback, True)])
        rows.append(_row("optimise", messages + [{"role": "assistant", "content": fastest.response}], fastest))
    return rows


def review_answer(status: str, feedback: str) -> str:
    """The reviewer's target: the verdict label, then MooreEval's findings (its feedback without the "Next:" line)."""
    body = "\n".join(ln for ln in feedback.strip().splitlines() if not ln.startswith("Next:")).strip()
    return f"Verdict: {status}\n\n{body}" if body else f"Verdict: {status}"


def reviewer_rows(reference: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """One row per rejected kernel (statuses in `REVIEW_STATUSES`; extraction failures hold no kernel to review):
    the review request with the reference and the candidate's code, answered by `review_answer`."""
    rows = []
    for t in turns:
        if t.status not in REVIEW_STATUSES:
            continue
        user = REVIEW_PROMPT.format(reference=reference.strip(), candidate=kernel_code(t.response).strip())
        messages = [{"role": "user", "content": user},
                    {"role": "assistant", "content": review_answer(t.status, t.feedback)}]
        rows.append(_row("reviewer", messages, t))
    return rows


# ---- edges: the generation run ---------------------------------------------------------------------------------

def generate(tasks_dir: Path, run_dir: Path, *, model: str, backend: str, samples: int, turns: int,
             keep_optimizing: bool, metadata: bool = True, six_step: bool = True, temperature: float = 0.7,
             max_tokens: int = 16384, seed: int = 0, workers: int = 1, verify: dict[str, Any] | None = None,
             model_args: dict[str, Any] | None = None, tasks: list[str] | None = None, client=None, verifier=None,
             progress: bool = True) -> None:
    """Generate and verify into `run_dir` (a bench run directory): write each task's stage-2 prompt first (the
    runner reuses stored prompts), then `run_bench`. A rerun resumes (same settings), like `musacoder bench`."""
    from musacoder.bench.rundir import RunDir
    import json

    from musacoder.bench.runner import BenchConfig, ResumeError, run_bench
    from musacoder.bench.suites import resolve_suite

    config = BenchConfig(model=model, model_args=model_args or {}, suite=f"dir:{tasks_dir}", tasks=tasks or [],
                         backend=backend, samples=samples, turns=turns, keep_optimizing=keep_optimizing,
                         temperature=temperature, max_tokens=max_tokens, seed=seed, metadata=metadata,
                         workers=workers, verify=verify or {})
    task_list, label = resolve_suite(config.suite, patterns=config.tasks or None)
    rd = RunDir(run_dir)
    # the prompts are written here, before the runner checks its own settings: refuse a run made with other ones
    prompt_settings = {"backend": backend, "metadata": metadata, "six_step": six_step}
    stored = rd.root / "data_prompts.json"
    if stored.is_file() and json.loads(stored.read_text()) != prompt_settings:
        raise ResumeError(f"{run_dir} holds prompts made with {stored.read_text().strip()}, not {prompt_settings}; "
                          "use a new --out folder, or the same settings to resume")
    rd.root.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(prompt_settings) + "\n")
    for task in task_list:
        if rd.read_prompt(task.key) is None:
            meta = None
            if metadata:
                from musacoder.prompts.metadata import task_metadata

                meta = task_metadata(task) or None
            rd.write_prompt(task.key, stage2_messages(task.source, backend, meta, six_step))
    run_bench(config, run_dir, client=client, verifier=verifier, tasks=task_list, group_label=label,
              progress=progress, write_report=False)


DATASETS = {
    "solutions": "accepted first-turn solutions (prompt with metadata and the six-step scheme → kernel)",
    "repair": "multi-turn repair trajectories: failed kernel(s), MooreEval feedback as RL formats it, fixed kernel",
    "optimise": "optimisation rewrites: slower correct kernel, its timing feedback, faster correct kernel",
    "reviewer": "reviewer samples: find the bug in a kernel MooreEval rejected; the answer starts with its verdict",
}
CHAT_COLUMNS = {
    "messages": "list of {role, content}: the conversation",
    "loss_turn": "index in `messages` of the assistant turn that carries the loss (always the last one here)",
    "kind": "solution, repair, optimise or reviewer",
    "task": "task key", "sample": "sample of the generation run", "turn": "turn of the target response",
    "status": "MooreEval status of the target kernel (reviewer rows: of the reviewed kernel, the label)",
    "speedup": "speedup vs eager of the target kernel, where timed",
}


SFT_ROWS = "sft.jsonl"  # every chat row of the four datasets, what `musacoder train sft` reads from `out`


def build_datasets(run_dir: Path, out: Path, *, min_gain: float = 0.1, max_pairs: int = 2,
                   made_by: str = "", inputs: dict[str, str] | None = None) -> dict[str, int]:
    """Write the four chat datasets of a generation run under `out/<name>/` (Parquet + card), all their rows in
    `out/sft.jsonl`, and the stage manifest `out/musacoder.json` naming it; returns row counts."""
    from musacoder.data.dataset import folder_relative, write_data_manifest, write_dataset, write_jsonl

    run = load_run(run_dir)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in DATASETS}
    for key in sorted(run):
        entry = run[key]
        prompt, turns = entry["prompt"], entry["turns"]
        by_sample: dict[int, list[Turn]] = {}
        for t in turns:
            by_sample.setdefault(t.sample, []).append(t)
        rows["solutions"] += solution_rows(prompt, turns)
        rows["repair"] += repair_rows(prompt, by_sample)
        rows["optimise"] += optimise_rows(prompt, turns, min_gain=min_gain, max_pairs=max_pairs)
        rows["reviewer"] += reviewer_rows(entry["source"], turns)
    for name, description in DATASETS.items():
        write_dataset(rows[name], out / name, title=f"musacoder {name}",
                      description=f"{description.capitalize()}. From the verified generation run `{run_dir}`.",
                      columns=CHAT_COLUMNS, made_by=made_by or f"musacoder data solutions … --out {out}",
                      count_by="status" if name == "reviewer" else "task")
    counts = {name: len(r) for name, r in rows.items()}
    write_jsonl((row for name in DATASETS for row in rows[name]), Path(out) / SFT_ROWS)
    write_data_manifest(Path(out), files={"sft": SFT_ROWS, "run": folder_relative(run_dir, out),
                                          **{name: f"{name}/data.parquet" for name in DATASETS}},
                        inputs={"run": str(run_dir), **(inputs or {})},
                        info={"command": made_by, "rows": counts})
    return counts

