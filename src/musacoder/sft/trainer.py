"""SFT/RFT with TRL's `SFTTrainer`: build the model and tokenizer, the per-epoch dataset, train, save final/.

`final/` is a plain `transformers` checkpoint (LoRA adapters merged) with its tokenizer and chat template: `train
rl` loads it through `model.name_or_path`, `bench --model hf:PATH` through `HFLocalClient.from_path`. The HF
checkpoints `checkpoint-N/` next to it carry optimiser, scheduler and RNG state for resuming.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import torch

from musacoder.rl.rundir import ResumeError, save_final
from musacoder.sft.config import SFTConfig, resume_mismatch
from musacoder.sft.dataset import EpochDataset, data_fingerprint, detect_kind, load_rows

log = logging.getLogger(__name__)


def _need_trl():
    try:
        import trl
    except ImportError as e:
        raise RuntimeError("train sft needs TRL: pip install 'musacoder[train]' (trl, peft, transformers)") from e
    return trl


def model_location(name: str) -> str:
    """A model (or tokenizer) name as `from_pretrained` takes it: a stage folder becomes the model its manifest
    names (`musacoder.manifest.resolve_model`), an existing model folder stays, a hub id passes through."""
    if not Path(name).exists():
        return name
    from musacoder.manifest import resolve_model

    return str(resolve_model(name))


def build_tokenizer(cfg: SFTConfig):
    """The model's own tokenizer (or `model.tokenizer`); the offline byte-level chat tokenizer for the tiny model."""
    name = cfg.model.tokenizer or cfg.model.name_or_path
    name = model_location(name) if name else name
    if not name:
        from musacoder.sft.tokenizer import chat_byte_tokenizer

        return chat_byte_tokenizer()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"tokenizer {name!r} has no chat template; SFT renders conversations with it. Point "
                         "model.tokenizer at a chat model's tokenizer, or add a chat_template to its "
                         "tokenizer_config.json")
    return tok


def build_model(cfg: SFTConfig, tokenizer):
    """A local/hub causal LM, or the tiny Llama `train rl` builds from the same `tiny` shape (seeded init)."""
    m = cfg.model
    if m.name_or_path:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model_location(m.name_or_path), dtype=getattr(torch, m.dtype))
    else:
        from musacoder.rl.config import ModelConfig, RLConfig, RunConfig
        from musacoder.rl.trainer import build_policy

        rl_cfg = RLConfig(model=ModelConfig(tiny=m.tiny, dtype=m.dtype, device="cpu"),
                          run=RunConfig(seed=cfg.run.seed))
        model = build_policy(rl_cfg, tokenizer)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def peft_config(cfg: SFTConfig):
    if cfg.model.lora is None:
        return None
    try:
        import peft
    except ImportError as e:
        raise RuntimeError("model.lora is set but peft is not installed: pip install 'musacoder[train]'") from e
    lo = cfg.model.lora
    return peft.LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                           task_type="CAUSAL_LM")


def use_bf16(setting: str | bool) -> bool:
    """`train.bf16`: 'auto' = a CUDA GPU that supports bf16 is present."""
    if setting == "auto":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return bool(setting)


def trl_args(cfg: SFTConfig):
    """TRL's `SFTConfig` for our config. Preparation is skipped: `EpochDataset` already holds ids and labels."""
    trl = _need_trl()
    t, r = cfg.train, cfg.run
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name warns)
    names = {f.name for f in dataclasses.fields(trl.SFTConfig)}
    ckpt_key = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return trl.SFTConfig(
        output_dir=r.out_dir, seed=r.seed, data_seed=r.seed,
        learning_rate=t.lr, num_train_epochs=t.epochs, per_device_train_batch_size=t.batch_size,
        gradient_accumulation_steps=t.grad_accum, lr_scheduler_type=t.lr_scheduler, warmup_steps=t.warmup_steps,
        weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm, bf16=use_bf16(t.bf16), fp16=False,
        **{ckpt_key: cfg.model.gradient_checkpointing},
        save_strategy="steps" if r.save_steps else "epoch", save_steps=r.save_steps or 500,
        save_total_limit=r.keep_checkpoints, logging_steps=r.logging_steps, logging_first_step=True,
        report_to=list(r.report_to) or "none",
        max_length=None,  # EpochDataset truncates to data.max_seq_len
        dataset_kwargs={"skip_prepare_dataset": True}, remove_unused_columns=False,
        dataloader_pin_memory=torch.cuda.is_available(),
    )


