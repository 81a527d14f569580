"""Reports of a run directory: `summary.json` (leaderboards), `report.md` and a self-contained `report.html`.

The HTML embeds its plots as base64 PNGs (matplotlib's Agg canvas, no pyplot state); without matplotlib both reports
fall back to tables only. `--compare OTHER_RUN_DIR` adds a side-by-side section (metrics of both runs and their
difference, tasks solved by only one of them) and overlays the other run on the fast_p plot.

summary.json: {"run": {model, suite, backend, k, turns, …, status counts}, "<group>": {…}, …, "overall": {…}} where
each group block (`level1`, `level2`, …, or the suite name for tasks without a level) holds `pass_at_k`,
`avg_at_k`, `faster_rate_eager`, `faster_rate_compile`, `fast_p` (keyed "0.0" … "2.0"), `geomean_speedup`, a
`first_turn` block with the same metrics, counts and turns-to-success statistics (see `metrics.summarize`).

Training curves: a training run folder (`musacoder train rl|sft` output, holding metrics.jsonl) gets
`training_report.md` and `training_report.html` from `write_training_report`: reward, pass rates, MirrorPop keep rate,
retry buffer size, KL and loss against step, whichever of them its metrics hold (each missing one is named in a
note). `write_reports` writes them when given such a folder, and adds the same curves beside a benchmark's plots
when the benchmarked model (`hf:PATH` / `vllm:PATH`) is a training output folder or sits in one, or when `training=`
names one.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from musacoder.bench.config import BenchConfig
from musacoder.bench.metrics import FASTER_THRESHOLD, SampleOutcome, TurnScore, summarize
from musacoder.bench.rundir import RunDir


def load_outcomes(root: str | Path) -> tuple[list[SampleOutcome], dict[str, str], dict[str, Any], list[dict]]:
    """Per-sample outcomes, task → group, the run's config, and the raw verdict records."""
    rd = RunDir(root)
    config = rd.read_config()
    if config is None:
        raise FileNotFoundError(f"{root} is not a benchmark run directory (no config.json); run `musacoder bench` "
                                "with --out pointing there first")
    tasks = {r["key"]: r["group"] for r in rd.read_tasks()}
    records = rd.read_verdicts()
    by_sample: dict[tuple[str, int], dict[int, dict]] = defaultdict(dict)
    for (key, sample, turn), rec in records.items():
        by_sample[(key, sample)][turn] = rec
    outcomes = []
    for (key, sample), turns in sorted(by_sample.items()):
        scores = []
        for t in range(1, max(turns) + 1):  # contiguous turns from 1
            if t not in turns:
                break
            v = turns[t]["verdict"]
            scores.append(TurnScore(passed=v.get("status") == "ok",
                                    speedup_vs_eager=v.get("speedup_vs_eager"),
                                    speedup_vs_compile=v.get("speedup_vs_compile")))
        if scores:
            group = tasks.get(key) or turns[1].get("group") or "tasks"
            outcomes.append(SampleOutcome(task=key, group=group, turns=tuple(scores)))
    return outcomes, tasks, config, list(records.values())


def build_summary(root: str | Path, threshold: float = FASTER_THRESHOLD) -> dict[str, Any]:
    outcomes, tasks, config, records = load_outcomes(root)
    k = int(config.get("samples", 8))
    compile_timed = BenchConfig.model_validate(config).verify_config().time_compile_baseline
    groups = summarize(outcomes, k, tasks=tasks, threshold=threshold, compile_timed=compile_timed)
    first_status = Counter(r["verdict"]["status"] for r in records if int(r["turn"]) == 1)
    all_status = Counter(r["verdict"]["status"] for r in records)
    run = {key: config.get(key) for key in ("model", "suite", "backend", "samples", "turns", "keep_optimizing",
                                            "temperature", "top_p", "max_tokens", "overrides", "metadata",
                                            "few_shot")}
    run.update(k=k, faster_threshold=threshold, compile_baseline_timed=compile_timed, verdicts=len(records),
               status_counts_first_turn=dict(first_status), status_counts_all_turns=dict(all_status))
    return {"run": run, **groups}


def group_names(summary: dict[str, Any]) -> list[str]:
    return [g for g in summary if g not in ("run",)]


