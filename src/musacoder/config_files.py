"""Run configurations read from files, shared by `train rl` and `train sft`: one reader for TOML, YAML and JSON with
dotted-key overrides, and the command-line half (`--set KEY=VALUE`, `--out-dir`, `--fresh`) that turns options into
those overrides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def read_config(path: str | Path) -> dict[str, Any]:
    """The mapping in a .toml, .yaml/.yml or .json file (YAML needs PyYAML)."""
    path = Path(path)
    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix == ".toml":
        import tomllib

        return tomllib.loads(text)
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as e:
            raise RuntimeError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or use TOML/JSON") from e
        return yaml.safe_load(text) or {}
    if suffix == ".json":
        return json.loads(text)
    raise ValueError(f"{path}: unknown config format {suffix!r}; use .toml, .yaml or .json")


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """`data` with each dotted key of `overrides` ("run.steps") set to its value, missing sections made."""
    for key, value in (overrides or {}).items():
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return data


def load_config(model: type[M], path: str | Path, overrides: dict[str, Any] | None = None) -> M:
    """Read `model` (a pydantic model) from .toml, .yaml/.yml or .json; `overrides` maps dotted keys to values."""
    return model.model_validate(apply_overrides(read_config(path), overrides))


def parse_set(items: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` options as overrides; a value is parsed as JSON where it can be (`10`, `true`, `[1, 2]`),
    else kept as a string."""
    import typer

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise typer.BadParameter(f"--set {item!r}: expected KEY=VALUE, e.g. run.steps=10")
        key, raw = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def cli_overrides(sets: list[str] | None, out_dir: Path | None, fresh: bool,
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides a training command's options make: its `--set` items, then `--out-dir` (run.out_dir), the
    command's own options (`options`: dotted key -> value, None where the option was not given) and `--fresh`
    (run.resume false)."""
    overrides = parse_set(sets or [])
    if out_dir is not None:
        overrides["run.out_dir"] = str(out_dir)
    overrides.update({key: value for key, value in (options or {}).items() if value is not None})
    if fresh:
        overrides["run.resume"] = False
    return overrides