def _append_row(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _metrics_callback(path: Path):
    from transformers import TrainerCallback

    class MetricsJsonl(TrainerCallback):
        """Appends every log row (loss, learning_rate, grad_norm, epoch, step) to metrics.jsonl."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                _append_row(path, {"step": state.global_step, **logs})

    return MetricsJsonl()


DATA_RECORD = "data.json"  # the run's data files and their sha256 (`data_fingerprint`), beside config.json


def resume_point(cfg: SFTConfig, data: dict[str, str] | None = None) -> str | None:
    """The checkpoint to continue from (`run.resume`), or None for a fresh start. Resuming the latest checkpoint
    needs the run directory's recorded config.json to agree with `cfg` but on `FREE_KEYS`, and its recorded data
    files (data.json, where there is one) to hash as `data` does; where either differs (or `run.resume` names no
    checkpoint directory), a `ResumeError` (a ValueError; `train rl` raises the same, and both commands exit 2 on
    it) names what and the ways on. Call before config.json and data.json are rewritten."""
    r = cfg.run
    if isinstance(r.resume, str):
        if not Path(r.resume).is_dir():
            raise ResumeError(f"run.resume = {r.resume!r} is not a checkpoint directory")
        return r.resume
    if not r.resume or not Path(r.out_dir).is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(r.out_dir)
    if last is None:
        return None
    recorded_path = Path(r.out_dir) / "config.json"
    how = (f"start fresh with --fresh (removes the earlier run in {r.out_dir}) or another --out-dir, or resume "
           f"anyway with --set run.resume={last}")
    try:
        recorded = json.loads(recorded_path.read_text())
    except (OSError, ValueError) as e:
        raise ResumeError(f"{r.out_dir} holds {Path(last).name} but no readable config.json to check it against "
                          f"({e}); {how}") from e
    differ = resume_mismatch(recorded, cfg.model_dump(mode="json"))
    if differ:
        keys = "; ".join(f"{k}: {old!r} there, {new!r} now" for k, (old, new) in differ.items())
        raise ResumeError(f"{r.out_dir} holds {Path(last).name} of a run with other settings ({keys}); {how}")
    recorded_data = Path(r.out_dir) / DATA_RECORD
    if data is not None and recorded_data.is_file():
        before = json.loads(recorded_data.read_text())
        changed = sorted(f for f in {*before, *data} if before.get(f) != data.get(f))
        if changed:
            raise ResumeError(f"{r.out_dir} holds {Path(last).name} of a run on other data: "
                              f"{', '.join(changed)} changed since (sha256 in {recorded_data}); {how}")
    return last


def clear_run(out_dir: Path) -> None:
    """A fresh start in `out_dir`: the earlier run's checkpoint-N/, eval/, final/, adapter/, metrics.jsonl and
    manifest go, so neither a later resume, nor the metrics, nor a stage reading the folder mixes two runs (the
    folder is a stage folder again when this run has written its final/ and manifest)."""
    import os
    import shutil

    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, one process clears
        return
    from musacoder.manifest import MANIFEST_NAME

    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)  # first: the folder stops naming a model before it goes
    for ckpt in [*out_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*"), out_dir / "eval", out_dir / "final", out_dir / "adapter"]:
        if ckpt.is_dir():
            shutil.rmtree(ckpt, ignore_errors=True)
    (out_dir / "metrics.jsonl").unlink(missing_ok=True)


def train_from_config(cfg: SFTConfig, *, model=None, tokenizer=None, eval_verifier=None) -> dict[str, Any]:
    """Run SFT/RFT to the end; returns {"final", "log_history", "data", "train_loss"}. `model`, `tokenizer` and the
    held-out evaluation's verifier (`musacoder.judge.batch.verify_many`'s signature) can be injected (tests)."""
    trl = _need_trl()
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    out_dir = Path(cfg.run.out_dir)
    data = data_fingerprint(cfg.data.train)
    resume = resume_point(cfg, data)  # before config.json and data.json are rewritten: a resume is checked on them
    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(cfg)
    rows, origins = load_rows(cfg.data.train, cfg.data.limit)
    kind = detect_kind(rows, cfg.data.kind, origins)
    model = model if model is not None else build_model(cfg, tokenizer)  # before a fresh start clears out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    if resume is None:
        clear_run(out_dir)
    (out_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    (out_dir / DATA_RECORD).write_text(json.dumps(data, indent=1) + "\n")
    dataset = EpochDataset(rows, tokenizer, cfg.data.max_seq_len, kind=kind, seed=cfg.run.seed, origins=origins)
    log.info("%s data: %d rows, %d dropped (prompt too long), %d truncated", kind, len(dataset),
             dataset.stats["dropped_too_long"], dataset.stats["truncated"])

    metrics = out_dir / "metrics.jsonl"
    callbacks = [_metrics_callback(metrics)]
    if cfg.eval.tasks:
        from musacoder.sft.evaluate import eval_callback

        callbacks.append(eval_callback(cfg.eval, tokenizer, out_dir, lambda row: _append_row(metrics, row),
                                       verifier=eval_verifier))
    trainer = trl.SFTTrainer(model=model, args=trl_args(cfg), train_dataset=dataset.to_hf(),
                             processing_class=tokenizer, peft_config=peft_config(cfg), callbacks=callbacks)
    if kind == "rft":
        # SFTTrainer only accepts a `datasets.Dataset`, which cannot change between epochs; the dataloader is built
        # in train() from `trainer.train_dataset`, and accelerate calls its `set_epoch` before each epoch.
        trainer.train_dataset = dataset
    result = trainer.train(resume_from_checkpoint=resume)
    final = out_dir / "final"
    if trainer.is_world_process_zero():
        save_final(trainer.model, tokenizer, out_dir)  # final/ (LoRA merged) and adapter/, as `train rl` writes them
        write_run_manifest(cfg, kind, dataset.stats, trainer.state.global_step)
    return {"final": str(final), "log_history": trainer.state.log_history, "data": {"kind": kind, **dataset.stats},
            "train_loss": result.training_loss}


def write_run_manifest(cfg: SFTConfig, kind: str, data_stats: dict[str, Any], steps: int) -> Path:
    """`OUT/musacoder.json` (`musacoder.manifest`): stage 'sft' or 'rft' (the kind of rows trained on), what was
    read, and the products — 'model' = final/, 'adapter' for LoRA runs, 'metrics', 'config', 'data' (data.json)."""
    from musacoder.manifest import Manifest, write_manifest

    out_dir = Path(cfg.run.out_dir)
    files = {"model": "final", "metrics": "metrics.jsonl", "config": "config.json", "data": DATA_RECORD}
    if (out_dir / "adapter").is_dir() and cfg.model.lora is not None:
        files["adapter"] = "adapter"
    base = cfg.model.name_or_path
    inputs = {"model": str(Path(model_location(base)).resolve()) if base and Path(base).exists() else (base or "tiny"),
              "data": ",".join(str(Path(p).resolve()) if Path(p).exists() else p for p in cfg.data.train)}
    info = {"kind": kind, "rows": data_stats.get("rows"), "dropped_too_long": data_stats.get("dropped_too_long"),
            "steps": steps, "epochs": cfg.train.epochs, "lora": cfg.model.lora is not None}
    return write_manifest(out_dir, Manifest(stage="rft" if kind == "rft" else "sft", inputs=inputs, files=files,
                                            info=info))
