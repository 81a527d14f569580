"""Training rows from files, and the per-epoch training set `SFTTrainer` iterates.

Rows are Hugging Face `datasets` (Parquet files or directories, `save_to_disk` directories, JSONL), read into
plain dicts. An SFT row holds `messages` (and optionally `loss_turn`); an RFT row holds `pool`, the accepted samples
of one prompt, and every epoch `musacoder.data.rft.draw_epoch(rows, epoch, seed)` turns each RFT row into one
conversation with a randomly drawn member. `accelerate` calls `set_epoch` on the dataset before each epoch.
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from musacoder.sft.examples import PromptTooLong, TokenizedExample, tokenize_example

log = logging.getLogger(__name__)

DATA_SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


NOT_CHAT_HINT = ("pass the data stage's output folder (the one holding musacoder.json, written by `musacoder data "
                 "solutions|rft|pipeline`) or the rows file its manifest names (sft.jsonl, rft.jsonl)")


def stage_rows(folder: Path) -> list[Path] | None:
    """The row files a stage folder's manifest names (`files["sft"]`, `musacoder.manifest.resolve_sft_data`); None
    for a folder without a manifest. A manifest without rows (a model or bench folder) is an error saying what to
    pass."""
    from musacoder.manifest import MANIFEST_NAME, read_manifest, resolve_sft_data

    manifest = read_manifest(folder)
    if manifest is None:
        return None
    if "sft" not in manifest.files:
        raise ValueError(f"data.train: {folder} is the output folder of a '{manifest.stage}' stage and holds no "
                         f"training rows ({folder / MANIFEST_NAME} names {sorted(manifest.files) or 'nothing'}); "
                         f"{NOT_CHAT_HINT}")
    return resolve_sft_data(folder)


def data_files(patterns: Sequence[str]) -> list[Path]:
    """Files and `save_to_disk` directories named by `patterns` (stage folders: the rows their manifest names;
    other directories searched recursively for .parquet/.jsonl; files; globs), in a stable order."""
    out: list[Path] = []
    for pattern in patterns:
        p = Path(pattern)
        if p.is_dir():
            named = stage_rows(p)
            if named is not None:
                out += named
                continue
            if (p / "dataset_info.json").exists() or (p / "state.json").exists():
                out.append(p)  # written by Dataset.save_to_disk
                continue
            # .json is left out of directory searches: run directories keep stats and manifests in .json files
            found = sorted(f for f in p.rglob("*") if f.suffix in (".parquet", ".jsonl") and not f.name.startswith("."))
            if not found:
                raise FileNotFoundError(f"data.train: {p} holds no .parquet or .jsonl files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            matches = sorted(Path(m) for m in glob.glob(pattern))
            if not matches:
                raise FileNotFoundError(f"data.train: {pattern!r} matches no file or directory")
            out += [m for m in matches if m.is_file() or m.is_dir()]
    if not out:
        raise ValueError("data.train is empty: list the Parquet/JSONL files or directories to train on")
    return out


def _read(path: Path) -> list[dict]:
    import datasets

    if path.is_dir():
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if "train" not in ds:
                raise ValueError(f"{path}: a DatasetDict without a 'train' split ({list(ds)})")
            ds = ds["train"]
    else:
        kind = DATA_SUFFIXES.get(path.suffix)
        if kind is None:
            raise ValueError(f"{path}: unknown data format {path.suffix!r}; use .parquet or .jsonl")
        ds = datasets.load_dataset(kind, data_files=str(path), split="train")
    return ds.to_list()


def data_fingerprint(patterns: Sequence[str]) -> dict[str, str]:
    """Each data file `patterns` name (`data_files`), as an absolute path → sha256 of its bytes (a `save_to_disk`
    directory: of its files' relative names and bytes). What a resume checks the rows against."""
    import hashlib

    def update(h, path: Path) -> None:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)

    out: dict[str, str] = {}
    for path in data_files(patterns):
        h = hashlib.sha256()
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file()):
                h.update(str(f.relative_to(path)).encode() + b"\0")
                update(h, f)
        else:
            update(h, path)
        out[str(path.resolve())] = h.hexdigest()
    return out


def load_rows(patterns: Sequence[str], limit: int | None = None) -> tuple[list[dict], list[str]]:
    """(rows, origins): every row of every file, and "file#index" of each for error messages."""
    rows: list[dict] = []
    origins: list[str] = []
    for path in data_files(patterns):
        part = _read(path)
        rows += part
        origins += [f"{path}#{i}" for i in range(len(part))]
        if limit is not None and len(rows) >= limit:
            return rows[:limit], origins[:limit]
    return rows, origins


