"""docs/rl.md stays true to the code: its config reference lists every option with its default, and its metrics
tables name every key a step row carries."""

import json
import re
from pathlib import Path

import pytest

from musacoder.rl.config import RLConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "rl.md"


def _toml(x):
    if x is None:
        return "unset"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in x.items()) + " }" if x else "{}"
    if isinstance(x, list):
        return "[" + ", ".join(_toml(v) for v in x) + "]"
    return repr(x)


def documented_options() -> dict[str, str]:
    text = DOC.read_text()
    ref = text[text.index("## Config reference"):text.index("## Limits")]
    out, section = {}, None
    for line in ref.splitlines():
        m = re.match(r"### `\[(\w+)\]`", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"\| `(\w+)` \| `(.*?)` \|", line)
        if m and section:
            out[f"{section}.{m.group(1)}"] = m.group(2)
    return out


def test_config_reference_lists_every_option_with_its_default():
    cfg = RLConfig()
    expected = {}
    for name in RLConfig.model_fields:
        section = getattr(cfg, name)
        for key in type(section).model_fields:
            value = getattr(section, key)
            expected[f"{name}.{key}"] = _toml(value.model_dump() if hasattr(value, "model_dump") else value)
    assert documented_options() == expected


def test_metrics_tables_name_every_key_of_a_step_row(tmp_path):
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")
    from musacoder.rl.trainer import Trainer

    cfg = RLConfig.model_validate({
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 16, "heads": 2, "intermediate": 32}},
        "env": {"kind": "toy"}, "rollout": {"max_new_tokens": 3, "temperature": 1.0, "top_p": 1.0},
        "grpo": {"group_size": 4, "prompts_per_step": 2},
        "run": {"steps": 1, "out_dir": str(tmp_path / "run"), "threads": 1, "eval_every": 1},
    })
    trainer = Trainer(cfg)
    try:
        row = {"step": 1, **trainer.step(), **trainer.evaluate()}
    finally:
        trainer.close()
    text = DOC.read_text()
    metrics = text[text.index("## Watching a run"):text.index("## Config reference")]
    named = set(re.findall(r"`([\w/]+)`", metrics))
    missing = sorted(k for k in row if k not in named)
    assert not missing, f"docs/rl.md does not describe {missing}"