# ---------------------------------------------------------------- plots


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def make_plots(summary: dict[str, Any], speedups: list[float], other: dict[str, Any] | None = None,
               labels: tuple[str, str] = ("this run", "other run")) -> dict[str, str] | None:
    """title → base64 PNG; None without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    plots: dict[str, str] = {}

    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    for name, summ, style in ((labels[0], summary, "-"), (labels[1], other, "--")):
        if summ is None:
            continue
        ov = summ["overall"]
        ps = [float(p) for p in ov["fast_p"]]
        ax.plot(ps, [ov["fast_p"][p] for p in ov["fast_p"]], style, marker="o", label=f"{name}: best turn")
        ax.plot(ps, [ov["first_turn"]["fast_p"][p] for p in ov["first_turn"]["fast_p"]], style, marker="x",
                alpha=0.6, label=f"{name}: first turn")
    ax.set_xlabel("speedup threshold p (vs eager)")
    ax.set_ylabel("fast_p")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("fast_p: share of samples correct and faster than p× eager")
    plots["fast_p curve"] = _png(fig)

    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.add_subplot()
    groups = group_names(summary)
    metrics = [("pass_at_k", "Pass@k"), ("avg_at_k", "Avg@k"), ("faster_rate_eager", "Faster vs eager"),
               ("faster_rate_compile", "Faster vs compile")]
    width = 0.8 / len(metrics)
    for i, (key, label) in enumerate(metrics):
        xs = [g + (i - (len(metrics) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [summary[g][key] or 0.0 for g in groups], width, label=label)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    ax.legend(fontsize=8)
    ax.set_title("Metrics per level (best turn)")
    plots["per-level metrics"] = _png(fig)

    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    if speedups:
        import math

        logs = [math.log2(s) for s in speedups if s > 0]
        ax.hist(logs, bins=min(30, max(5, len(logs) // 2)), color="tab:green", alpha=0.8)
        ax.axvline(0.0, color="k", lw=1)
        ax.axvline(math.log2(summary["run"]["faster_threshold"]), color="tab:red", lw=1, ls="--",
                   label=f"{summary['run']['faster_threshold']}×")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no timed correct samples", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("log2 speedup vs eager (correct samples, best turn)")
    ax.set_ylabel("samples")
    ax.set_title("Speedup distribution")
    plots["speedup distribution"] = _png(fig)
    return plots


def best_turn_speedups(root: str | Path) -> list[float]:
    outcomes, _, _, _ = load_outcomes(root)
    return [o.best.speedup_vs_eager for o in outcomes if o.best.passed and o.best.speedup_vs_eager]


# ---------------------------------------------------------------- tables

_ROWS = [("pass_at_k", "Pass@k"), ("avg_at_k", "Avg@k"), ("faster_rate_eager", "Faster rate vs eager"),
         ("faster_rate_compile", "Faster rate vs torch.compile"), ("geomean_speedup", "Geomean speedup (correct)")]


def _fmt(value: Any, pct: bool = True) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{100 * value:.1f}" if pct else f"{value:.3f}"
    return str(value)


def metric_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table: metrics (best turn, then first turn) × groups. Rates in %."""
    groups = group_names(summary)
    rows = []
    for key, label in _ROWS:
        pct = key != "geomean_speedup"
        rows.append([label] + [_fmt(summary[g][key], pct) for g in groups])
    for key, label in _ROWS[:4]:
        rows.append([f"{label}, first turn"] + [_fmt(summary[g]["first_turn"][key]) for g in groups])
    for p in summary["overall"]["fast_p"]:
        rows.append([f"fast_{p}"] + [_fmt(summary[g]["fast_p"][p]) for g in groups])
    rows.append(["Mean turns to success"] + [_fmt(summary[g]["mean_turns_to_success"], False) for g in groups])
    rows.append(["Tasks"] + [str(summary[g]["n_tasks"]) for g in groups])
    rows.append(["Samples"] + [str(summary[g]["n_samples"]) for g in groups])
    rows.append(["Tasks with fewer than k samples"] + [str(summary[g]["tasks_short_of_k"]) for g in groups])
    return ["Metric"] + groups, rows


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Side by side: for each group both runs share, each metric of A, B and B − A."""
    header = ["Group", "Metric", "A", "B", "B − A"]
    rows = []
    for g in [g for g in group_names(a) if g in b]:
        for key, label in _ROWS:
            pct = key != "geomean_speedup"
            va, vb = a[g][key], b[g][key]
            delta = None if va is None or vb is None else vb - va
            rows.append([g, label, _fmt(va, pct), _fmt(vb, pct), _fmt(delta, pct)])
    return header, rows


def solved_tasks(root: str | Path) -> set[str]:
    outcomes, _, _, _ = load_outcomes(root)
    return {o.task for o in outcomes if o.best.passed}


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}img{max-width:100%;display:block;margin:1em 0}
code{background:#f3f3f3;padding:1px 4px}"""


