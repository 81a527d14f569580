"""Writing a data stage's rows as a Hugging Face dataset: `OUT/<name>/data.parquet` plus a generated dataset card
`OUT/<name>/README.md`, and the JSONL files long steps append to as they go (so a rerun resumes)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line, flushed and fsynced (an interruption loses at most the line being written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file; a torn last line is skipped, a missing file is empty."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def write_dataset(rows: list[dict[str, Any]], folder: Path, *, title: str, description: str,
                  columns: dict[str, str], made_by: str, count_by: str | None = None) -> Path:
    """Save `rows` as `folder/data.parquet` (a `datasets.Dataset`) and write its card `folder/README.md`.

    `columns` documents each column (name → meaning) in the card; `count_by` adds a histogram of that column.
    Returns the Parquet path. An empty `rows` writes an empty Parquet file with the documented columns.
    """
    try:
        import datasets
    except ImportError as e:
        raise ImportError("writing datasets needs the `datasets` package: pip install 'musacoder[data]'") from e

    folder.mkdir(parents=True, exist_ok=True)
    if rows:
        ds = datasets.Dataset.from_list(rows)
    else:
        ds = datasets.Dataset.from_dict({c: [] for c in columns})
    path = folder / "data.parquet"
    ds.to_parquet(str(path))
    folder.joinpath("README.md").write_text(dataset_card(title, description, columns, len(rows), made_by,
                                                         _histogram(rows, count_by) if count_by else None))
    return path


def _histogram(rows: Iterable[dict[str, Any]], column: str) -> dict[str, int]:
    return dict(sorted(Counter(str(r.get(column)) for r in rows).items()))


def dataset_card(title: str, description: str, columns: dict[str, str], n_rows: int, made_by: str,
                 histogram: dict[str, int] | None = None) -> str:
    """The README.md of a dataset folder: YAML header for the Hub, what it is, how it was made, its schema."""
    lines = ["---", "configs:", "- config_name: default", "  data_files: data.parquet", "---", "", f"# {title}", "",
             description.strip(), "", f"Rows: {n_rows}.", "", "Made by:", "", "```bash", made_by.strip(), "```", "",
             "## Columns", "", "| column | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {meaning} |" for name, meaning in columns.items()]
    if histogram:
        lines += ["", "## Counts", "", "| value | rows |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in histogram.items()]
    lines += ["", "Schema and loss conventions: musacoder `docs/data.md`, *Schema*.", ""]
    return "\n".join(lines)


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path) -> Path:
    """Write `rows` as JSON lines to `path`, atomically (a crash leaves the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
    tmp.replace(path)
    return path


def folder_relative(path: str | Path, folder: str | Path) -> str:
    """`path` relative to `folder` where it lies below it, else absolute: manifest paths are read relative to the
    folder, wherever the folder is moved to."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def write_data_manifest(out: Path, *, files: dict[str, str], inputs: dict[str, str] | None = None,
                        info: dict[str, Any] | None = None) -> Path:
    """`out/musacoder.json` of a data stage (`musacoder.manifest`): `files` maps roles ('sft': the chat or RFT rows
    `musacoder train sft` reads, 'run': the verified generation run, 'tasks': a task folder) to paths relative to
    `out`."""
    from musacoder.manifest import Manifest, write_manifest

    return write_manifest(out, Manifest(stage="data", files=files, inputs=dict(inputs or {}), info=dict(info or {})))
