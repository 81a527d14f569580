"""The run directory of an RL run: what it records, when a run may continue in it, and what it hands on.

    OUT/config.json      the run's settings (model paths absolute), what a later start is checked against
    OUT/checkpoints/     step_NNNNNN.pt: trained weights, optimiser, retry buffer, RNG states, task order
    OUT/metrics.jsonl    one row per step (eval/ rows merged into the step they follow)
    OUT/final/           a complete Hugging Face model folder: weights (LoRA merged), config, tokenizer
    OUT/adapter/         the LoRA adapter alone (LoRA runs only)
    OUT/musacoder.json   the stage manifest (`musacoder.manifest`): stage 'rl', its input model, its products

Starting in a folder that already holds a run (`start_plan`): with `run.resume = true` (the default) the run
continues from its newest checkpoint only when the recorded config.json agrees with the new settings on every key
but `FREE_KEYS`; otherwise the start is refused with the differing keys and the ways on. `run.resume = false`
(`--fresh`) starts over: the earlier checkpoints and metrics are removed. `run.resume = PATH` continues from that
checkpoint file whatever changed (the new settings apply from there).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from musacoder.config_files import settings_differences

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
FINAL = "final"
ADAPTER = "adapter"

# Keys that may change between the runs of one folder: how long and how often, where, how fast, what is watched.
# Every other key (model, tokenizer, LoRA, dtype, tasks and their prompts, sampling, GRPO, PrimeEcho, retry,
# MirrorPop, seed) shapes what is learned, and a resume with another value of it would silently mix two runs.
FREE_KEYS = frozenset({
    "run.steps", "run.out_dir", "run.resume", "run.save_every", "run.keep_checkpoints", "run.threads",
    "run.tensorboard", "run.wandb", "run.wandb_project", "run.wandb_mode", "run.eval_every", "run.eval_samples",
    "run.eval_temperature", "model.device", "model.gradient_checkpointing", "env.max_workers", "env.verifier_url",
    "env.verifier_token", "env.verifier_timeout_s", "env.eval_tasks", "rollout.chunk_size", "rollout.engine",
    "grpo.micro_batch_size", "grpo.logprob_chunk_size",
})
PATH_KEYS = ("model.name_or_path", "model.tokenizer")


class ResumeError(ValueError):
    """A run directory holds a run that the new settings cannot continue."""


def config_differences(recorded: dict[str, Any], current: dict[str, Any],
                       defaults: dict[str, Any] | None = None) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (recorded, current) for every key outside `FREE_KEYS` on which two config dumps differ
    (`musacoder.config_files.settings_differences`); `model.tiny` is ignored when a model path is set (unused)."""
    return settings_differences(recorded, current, FREE_KEYS, PATH_KEYS, defaults,
                                unused={"model.tiny": "model.name_or_path"})


def checkpoints(out_dir: Path) -> list[Path]:
    return sorted((Path(out_dir) / CHECKPOINTS).glob("step_*.pt"))


@dataclass
class StartPlan:
    """How a run starts in its folder: from `resume_from` (a checkpoint file) or from scratch; `changed` lists the
    keys (with their old and new values) a forced resume lets change."""

    resume_from: Path | None = None
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def start_plan(out_dir: str | Path, current: dict[str, Any], resume: bool | str,
               defaults: dict[str, Any] | None = None) -> StartPlan:
    """Decide how a run with config dump `current` starts in `out_dir` (see the module docstring); raises
    ResumeError, naming the keys that differ and what to pass instead, when the folder's run cannot continue.
    Reads only; `prepare` carries the plan out."""
    out_dir = Path(out_dir)
    recorded_path = out_dir / CONFIG_NAME
    recorded = None
    if recorded_path.is_file():
        try:
            recorded = json.loads(recorded_path.read_text())
        except ValueError:
            recorded = None
    if isinstance(resume, str):
        ckpt = Path(resume)
        if not ckpt.is_file():
            raise ResumeError(f"run.resume = {resume!r}: no such checkpoint file; pass one of "
                              f"{[str(p) for p in checkpoints(out_dir)] or 'the step_*.pt files of a run'}")
        changed = config_differences(recorded, current, defaults) if recorded is not None else {}
        return StartPlan(resume_from=ckpt, changed=changed)
    if resume is False:
        return StartPlan()
    found = checkpoints(out_dir)
    if not found:
        return StartPlan()  # nothing to continue: whatever else is there is replaced
    ways = (f"to start a new run there pass --fresh (removes {out_dir}'s checkpoints and metrics), or choose "
            f"another --out-dir; to continue the earlier run with the new settings pass "
            f"--set run.resume={found[-1]}")
    if recorded is None:
        raise ResumeError(f"{out_dir} holds {found[-1].name} but no readable {CONFIG_NAME} to check the new "
                          f"settings against; {ways}")
    differ = config_differences(recorded, current, defaults)
    if differ:
        keys = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in differ.items())
        raise ResumeError(f"{out_dir} holds a run with other settings ({keys}); {ways}")
    return StartPlan(resume_from=found[-1])


def prepare(out_dir: str | Path, plan: StartPlan, config_json: str) -> None:
    """Carry out a plan: a fresh start removes the earlier checkpoints and metrics (so neither a later resume nor
    the metrics mix two runs); a resume drops metrics rows of steps after its checkpoint (they are run again).
    Then the new settings are recorded in config.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = out_dir / METRICS_NAME
    if plan.resume_from is None:
        shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
        metrics.unlink(missing_ok=True)
    elif metrics.is_file():
        import torch

        step = int(torch.load(plan.resume_from, map_location="cpu", weights_only=False)["step"])
        rows = [line for line in metrics.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= step]
        metrics.write_text("".join(line + "\n" for line in rows))
    tmp = out_dir / (CONFIG_NAME + ".tmp")
    tmp.write_text(config_json)
    tmp.replace(out_dir / CONFIG_NAME)


# --- what the run hands on ----------------------------------------------------------------------------------------


def save_final(model, tokenizer, out_dir: str | Path) -> dict[str, str]:
    """final/: a complete Hugging Face model folder (weights with LoRA adapters merged, config, generation config,
    tokenizer), which `from_pretrained`, `bench --model hf:` and another `train rl` load; with LoRA also adapter/.
    A peft model is merged in place (`merge_and_unload`): call this at the end. Returns the manifest's files."""
    out_dir = Path(out_dir)
    files = {}
    if hasattr(model, "merge_and_unload"):  # a peft model
        model.save_pretrained(out_dir / ADAPTER)
        files["adapter"] = ADAPTER
        model = model.merge_and_unload()
    final = out_dir / FINAL
    tmp = out_dir / (FINAL + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.config.use_cache = True  # gradient checkpointing turns the KV cache off; generation wants it
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.replace(final)
    return {"model": FINAL, **files}


def write_rl_manifest(out_dir: str | Path, model_input: str, files: dict[str, str], info: dict[str, Any]) -> Path:
    """OUT/musacoder.json: stage 'rl', the model it started from, its products (always metrics and config; 'model'
    and 'adapter' once saved)."""
    from musacoder.manifest import Manifest, write_manifest

    return write_manifest(out_dir, Manifest(
        stage="rl", inputs={"model": model_input},
        files={"metrics": METRICS_NAME, "config": CONFIG_NAME, "checkpoints": CHECKPOINTS, **files}, info=info))
