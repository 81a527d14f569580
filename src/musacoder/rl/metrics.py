"""Metric sinks of an RL run: one JSON object per step in `metrics.jsonl`, and TensorBoard when installed."""

from __future__ import annotations

import json
import math
from pathlib import Path


class MetricsLogger:
    def __init__(self, out_dir: str | Path, tensorboard: bool = True):
        self.path = Path(out_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(out_dir) / "tb"))
            except ImportError:  # tensorboard is optional
                self._tb = None

    def log(self, step: int, metrics: dict) -> None:
        row = {"step": step, **metrics}
        self._file.write(json.dumps(row, default=float) + "\n")
        self._file.flush()
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(out_dir: str | Path) -> list[dict]:
    path = Path(out_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
