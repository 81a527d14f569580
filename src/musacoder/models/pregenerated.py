"""Pre-generated responses read from a folder (`dir:PATH`).

Layout (turns are 1-based):

    PATH/<task-name>/<sample>.txt          turn-1 response of sample <sample> (0, 1, …)
    PATH/<task-name>/<sample>.turn<k>.txt  turn-k response, k ≥ 2 (`<sample>.turn1.txt` is accepted for turn 1)

`<task-name>` is the problem file name without `.py` (`19_ReLU`). `PATH/level<N>/<task-name>/` is looked up first,
so a run directory's `responses/` folder (written in that layout) replays as a model. A missing file gives a
completion with `text=None`: on turn 1 the sample is reported missing, on a later turn the conversation ends there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from musacoder.models.base import ChatRequest, Completion, Sampling


def response_filename(sample: int, turn: int) -> str:
    """File name of a response in the `dir:` layout: `<sample>.txt` for turn 1, `<sample>.turn<k>.txt` after."""
    return f"{sample}.txt" if turn == 1 else f"{sample}.turn{turn}.txt"


class PregeneratedClient:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.name = f"dir:{root}"
        if not self.root.is_dir():
            raise FileNotFoundError(f"dir: model folder not found: {self.root} "
                                    "(expected PATH/<task-name>/<sample>.txt)")

    def path_for(self, task: str, level: int | None, sample: int, turn: int) -> Path | None:
        folders = ([self.root / f"level{level}" / task] if level is not None else []) + [self.root / task]
        names = [response_filename(sample, turn)] + ([f"{sample}.turn1.txt"] if turn == 1 else [])
        for folder in folders:
            for name in names:
                if (folder / name).is_file():
                    return folder / name
        return None

    def generate(self, requests: Sequence[ChatRequest], sampling: Sampling) -> Iterator[tuple[ChatRequest, Completion]]:
        for req in requests:
            path = self.path_for(req.task, req.level, req.sample, req.turn)
            if path is None:
                expected = self.root / req.task / response_filename(req.sample, req.turn)
                yield req, Completion(text=None, error=f"no pre-generated response: expected {expected}")
            else:
                yield req, Completion(text=path.read_text(encoding="utf-8", errors="replace"), finish_reason="file")

    def close(self) -> None:
        pass