def detect_kind(rows: Sequence[dict], kind: str = "auto", origins: Sequence[str] | None = None) -> str:
    """'sft' or 'rft' for `data.kind` ('auto' = 'rft' when the first row carries a `pool`); every row must have the
    column that kind needs (`messages` or `pool`): the first that lacks it is an error naming its file#row."""
    if not rows:
        raise ValueError("the training data has no rows")
    if kind == "auto":
        kind = "rft" if "pool" in rows[0] else "sft"
    need = "pool" if kind == "rft" else "messages"
    for i, row in enumerate(rows):
        if row.get(need) is None:
            where = origins[i] if origins else f"row {i}"
            has = sorted(k for k, v in row.items() if v is not None)
            raise ValueError(f"{where}: a row without `{need}` (it has {has}), so data.kind = {kind!r} cannot train "
                             f"on it; {NOT_CHAT_HINT}")
    return kind


def rft_drawer() -> Callable[[list[dict], int, int], list[dict]]:
    """`musacoder.data.rft.draw_epoch`, with an actionable error where it is missing."""
    try:
        from musacoder.data.rft import draw_epoch
    except ImportError as e:
        raise RuntimeError("RFT rows (a `pool` column) need musacoder.data.rft.draw_epoch, which this install lacks; "
                           "update musacoder, or train on conversations (`messages`) with data.kind = 'sft'") from e
    return draw_epoch


class EpochDataset:
    """A map-style dataset of {"input_ids", "labels"}, one item per row.

    SFT rows are tokenized once. RFT rows are redrawn and retokenized by `set_epoch(e)` (e = 0, 1, …); the length
    stays the same, so the trainer's step count holds. Rows whose prompt alone exceeds `max_len` are dropped up
    front; a later draw that cannot fit keeps that row's previous conversation (counted in `stats`).
    """

    column_names = ["input_ids", "labels"]  # what TRL reads to recognise a tokenized dataset

    def __init__(self, rows: list[dict], tokenizer, max_len: int, kind: str = "sft", seed: int = 0,
                 origins: list[str] | None = None, drawer: Callable | None = None):
        self.tokenizer, self.max_len, self.kind, self.seed = tokenizer, max_len, kind, seed
        self.drawer = drawer if drawer is not None or kind != "rft" else rft_drawer()
        origins = origins or [f"row {i}" for i in range(len(rows))]
        self.stats: dict[str, Any] = {"rows": len(rows), "dropped_too_long": 0, "truncated": 0, "epoch": 0,
                                      "kept_previous_draw": 0}
        examples = self._conversations(rows, 0)
        keep, tokenized = [], []
        for i, conv in enumerate(examples):
            try:
                ex = self._tokenize(conv)
            except PromptTooLong:
                self.stats["dropped_too_long"] += 1
                continue
            except ValueError as e:
                raise ValueError(f"{origins[i]}: {e}") from e
            keep.append(i)
            tokenized.append(ex)
        if not keep:
            raise ValueError(f"no row fits max_seq_len {max_len}: every prompt fills it; raise data.max_seq_len")
        self.rows = [rows[i] for i in keep]
        self.origins = [origins[i] for i in keep]
        self.examples: list[TokenizedExample] = tokenized
        self.stats["truncated"] = sum(ex.truncated for ex in tokenized)
        if self.stats["dropped_too_long"]:
            log.warning("dropped %d of %d rows whose prompt alone exceeds max_seq_len %d",
                        self.stats["dropped_too_long"], len(rows), max_len)

    def _conversations(self, rows: list[dict], epoch: int) -> list[dict]:
        if self.kind != "rft":
            return rows
        drawn = list(self.drawer(rows, epoch, self.seed))
        if len(drawn) != len(rows):
            raise RuntimeError(f"draw_epoch returned {len(drawn)} rows for {len(rows)}; it must draw one "
                               "conversation per row, in order")
        return drawn

    def _tokenize(self, row: dict) -> TokenizedExample:
        if "messages" not in row:
            raise ValueError(f"a row without `messages` (it has {sorted(row)}); {NOT_CHAT_HINT}")
        loss_turn = row.get("loss_turn")
        return tokenize_example(self.tokenizer, row["messages"], None if loss_turn is None else int(loss_turn),
                                self.max_len)

    def set_epoch(self, epoch: int) -> None:
        if self.kind != "rft" or epoch == self.stats["epoch"]:
            return
        for i, conv in enumerate(self._conversations(self.rows, epoch)):
            try:
                self.examples[i] = self._tokenize(conv)
            except PromptTooLong:
                self.stats["kept_previous_draw"] += 1
            except ValueError as e:
                raise ValueError(f"{self.origins[i]} (epoch {epoch}): {e}") from e
        self.stats["epoch"] = epoch
        self.stats["truncated"] = sum(ex.truncated for ex in self.examples)

    def to_hf(self):
        """The current epoch's examples as a `datasets.Dataset` (what `SFTTrainer` accepts)."""
        import datasets

        return datasets.Dataset.from_dict({"input_ids": [ex.input_ids for ex in self.examples],
                                           "labels": [ex.labels for ex in self.examples]})

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        if not -len(self.examples) <= i < len(self.examples):
            raise IndexError(i)
        ex = self.examples[i]
        return {"input_ids": ex.input_ids, "labels": ex.labels}