def _run_line(summary: dict[str, Any]) -> str:
    r = summary["run"]
    return (f"model `{r['model']}`, suite `{r['suite']}`, backend `{r['backend']}`, k = {r['k']} samples, "
            f"up to {r['turns']} turn(s), temperature {r['temperature']}, top-p {r['top_p']}, "
            f"faster threshold {r['faster_threshold']}×, {r['verdicts']} verdicts")


def render(summary: dict[str, Any], plots: dict[str, str] | None, root: str | Path,
           other: dict[str, Any] | None = None, other_root: str | Path | None = None,
           only: tuple[list[str], list[str]] | None = None,
           training: tuple[list[str], list[str]] | None = None) -> tuple[str, str]:
    """(markdown, html) of a report; `training` = (markdown lines, html parts) of a training-curves section."""
    header, rows = metric_rows(summary)
    status = summary["run"]["status_counts_first_turn"]
    status_rows = [[s, str(n)] for s, n in sorted(status.items(), key=lambda kv: -kv[1])]
    md = [f"# Benchmark report: {root}", "", _run_line(summary), "",
          "Rates in %, scored at the best turn unless marked first turn; Pass@k is the unbiased estimator; "
          "see docs/bench.md for the formulas.", "", _md_table(header, rows), "",
          "## First-turn verdicts", "", _md_table(["Status", "Responses"], status_rows), ""]
    body = [f"<h1>Benchmark report: {html.escape(str(root))}</h1>", f"<p>{html.escape(_run_line(summary))}</p>",
            "<p>Rates in %, scored at the best turn unless marked first turn; Pass@k is the unbiased estimator.</p>",
            _html_table(header, rows), "<h2>First-turn verdicts</h2>",
            _html_table(["Status", "Responses"], status_rows)]
    if other is not None:
        ch, cr = compare_rows(summary, other)
        md += ["## Comparison", "", f"A = {root} ({summary['run']['model']}), B = {other_root} "
               f"({other['run']['model']})", "", _md_table(ch, cr), ""]
        body += ["<h2>Comparison</h2>",
                 f"<p>A = {html.escape(str(root))} ({html.escape(str(summary['run']['model']))}), "
                 f"B = {html.escape(str(other_root))} ({html.escape(str(other['run']['model']))})</p>",
                 _html_table(ch, cr)]
        if only is not None:
            for label, names in (("Solved only by A", only[0]), ("Solved only by B", only[1])):
                text = ", ".join(names) if names else "none"
                md += [f"**{label}** ({len(names)}): {text}", ""]
                body.append(f"<p><b>{label}</b> ({len(names)}): {html.escape(text)}</p>")
    if plots:
        body.append("<h2>Plots</h2>")
        for title, data in plots.items():
            body.append(f"<h3>{html.escape(title)}</h3><img alt=\"{html.escape(title)}\" "
                        f"src=\"data:image/png;base64,{data}\">")
        md += ["Plots: see report.html.", ""]
    else:
        md += ["(Plots skipped: install matplotlib, e.g. `pip install 'musacoder[report]'`.)", ""]
        body.append("<p>Plots skipped: matplotlib is not installed.</p>")
    if training is not None:
        md += training[0]
        body += training[1]
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>musacoder benchmark report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
    return "\n".join(md) + "\n", page


