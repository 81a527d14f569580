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


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config dump's sections as dotted keys: {"grpo": {"lr": 1e-6}} -> {"grpo.lr": 1e-6}. Only the top level is
    split: an option whose value is a dict or list (`env.overrides`, `model.lora`) compares as one value."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and not prefix:
            out.update(flatten(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def normalise_path(value: Any) -> Any:
    """An existing local path as an absolute one (so `runs/sft` and `/abs/runs/sft` compare equal), a list of them
    element by element; anything else as given."""
    if isinstance(value, list):
        return [normalise_path(v) for v in value]
    if isinstance(value, str) and value and Path(value).exists():
        return str(Path(value).resolve())
    return value


def settings_differences(recorded: dict[str, Any], current: dict[str, Any], free: frozenset[str],
                         path_keys: tuple[str, ...] = (), defaults: dict[str, Any] | None = None,
                         unused: dict[str, str] | None = None) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (recorded, current) for every key outside `free` on which two config dumps differ: what a run
    folder's recorded settings and a new start's must agree on before the start continues the folder's run (`train
    rl` and `train sft`). Every option not named free must match, so an option added later is guarded by default.

    Keys the recorded dump lacks (options added since it was written) count as their `defaults` value; `path_keys`
    compare as absolute paths; `unused` maps a key to the key whose being set makes it irrelevant (`model.tiny` is
    unused when `model.name_or_path` is set)."""
    old = {**flatten(defaults or {}), **flatten(recorded)}
    new = flatten(current)
    differ = {}
    for key in sorted(set(old) | set(new)):
        if key in free:
            continue
        if unused and key in unused and (new.get(unused[key]) or old.get(unused[key])):
            continue
        a, b = old.get(key), new.get(key)
        if key in path_keys:
            a, b = normalise_path(a), normalise_path(b)
        if a != b:
            differ[key] = (a, b)
    return differ
