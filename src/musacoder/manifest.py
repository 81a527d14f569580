"""What a stage's output folder holds, so the next stage can take the folder as written.

Every training-path stage (`data`, `train sft`, `train rft`, `train rl`, `bench`) writes `musacoder.json` at the
top of its output folder: which stage made it, from what, and where its products are (paths relative to the
folder). The next stage reads it instead of guessing from file names:

    data  --(sft rows: files["sft"])-->  train sft/rft  --(model: files["model"])-->  train rl  --(model)-->  bench

`resolve_model` and `resolve_sft_data` turn a folder a user passes into what a loader needs, and say plainly what
to pass instead when a folder is not of the right kind.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MANIFEST_NAME = "musacoder.json"

StageKind = Literal["data", "sft", "rft", "rl", "bench"]


class Manifest(BaseModel):
    """The record in `<folder>/musacoder.json`."""

    model_config = ConfigDict(extra="forbid")

    stage: StageKind = Field(description="Which stage wrote the folder.")
    created: str = Field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                         description="UTC time the manifest was (re)written.")
    version: str = Field(default_factory=lambda: _version(), description="musacoder version that wrote it.")
    inputs: dict[str, str] = Field(default_factory=dict,
                                   description="What the stage read: role → path as given (e.g. model, data).")
    files: dict[str, str] = Field(
        default_factory=dict,
        description="Products, role → path relative to the folder. Roles the next stages read: 'model' (a "
        "Hugging Face model folder with its tokenizer, adapters merged), 'adapter' (a PEFT adapter, when "
        "trained with LoRA), 'sft' (a .jsonl of chat rows with `messages`), 'metrics' (metrics.jsonl), 'run' "
        "(a bench run directory).")
    info: dict[str, Any] = Field(default_factory=dict, description="Free-form facts (counts, base model, steps).")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("musacoder")
    except Exception:  # noqa: BLE001 - an uninstalled checkout
        return "0+unknown"


def write_manifest(folder: str | Path, manifest: Manifest) -> Path:
    """Write `manifest` to `<folder>/musacoder.json` atomically (a crash leaves the old one or the new one)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(folder: str | Path) -> Manifest | None:
    """The folder's manifest, or None when it has none; a malformed one is a ValueError naming the file."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        return Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a musacoder stage manifest ({exc}); remove it or re-run the stage "
                         "that wrote the folder") from exc


def product(folder: str | Path, role: str) -> Path | None:
    """Absolute path of the folder's product `role`, or None (no manifest, or no such product)."""
    m = read_manifest(folder)
    if m is None or role not in m.files:
        return None
    return (Path(folder) / m.files[role]).resolve()


def resolve_model(path: str | Path) -> Path:
    """A loadable Hugging Face model folder from what a user passes: a stage folder (its manifest's 'model'), or a
    model folder itself (has config.json). Anything else is a ValueError saying what to pass."""
    p = Path(path)
    found = product(p, "model")
    if found is not None:
        if not (found / "config.json").is_file():
            raise ValueError(f"{p / MANIFEST_NAME} names model {found}, which has no config.json; the stage did "
                             "not finish — re-run it, or pass a model folder")
        return found
    if (p / "config.json").is_file():
        return p
    m = read_manifest(p) if p.is_dir() else None
    what = f"a '{m.stage}' folder without a model" if m is not None else "neither a model folder nor a stage folder"
    raise ValueError(f"{p}: {what}; pass a Hugging Face model folder (with config.json) or the output folder of "
                     "`musacoder train sft|rft|rl`")


def resolve_sft_data(path: str | Path) -> list[Path]:
    """SFT row files from a stage folder (its manifest's 'sft'), or [path] for anything else (left to the
    loader, which names what it expected)."""
    p = Path(path)
    if p.is_dir():
        found = product(p, "sft")
        if found is not None:
            if not found.exists():
                raise ValueError(f"{p / MANIFEST_NAME} names SFT rows {found}, which do not exist; re-run the data "
                                 "stage")
            return [found]
    return [p]