def write_reports(root: str | Path, compare: str | Path | None = None,
                  threshold: float = FASTER_THRESHOLD, training: str | Path | None = None) -> dict[str, Any]:
    """Write summary.json, report.md and report.html into `root`; return the summary.

    A training run folder (metrics.jsonl, no tasks.jsonl) gets its training report instead
    (`write_training_report`) and the return value is {} (there is no benchmark summary). `training` names a
    training run folder whose curves go beside the benchmark's plots; by default the one the benchmarked model
    comes from, when there is one."""
    if is_training_run(root):
        write_training_report(root)
        return {}
    rd = RunDir(root)
    summary = build_summary(root, threshold)
    other = build_summary(compare, threshold) if compare is not None else None
    only = None
    if compare is not None:
        a, b = solved_tasks(root), solved_tasks(compare)
        only = (sorted(a - b), sorted(b - a))
    plots = make_plots(summary, best_turn_speedups(root), other,
                       labels=(f"A: {summary['run']['model']}", f"B: {other['run']['model']}") if other else
                       (str(summary["run"]["model"]), ""))
    training = training or training_run_of_model(str(summary["run"].get("model") or ""))
    section = None
    if training is not None:
        rows = load_training_metrics(training)
        panels, notes = training_curves(rows)
        section = training_section(training, rows, panels, notes, make_training_plots(panels), level=2)
    md, page = render(summary, plots, root, other, compare, only, training=section)
    rd.write_json("summary.json", summary)
    rd.write_text("report.md", md)
    rd.write_text("report.html", page)
    return summary


# ---------------------------------------------------------------- training curves (RL / SFT run folders)


def _mirrorpop_keep_rate(row: dict) -> float | None:
    if "mirrorpop_keep_rate" in row:  # logged by the trainer itself
        return row["mirrorpop_keep_rate"]
    checked = row.get("mirrorpop_checked")
    return 1.0 - row["mirrorpop_popped"] / checked if checked and "mirrorpop_popped" in row else None


# panel title → (series label, metrics key or function of a row); RL keys from musacoder.rl.trainer (docs/rl.md),
# `eval_pass1` from benchmarks/ablation.py; loss/learning_rate from musacoder.sft, whose held-out evaluation logs
# `eval/pass_at_1` as RL's does (musacoder.sft.evaluate)
TRAINING_PANELS: tuple[tuple[str, tuple[tuple[str, str | Callable[[dict], float | None]], ...]], ...] = (
    ("Reward", (("batch mean reward", "reward_mean"),)),
    ("pass@1", (("held-out pass@1", "eval/pass_at_1"), ("fresh-prompt pass@1", "eval_pass1"),
                ("batch: first turn passes", "pass_first"), ("batch: any turn passes", "pass_any"))),
    ("MirrorPop keep rate", (("kept / checked sequences", _mirrorpop_keep_rate),)),
    ("Retry buffer size", (("entries after the step", "retry_buffer"),)),
    ("KL to the reference policy", (("k3 KL", "kl"),)),
    ("Loss", (("loss", "loss"),)),
    ("Learning rate", (("learning rate", "learning_rate"),)),
)


def is_training_run(root: str | Path) -> bool:
    """A training output folder: metrics.jsonl and no benchmark tasks.jsonl."""
    root = Path(root)
    return (root / "metrics.jsonl").is_file() and not (root / "tasks.jsonl").exists()


def training_run_of_model(model: str) -> Path | None:
    """The training run folder a benchmarked model spec (`hf:PATH`, `vllm:PATH`) comes from: PATH itself or its
    parent (PATH = RUN/final), when it holds metrics.jsonl; else None."""
    kind, _, path = model.partition(":")
    if kind not in ("hf", "vllm") or not path:
        return None
    p = Path(path)
    for folder in (p, p.parent):
        if folder.is_dir() and is_training_run(folder):
            return folder
    return None


