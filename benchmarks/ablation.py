"""Stabiliser ablation: seeds × {all, −PrimeEcho, −BDR, −MirrorPop} on the hard toy task, pass@1 against step.

    python benchmarks/ablation.py --config examples/rl/ablation_toy.toml --out runs/ablation --seeds 0,1,2 --jobs 2

Each run trains the config with one stabiliser switched off (`primeecho.enabled`, `retry.enabled`,
`mirrorpop.enabled` = false; `all` keeps the three) through the Python API (`musacoder.rl.trainer.Trainer`, tasks
from `musacoder.rl.toy.toy_tasks_from_config`, so every `env.toy_*` option applies), and every `--eval-every` steps
measures pass@1 on fresh prompts: `--eval-samples` first-turn answers per task at the rollout temperature, scored
without reward noise. That figure, not the training batch's `pass_first` (which mixes in replayed repair prompts and
sees the noisy reward's effects), is the curve. It is written into the run's metrics.jsonl as `eval_pass1`, beside the
trainer's own metrics.

A run folder `OUT/<variant>/seed<k>/` holds metrics.jsonl, config.json and, once finished, done.json; a rerun skips
finished runs and starts unfinished ones afresh. Prints a table (final pass@1 = mean of the last `--final-evals`
evaluations, mean ± std over seeds; steps until pass@1 first reaches `--threshold`; MirrorPop keep rate = 1 −
popped/checked over the run; retry buffer size, mean over steps and at the end; replays and the share of replayed
groups that had signal), and writes OUT/ablation.json and OUT/ablation.png (pass@1, buffer size and MirrorPop pop
rate against step: mean over seeds, band = min to max).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

VARIANTS: dict[str, dict[str, object]] = {
    "all": {},
    "no_primeecho": {"primeecho.enabled": False},
    "no_bdr": {"retry.enabled": False},
    "no_mirrorpop": {"mirrorpop.enabled": False},
}


# ---------------------------------------------------------------- one run (in a worker process)


def eval_pass1(trainer, tasks, samples: int) -> float:
    """Share of first-turn answers to fresh prompts that pass: `samples` per task, sampled as in rollouts."""
    from musacoder.rl.rollout import render_context
    from musacoder.rl.toy import toy_score

    contexts, owners = [], []
    for task in tasks:
        env = trainer.env_factory(1)
        env.reset(task)
        ctx = render_context(trainer.tokenizer, env.messages)
        contexts += [ctx] * samples
        owners += [task] * samples
    passed = 0
    for (ids, _), task in zip(trainer.generator.generate(contexts), owners):
        passed += toy_score(task, trainer.tokenizer.decode(ids, skip_special_tokens=True))[1]
    return passed / len(contexts)


def run_one(config: str, overrides: dict, out_dir: str, eval_every: int, eval_samples: int, label: str) -> dict:
    """Train one variant × seed to the end, with pass@1 evaluations; returns (and writes) done.json's content."""
    from musacoder.rl.config import load_config
    from musacoder.rl.metrics import MetricsLogger
    from musacoder.rl.toy import toy_tasks_from_config
    from musacoder.rl.trainer import Trainer

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)  # an unfinished run starts again from scratch
    cfg = load_config(config, {**overrides, "run.out_dir": str(out), "run.resume": False, "run.tensorboard": False,
                               "run.save_every": 0})
    if cfg.env.kind != "toy":
        raise ValueError(f"{config}: the ablation runs the toy task (env.kind = 'toy'), got {cfg.env.kind!r}")
    t0 = time.perf_counter()
    tasks = toy_tasks_from_config(cfg.env)
    trainer = Trainer(cfg, tasks=tasks)
    logger = MetricsLogger(out, tensorboard=False)
    try:
        row = {"eval_pass1": eval_pass1(trainer, tasks, eval_samples)}
        logger.log(0, row)
        while trainer.step_idx < cfg.run.steps:
            row = trainer.step()
            if trainer.step_idx % eval_every == 0 or trainer.step_idx == cfg.run.steps:
                row["eval_pass1"] = eval_pass1(trainer, tasks, eval_samples)
                if trainer.step_idx % max(eval_every, cfg.run.steps // 5) == 0:
                    print(f"  [{label}] step {trainer.step_idx}/{cfg.run.steps}  pass@1 {row['eval_pass1']:.2f}  "
                          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            logger.log(trainer.step_idx, row)
    finally:
        logger.close()
        trainer.close()
    done = {"label": label, "overrides": overrides, "steps": cfg.run.steps, "wall_s": time.perf_counter() - t0}
    (out / "done.json").write_text(json.dumps(done, indent=2))
    return done


# ---------------------------------------------------------------- analysis (pure over metrics rows)


def read_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def eval_curve(rows: list[dict]) -> tuple[list[int], list[float]]:
    pts = [(r["step"], r["eval_pass1"]) for r in rows if r.get("eval_pass1") is not None]
    return [s for s, _ in pts], [v for _, v in pts]


def run_stats(rows: list[dict], threshold: float, final_evals: int) -> dict:
    """Per-run figures: final pass@1 (mean of the last `final_evals` evaluations), first step reaching `threshold`
    (None if never), MirrorPop keep rate, retry buffer (mean, end), replays and recovered replays."""
    steps, evals = eval_curve(rows)
    train = [r for r in rows if "mirrorpop_checked" in r]
    checked = sum(r["mirrorpop_checked"] for r in train)
    popped = sum(r["mirrorpop_popped"] for r in train)
    replays = sum(r["retry_replays"] for r in train)
    return {
        "final_pass1": statistics.fmean(evals[-final_evals:]) if evals else math.nan,
        "steps_to_threshold": next((s for s, v in zip(steps, evals) if v >= threshold), None),
        "mirrorpop_keep_rate": 1 - popped / checked if checked else math.nan,
        "mirrorpop_popped": popped,
        "mirrorpop_popped_signed_rule": sum(r["mirrorpop_popped_signed_rule"] for r in train),
        "retry_buffer_mean": statistics.fmean(r["retry_buffer"] for r in train) if train else math.nan,
        "retry_buffer_end": train[-1]["retry_buffer"] if train else None,
        "retry_replays": replays,
        "retry_recovered_share": sum(r["retry_recovered"] for r in train) / replays if replays else math.nan,
        "groups_dropped_share": sum(r["groups_dropped"] for r in train) / max(1, sum(r["groups"] for r in train)),
        "train_pass_first_last10": statistics.fmean(r["pass_first"] for r in train[-10:]) if train else math.nan,
    }


def _mean_std(xs: list[float]) -> tuple[float, float]:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if not xs:
        return math.nan, math.nan
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def variant_summary(per_seed: list[dict]) -> dict:
    """Mean ± std over seeds of the per-run figures; steps-to-threshold over the seeds that reached it."""
    out: dict = {"seeds": len(per_seed)}
    for key in ("final_pass1", "mirrorpop_keep_rate", "retry_buffer_mean", "retry_buffer_end", "retry_replays",
                "retry_recovered_share", "groups_dropped_share", "train_pass_first_last10"):
        m, s = _mean_std([r[key] for r in per_seed])
        out[key] = {"mean": m, "std": s}
    reached = [r["steps_to_threshold"] for r in per_seed if r["steps_to_threshold"] is not None]
    out["steps_to_threshold"] = {"mean": statistics.fmean(reached) if reached else None, "reached": len(reached),
                                 "values": [r["steps_to_threshold"] for r in per_seed]}
    return out


def table(summary: dict, threshold: float) -> str:
    def ms(d, fmt="{:.2f}"):
        if d["mean"] is None or math.isnan(d["mean"]):
            return "–"
        return f"{fmt.format(d['mean'])} ± {fmt.format(d['std'])}"

    header = ["variant", "final pass@1", f"steps to pass@1 ≥ {threshold}", "MirrorPop keep rate",
              "retry buffer (mean / end)", "replays (recovered)", "groups dropped"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, v in summary.items():
        st = v["steps_to_threshold"]
        steps = ("–" if st["mean"] is None else f"{st['mean']:.0f}") + f" ({st['reached']}/{v['seeds']})"
        rec = v["retry_recovered_share"]["mean"]
        lines.append("| " + " | ".join([
            name, ms(v["final_pass1"]), steps, ms(v["mirrorpop_keep_rate"], "{:.3f}"),
            f"{v['retry_buffer_mean']['mean']:.1f} / {v['retry_buffer_end']['mean']:.1f}",
            f"{v['retry_replays']['mean']:.0f} ({'–' if math.isnan(rec) else f'{rec:.2f}'})",
            f"{v['groups_dropped_share']['mean']:.2f}"]) + " |")
    return "\n".join(lines)


def plot(curves: dict[str, list[list[dict]]], path: Path, title: str) -> bool:
    """pass@1, retry buffer size and MirrorPop pop rate against step: mean over seeds, band min–max."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'musacoder[report]')", file=sys.stderr)
        return False
    panels = [("pass@1 (fresh prompts)", lambda r: r.get("eval_pass1")),
              ("retry buffer size", lambda r: r.get("retry_buffer")),
              ("MirrorPop popped / checked", lambda r: r["mirrorpop_popped"] / r["mirrorpop_checked"]
               if r.get("mirrorpop_checked") else None)]
    fig = Figure(figsize=(15, 4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    for ax, (label, get) in zip(axes, panels):
        for name, runs in curves.items():
            series = [{r["step"]: get(r) for r in rows if get(r) is not None} for rows in runs]
            steps = sorted(set.intersection(*(set(s) for s in series))) if series else []
            if not steps:
                continue
            vals = [[s[t] for s in series] for t in steps]
            line, = ax.plot(steps, [statistics.fmean(v) for v in vals], label=name, lw=1.5)
            ax.fill_between(steps, [min(v) for v in vals], [max(v) for v in vals], color=line.get_color(), alpha=0.15)
        ax.set_xlabel("step")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return True


# ---------------------------------------------------------------- driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="examples/rl/ablation_toy.toml")
    ap.add_argument("--out", type=Path, default=Path("runs/ablation"))
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated run.seed values")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {list(VARIANTS)}")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every run (JSON values), e.g. --set run.steps=60")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (each uses run.threads CPU threads)")
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--eval-samples", type=int, default=16, help="answers per task per evaluation")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--final-evals", type=int, default=3, help="evaluations averaged into the final pass@1")
    a = ap.parse_args()

    common: dict[str, object] = {}
    for item in a.set:
        key, _, value = item.partition("=")
        try:
            common[key] = json.loads(value)
        except json.JSONDecodeError:
            common[key] = value
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    variants = [v for v in a.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {list(VARIANTS)}")
    a.out.mkdir(parents=True, exist_ok=True)
    runs = [(v, s, a.out / v / f"seed{s}") for v in variants for s in seeds]
    todo = [r for r in runs if not (r[2] / "done.json").exists()]
    print(f"{len(runs)} runs ({len(runs) - len(todo)} already finished), {a.jobs} at a time, config {a.config}",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if todo:
        with ProcessPoolExecutor(max_workers=a.jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_one, a.config, {**common, **VARIANTS[v], "run.seed": s}, str(d),
                                   a.eval_every, a.eval_samples, f"{v} seed {s}"): (v, s) for v, s, d in todo}
            for n, f in enumerate(as_completed(futures), 1):
                v, s = futures[f]
                done = f.result()
                elapsed = time.perf_counter() - t0
                eta = elapsed / n * (len(todo) - n)
                print(f"done {n}/{len(todo)}: {v} seed {s} in {done['wall_s']:.0f} s "
                      f"(elapsed {elapsed:.0f} s, about {eta:.0f} s left)", file=sys.stderr, flush=True)

    per_run, curves, summary = {}, {}, {}
    for v in variants:
        rows_by_seed = [read_rows(a.out / v / f"seed{s}") for s in seeds]
        curves[v] = rows_by_seed
        stats = [run_stats(rows, a.threshold, a.final_evals) for rows in rows_by_seed]
        per_run[v] = {f"seed{s}": st for s, st in zip(seeds, stats)}
        summary[v] = variant_summary(stats)
    text = table(summary, a.threshold)
    print(text)
    result = {"config": a.config, "overrides": common, "seeds": seeds, "threshold": a.threshold,
              "eval_every": a.eval_every, "eval_samples": a.eval_samples, "final_evals": a.final_evals,
              "machine": f"{os.cpu_count()} CPUs", "summary": summary, "runs": per_run,
              "curves": {v: [eval_curve(rows) for rows in rs] for v, rs in curves.items()}}
    (a.out / "ablation.json").write_text(json.dumps(result, indent=2, default=float))
    if plot(curves, a.out / "ablation.png", f"{a.config}, seeds {seeds}"):
        print(f"plot: {a.out / 'ablation.png'}", file=sys.stderr)
    print(f"json: {a.out / 'ablation.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
