"""Metric sinks of an RL run: one JSON object per step in `metrics.jsonl`, and, when enabled, TensorBoard (`tb/`)
and Weights & Biases. An enabled sink whose package is missing is an error at start, never a silent skip."""

from __future__ import annotations

import json
import math
from pathlib import Path


class SinkUnavailable(RuntimeError):
    """A metrics sink was enabled but its package is not installed."""


def _import_tensorboard():
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise SinkUnavailable("run.tensorboard = true but the tensorboard package is not installed: "
                              "pip install -e '.[tensorboard]', or set run.tensorboard = false") from e
    return SummaryWriter


def _import_wandb():
    try:
        import wandb
    except ImportError as e:
        raise SinkUnavailable("run.wandb = true but the wandb package is not installed: pip install -e '.[wandb]', "
                              "or set run.wandb = false") from e
    return wandb


def check_sinks(tensorboard: bool, wandb: bool) -> None:
    """Raise SinkUnavailable now for an enabled sink whose package is missing (a run checks before it loads a
    model, not after)."""
    if tensorboard:
        _import_tensorboard()
    if wandb:
        _import_wandb()


def _tensorboard_writer(log_dir: Path):
    return _import_tensorboard()(str(log_dir))


def _wandb_run(out_dir: Path, project: str, mode: str, config: dict | None):
    wandb = _import_wandb()
    # one W&B run per run directory: a resumed run goes on logging into the same one
    id_file = out_dir / "wandb_id.txt"
    run_id = id_file.read_text().strip() if id_file.is_file() else None
    if not run_id:
        run_id = wandb.util.generate_id() if hasattr(wandb, "util") else out_dir.resolve().name
        id_file.write_text(run_id + "\n")
    return wandb.init(project=project, name=out_dir.resolve().name, id=run_id, resume="allow", dir=str(out_dir),
                      mode=mode, config=config)


def _numeric(metrics: dict) -> dict[str, float]:
    return {k: v for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class MetricsLogger:
    """`log(step, metrics)` appends `{"step": step, **metrics}` to metrics.jsonl and sends the finite numbers to
    the enabled sinks (TensorBoard scalars under the same names; W&B at `step`)."""

    def __init__(self, out_dir: str | Path, tensorboard: bool = False, wandb: bool = False,
                 wandb_project: str = "musacoder", wandb_mode: str = "offline", config: dict | None = None):
        out_dir = Path(out_dir)
        self.path = out_dir / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # sinks first: a missing package stops the run before anything is written
        self._tb = _tensorboard_writer(out_dir / "tb") if tensorboard else None
        self._wandb = _wandb_run(out_dir, wandb_project, wandb_mode, config) if wandb else None
        self._file = self.path.open("a")

    def log(self, step: int, metrics: dict) -> None:
        row = {"step": step, **metrics}
        self._file.write(json.dumps(row, default=float) + "\n")
        self._file.flush()
        numbers = _numeric(metrics)
        if self._tb is not None:
            for k, v in numbers.items():
                self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log(numbers, step=step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(out_dir: str | Path) -> list[dict]:
    path = Path(out_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