def load_training_metrics(root: str | Path) -> list[dict]:
    """The rows of ROOT/metrics.jsonl; a torn line (a run still writing) is skipped."""
    path = Path(root) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{root} has no metrics.jsonl: point at the output folder of `musacoder train rl` "
                                "or `train sft`")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def training_curves(rows: list[dict]) -> tuple[dict[str, dict[str, tuple[list[float], list[float]]]], list[str]]:
    """Panels of training curves from metrics rows: {panel: {series: (steps, values)}}, and a note for each series
    the rows do not hold. The x value is the row's `step` (its index when absent); NaN and missing values are
    skipped point by point."""
    panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    notes: list[str] = []
    for title, series in TRAINING_PANELS:
        for label, key in series:
            xs, ys = [], []
            for i, row in enumerate(rows):
                y = _number(key(row) if callable(key) else row.get(key))
                x = _number(row.get("step", i))
                if y is not None and x is not None:
                    xs.append(x)
                    ys.append(y)
            if xs:
                panels.setdefault(title, {})[label] = (xs, ys)
            else:
                name = "mirrorpop_keep_rate` or `mirrorpop_popped / mirrorpop_checked" if callable(key) else key
                notes.append(f"{title}: {label} skipped, no `{name}` in metrics.jsonl")
    return panels, notes


def make_training_plots(panels: dict[str, dict[str, tuple[list[float], list[float]]]]) -> dict[str, str] | None:
    """title → base64 PNG, one per panel; None without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    plots = {}
    for title, series in panels.items():
        fig = Figure(figsize=(6, 3.2))
        ax = fig.add_subplot()
        for label, (xs, ys) in series.items():
            ax.plot(xs, ys, marker="." if len(xs) < 60 else None, lw=1.2, label=label)
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=8)
        plots[title] = _png(fig)
    return plots


def training_rows(panels: dict[str, dict[str, tuple[list[float], list[float]]]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the curves' table: per series its points, first, last, min and max value."""
    rows = []
    for title, series in panels.items():
        for label, (_, ys) in series.items():
            rows.append([title, label, str(len(ys))] + [f"{v:.4g}" for v in (ys[0], ys[-1], min(ys), max(ys))])
    return ["Panel", "Series", "Points", "First", "Last", "Min", "Max"], rows


def training_section(root: str | Path, rows: list[dict], panels, notes: list[str], plots: dict[str, str] | None,
                     level: int = 1) -> tuple[list[str], list[str]]:
    """(markdown lines, html parts) of the training curves of run folder `root`."""
    h = "#" * level
    steps = [r["step"] for r in rows if isinstance(r.get("step"), (int, float))]
    line = f"{len(rows)} metrics rows" + (f", steps {min(steps)}–{max(steps)}" if steps else "")
    header, table_rows = training_rows(panels)
    md = [f"{h} Training curves: {root}", "", line, ""]
    body = [f"<h{level}>Training curves: {html.escape(str(root))}</h{level}>", f"<p>{html.escape(line)}</p>"]
    if table_rows:
        md += [_md_table(header, table_rows), ""]
        body.append(_html_table(header, table_rows))
    else:
        md += ["No known series in metrics.jsonl.", ""]
        body.append("<p>No known series in metrics.jsonl.</p>")
    if notes:
        md += [f"- {n}" for n in notes] + [""]
        body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    if plots:
        for title, data in plots.items():
            body.append(f"<h{level + 1}>{html.escape(title)}</h{level + 1}><img alt=\"{html.escape(title)}\" "
                        f"src=\"data:image/png;base64,{data}\">")
        md += ["Plots: see the HTML report.", ""]
    elif panels:
        md += ["(Plots skipped: install matplotlib, e.g. `pip install 'musacoder[report]'`.)", ""]
        body.append("<p>Plots skipped: matplotlib is not installed.</p>")
    return md, body


def write_training_report(root: str | Path) -> dict[str, Any]:
    """Write training_report.md and training_report.html into training run folder `root`; return
    {"rows": n, "series": {panel: {series: {"last", "min", "max"}}}, "notes": [...]}."""
    rows = load_training_metrics(root)
    panels, notes = training_curves(rows)
    md, body = training_section(root, rows, panels, notes, make_training_plots(panels))
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>musacoder training report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
    rd = RunDir(root)
    rd.write_text("training_report.md", "\n".join(md) + "\n")
    rd.write_text("training_report.html", page)
    return {"rows": len(rows), "notes": notes,
            "series": {t: {lab: {"last": ys[-1], "min": min(ys), "max": max(ys)} for lab, (_, ys) in s.items()}
                       for t, s in panels.items()}}
