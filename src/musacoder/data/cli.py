"""`musacoder data tasks|decontam|diagnose|mix|solutions|rft`. Heavy modules are imported inside the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

DEFAULT_KERNELBENCH = "/work/shared/kernelbench"


def tasks(
    out: Annotated[Path, typer.Option(help="Folder for the task files and manifest.jsonl (a rerun resumes it).")],
    count: Annotated[int, typer.Option(min=1, help="Candidates to generate and execute (kept + rejected).")] = 60,
    seed: Annotated[int, typer.Option(help="Generation seed; also seeds the checks' weights and inputs.")] = 0,
    scale: Annotated[float, typer.Option(min=0.01, help="Multiplies every size (1: CPU-sized; odd sizes stay odd).")] = 1.0,
    families: Annotated[Optional[str], typer.Option(help="Comma-separated catalogue families, 'graph' and/or 'block' (default: all).")] = None,
    graph_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of random-graph candidates.")] = 0.5,
    block_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of real-architecture blocks.")] = 0.15,
    max_forward_s: Annotated[float, typer.Option(help="Reject a task whose forward takes longer (CPU, one thread).")] = 2.0,
    max_footprint_mib: Annotated[float, typer.Option(help="Reject a task whose inputs+outputs+parameters exceed this.")] = 512.0,
    timeout_s: Annotated[float, typer.Option(help="Kill the check of one candidate after this long.")] = 60.0,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Stage 1: synthesise KernelBench-format tasks (catalogue variants, random operator graphs, blocks of real
    architectures), execute each before keeping it, and log every candidate with its reason in OUT/manifest.jsonl."""
    from rich.console import Console

    from musacoder.data.check import CheckLimits
    from musacoder.data.synth import SynthConfig, synthesize

    console = Console()
    try:
        config = SynthConfig(
            count=count, seed=seed, scale=scale, graph_fraction=graph_fraction, block_fraction=block_fraction,
            families=[f.strip() for f in (families or "").split(",") if f.strip()],
            limits=CheckLimits(max_forward_s=max_forward_s, max_footprint_bytes=int(max_footprint_mib * 2**20),
                               timeout_s=timeout_s),
        )
        summary = synthesize(config, out, progress=not no_progress)
    except ValueError as e:
        console.print(f"[red]data tasks: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    rate = summary.kept / summary.candidates if summary.candidates else 0.0
    console.print(f"kept {summary.kept}/{summary.candidates} ({rate:.0%}) in {out}; manifest {summary.manifest}")
    if summary.reasons:
        console.print("rejected: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.items()))
    console.print("families: " + ", ".join(f"{k} {v}" for k, v in summary.families.items()))


def decontam(
    input_dir: Annotated[Path, typer.Argument(help="Folder of task files to check (searched recursively).")],
    report: Annotated[Path, typer.Option(help="Where to write the JSON report (one object per input task).")],
    against: Annotated[Optional[Path], typer.Option(envvar="KERNELBENCH_DIR", help=f"Reference task folder, searched recursively (default $KERNELBENCH_DIR or {DEFAULT_KERNELBENCH}).")] = None,
    threshold: Annotated[float, typer.Option(help="Combined-score threshold.")] = 0.6,
    structure_threshold: Annotated[float, typer.Option(help="Structure-similarity threshold.")] = 0.95,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Text similarity only: execute no task code.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Flag input tasks that copy (or run the same program as) a task of the reference folder; write a report
    [{file, contaminated, match, score, structure, text, traced}, …]."""
    from rich.console import Console

    from musacoder.data.decontam import DecontamConfig, decontaminate

    console = Console()
    against = against or Path(DEFAULT_KERNELBENCH)
    config = DecontamConfig(threshold=threshold, structure_threshold=structure_threshold, trace=not no_trace)
    try:
        rows = decontaminate(input_dir, against, config, progress=not no_progress)
    except FileNotFoundError as e:
        console.print(f"[red]data decontam: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps([r.model_dump() for r in rows], indent=1) + "\n")
    flagged = sum(r.contaminated for r in rows)
    console.print(f"{flagged}/{len(rows)} contaminated (against {against}); report {report}")


def _kv(pairs: Optional[list[str]], flag: str) -> dict[str, Any]:
    """KEY=VALUE pairs, values parsed as JSON where they can be (`trials=2`, `time_candidate=false`)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{flag} {pair!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def diagnose(
    tasks_dir: Annotated[Path, typer.Argument(help="Task folder to profile (searched recursively).")],
    out: Annotated[Path, typer.Option(help="Folder for profiles.jsonl, diagnostic.jsonl and the set's tasks/.")],
    per_family: Annotated[int, typer.Option(min=1, help="Most diagnostic tasks per operator family.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the choice within each family.")] = 0,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Profile each task's reference (torch.profiler, CPU) into operator families and copy a balanced diagnostic set
    to OUT/tasks/; score a model on it with `musacoder bench --suite dir:OUT/tasks`. Runs the tasks' code."""
    from rich.console import Console

    from musacoder.data.mix import write_diagnostic

    console = Console()
    if not tasks_dir.is_dir():
        console.print(f"[red]data diagnose: {tasks_dir} is not a folder of task files")
        raise typer.Exit(2)
    try:
        chosen = write_diagnostic(tasks_dir, out, per_family=per_family, seed=seed, progress=not no_progress)
    except ValueError as e:
        console.print(f"[red]data diagnose: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    from collections import Counter

    hist = Counter(p.family for p in chosen)
    console.print(f"{len(chosen)} diagnostic tasks in {out / 'tasks'}: " + ", ".join(f"{k} {v}" for k, v in hist.items()))
    console.print(f"next: musacoder bench --suite dir:{out / 'tasks'} --model SPEC --out RUN_DIR, then "
                  f"musacoder data mix {tasks_dir} --bench RUN_DIR --out MIX_DIR", soft_wrap=True)


def mix(
    tasks_dir: Annotated[Path, typer.Argument(help="The training task pool to draw from (searched recursively).")],
    bench: Annotated[Path, typer.Option(help="Run directory of `musacoder bench` on the diagnostic set.")],
    out: Annotated[Path, typer.Option(help="Folder for weights.json, the mixed dataset mix/ and the drawn tasks/.")],
    size: Annotated[int, typer.Option(min=1, help="Tasks to draw (with replacement).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the draws.")] = 0,
    floor: Annotated[float, typer.Option(min=0.0, help="Weight a fully solved family keeps (see weights.json rule).")] = 0.1,
    easy_scale: Annotated[float, typer.Option(min=0.0, help="Multiplier of the elementwise/activation family.")] = 0.5,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Per-family pass rates of a bench run → sampling weights (weak families up, easy elementwise down) → a mixed
    task dataset. Writes OUT/weights.json, OUT/mix/data.parquet (+ README.md) and OUT/tasks/."""
    from rich.console import Console

    from musacoder.data.mix import build_mix

    console = Console()
    try:
        doc = build_mix(tasks_dir, bench, out, size=size, seed=seed, floor=floor, easy_scale=easy_scale,
                        progress=not no_progress)
    except (ValueError, FileNotFoundError) as e:
        console.print(f"[red]data mix: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    for f, info in doc["families"].items():
        console.print(f"{f:14s} pass {info['pass_rate_used']:.2f}{'' if info['measured'] else ' (mean)'}  "
                      f"share {info['share']:.3f}  tasks {info['tasks']}  draws {info['draws']}")
    console.print(f"weights {out / 'weights.json'}; dataset {out / 'mix'}")


_GEN_HELP = "Model spec: openai:BASE_URL#MODEL, vllm:PATH_OR_NAME, hf:PATH or dir:PATH."


def solutions(
    tasks_dir: Annotated[Path, typer.Argument(help="Task folder (KernelBench format), e.g. a mix's OUT/tasks.")],
    model: Annotated[str, typer.Option(help=_GEN_HELP)],
    out: Annotated[Path, typer.Option(help="Folder: run/ (the verified generations, resumable) and the datasets.")],
    backend: Annotated[str, typer.Option(help="cuda, triton, cpu or musa.")] = "cuda",
    samples: Annotated[int, typer.Option(min=1, help="Samples per task.")] = 4,
    turns: Annotated[int, typer.Option(min=1, help="Most responses per sample (feedback between turns).")] = 3,
    stop_on_pass: Annotated[bool, typer.Option(help="End a sample at its first accepted turn (no rewrites from later turns).")] = False,
    metadata: Annotated[bool, typer.Option(help="Shape/stride/dtype metadata in the prompt.")] = True,
    six_step: Annotated[bool, typer.Option(help="Ask for the six-step solution scheme.")] = True,
    temperature: Annotated[float, typer.Option(min=0.0)] = 0.7,
    max_tokens: Annotated[int, typer.Option(min=1)] = 16384,
    seed: Annotated[int, typer.Option()] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Parallel verifications.")] = 1,
    verify: Annotated[Optional[list[str]], typer.Option("--verify", help="VerifyConfig field KEY=VALUE (repeatable).")] = None,
    model_arg: Annotated[Optional[list[str]], typer.Option("--model-arg", help="Client option KEY=VALUE (repeatable).")] = None,
    min_gain: Annotated[float, typer.Option(help="Optimisation pairs need speedup(fast) ≥ (1+min_gain)·speedup(slow).")] = 0.1,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bars.")] = False,
) -> None:
    """Stages 2 and 3: generate with metadata + six-step prompts, verify with MooreEval, and write the datasets
    OUT/solutions, OUT/repair, OUT/optimise, OUT/reviewer (Parquet + card). A rerun resumes OUT/run."""
    from rich.console import Console

    from musacoder.bench.runner import ResumeError
    from musacoder.data.solutions import build_datasets, generate

    console = Console()
    try:
        generate(tasks_dir, out / "run", model=model, backend=backend, samples=samples, turns=turns,
                 keep_optimizing=not stop_on_pass, metadata=metadata, six_step=six_step, temperature=temperature,
                 max_tokens=max_tokens, seed=seed, workers=workers, verify=_kv(verify, "--verify"),
                 model_args=_kv(model_arg, "--model-arg"), progress=not no_progress)
        counts = build_datasets(out / "run", out, min_gain=min_gain,
                                made_by=f"musacoder data solutions {tasks_dir} --model {model} --out {out} "
                                        f"--backend {backend} --samples {samples} --turns {turns}",
                                inputs={"tasks": str(tasks_dir), "model": model})
    except (ValueError, FileNotFoundError, ResumeError) as e:
        console.print(f"[red]data solutions: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    console.print("rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f" (in {out})")
    console.print(f"next: musacoder train sft --config FILE --set data.train={out}", soft_wrap=True)


def rft(
    tasks_dir: Annotated[Path, typer.Argument(help="Task folder (KernelBench format).")],
    model: Annotated[str, typer.Option(help=_GEN_HELP + " Usually the SFT checkpoint.")],
    out: Annotated[Path, typer.Option(help="Folder: run/ (the verified samples, resumable) and rft/ (the dataset).")],
    backend: Annotated[str, typer.Option(help="cuda, triton, cpu or musa.")] = "cuda",
    samples: Annotated[int, typer.Option("--samples", "-k", min=1, help="Samples per task (k).")] = 8,
    cap: Annotated[int, typer.Option(min=1, help="Most pool members (clusters) per task.")] = 4,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="Kernel 4-gram Jaccard at which two samples share a cluster.")] = 0.7,
    metadata: Annotated[bool, typer.Option(help="Shape/stride/dtype metadata in the prompt.")] = True,
    six_step: Annotated[bool, typer.Option(help="Ask for the six-step solution scheme.")] = True,
    temperature: Annotated[float, typer.Option(min=0.0)] = 0.9,
    max_tokens: Annotated[int, typer.Option(min=1)] = 16384,
    seed: Annotated[int, typer.Option()] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Parallel verifications.")] = 1,
    verify: Annotated[Optional[list[str]], typer.Option("--verify", help="VerifyConfig field KEY=VALUE (repeatable).")] = None,
    model_arg: Annotated[Optional[list[str]], typer.Option("--model-arg", help="Client option KEY=VALUE (repeatable).")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bars.")] = False,
) -> None:
    """Diversity-preserving RFT: k single-turn samples per task, all verified; the accepted ones clustered per
    prompt by kernel structure, one per cluster up to --cap, written as OUT/rft (rows hold each prompt's pool)."""
    from rich.console import Console

    from musacoder.bench.runner import ResumeError
    from musacoder.data.rft import build_rft
    from musacoder.data.solutions import generate

    console = Console()
    try:
        generate(tasks_dir, out / "run", model=model, backend=backend, samples=samples, turns=1,
                 keep_optimizing=False, metadata=metadata, six_step=six_step, temperature=temperature,
                 max_tokens=max_tokens, seed=seed, workers=workers, verify=_kv(verify, "--verify"),
                 model_args=_kv(model_arg, "--model-arg"), progress=not no_progress)
        counts = build_rft(out / "run", out, cap=cap, threshold=threshold,
                           made_by=f"musacoder data rft {tasks_dir} --model {model} --out {out} --backend {backend} "
                                   f"-k {samples} --cap {cap} --threshold {threshold}",
                           inputs={"tasks": str(tasks_dir), "model": model})
    except (ValueError, FileNotFoundError, ResumeError) as e:
        console.print(f"[red]data rft: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    console.print(f"{counts['tasks_with_pool']}/{counts['tasks']} tasks with a pool; {counts['accepted']} accepted "
                  f"samples → {counts['pooled']} pool members; dataset {out / 'rft'}")
    console.print(f"next: musacoder train rft --config FILE --set data.train={out}", soft_wrap=True)


def pipeline(
    config: Annotated[Path, typer.Option(help="Pipeline config (TOML), e.g. examples/data/tiny_pipeline.toml.")],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override a config key: out=runs/x, mix.size=50 (repeatable).")] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bars.")] = False,
) -> None:
    """Every data stage from one config: tasks, decontamination, diagnostic bench, mix, stages 2-3, RFT."""
    from rich.console import Console

    from musacoder.bench.runner import ResumeError
    from musacoder.data.pipeline import PipelineConfig, load_config, run_pipeline

    console = Console()
    try:
        cfg = load_config(config)
        if set_:
            data = cfg.model_dump()
            for key, value in _kv(set_, "--set").items():
                node = data
                *parents, leaf = key.split(".")
                for p in parents:
                    if not isinstance(node.get(p), dict):
                        raise ValueError(f"--set {key}: {p!r} is not a section of the config")
                    node = node[p]
                node[leaf] = value
            cfg = PipelineConfig.model_validate(data)
        summary = run_pipeline(cfg, progress=not no_progress, log=lambda m: console.print(f"[bold]{m}"),
                               made_by=f"musacoder data pipeline --config {config}" + "".join(f" --set {x}" for x in set_ or []))
    except (ValueError, FileNotFoundError, ResumeError) as e:
        console.print(f"[red]data pipeline: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    console.print_json(json.dumps(summary))


def register(app: typer.Typer) -> None:
    data = typer.Typer(help="Training data: stage 1 tasks, decontamination, the diagnostic mix, stages 2–3 and RFT.",
                       no_args_is_help=True)
    data.command("tasks")(tasks)
    data.command("decontam")(decontam)
    data.command("diagnose")(diagnose)
    data.command("mix")(mix)
    data.command("solutions")(solutions)
    data.command("rft")(rft)
    data.command("pipeline")(pipeline)
    app.add_typer(data, name="data")
