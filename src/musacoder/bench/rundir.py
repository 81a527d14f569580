"""The run directory: the one place that reads and writes a benchmark run's files.

    RUN_DIR/config.json                 BenchConfig of the run (rewritten on resume)
    RUN_DIR/tasks.jsonl                 one line per task: key, name, level, group, path, overrides, sha256
    RUN_DIR/prompts/<key>.json          first-turn messages of the task (reused on resume)
    RUN_DIR/responses/<key>/<s>.txt     raw response of sample s, turn 1; `<s>.turn<k>.txt` for turn k ≥ 2
    RUN_DIR/generations.jsonl           one line per generation attempt: finish reason, token usage, error
    RUN_DIR/verdicts.jsonl              one line per verified response: task, sample, turn, MooreEval verdict
    RUN_DIR/summary.json, report.md, report.html   written by `musacoder report` (and at the end of a run)

`<key>` is `level<N>/<task-name>` or `<task-name>` for tasks without a level, so `responses/` is itself in the
`dir:` model layout and replays a run. Responses are written atomically (temp file + rename) and JSONL lines are
flushed and fsynced as they come, so an interrupted run loses at most the line being written; a torn last line is
skipped when read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from musacoder.models.pregenerated import response_filename


class RunDir:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    # paths
    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def tasks_path(self) -> Path:
        return self.root / "tasks.jsonl"

    @property
    def verdicts_path(self) -> Path:
        return self.root / "verdicts.jsonl"

    @property
    def generations_path(self) -> Path:
        return self.root / "generations.jsonl"

    def prompt_path(self, key: str) -> Path:
        return self.root / "prompts" / f"{key}.json"

    def response_path(self, key: str, sample: int, turn: int) -> Path:
        return self.root / "responses" / key / response_filename(sample, turn)

    # writing
    def _write_atomic(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    def _append(self, path: Path, record: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write_json(self, name: str, data: Any) -> Path:
        path = self.root / name
        self._write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.root / name
        self._write_atomic(path, text)
        return path

    def write_config(self, config: dict[str, Any]) -> None:
        self.write_json("config.json", config)

    def write_tasks(self, records: list[dict[str, Any]]) -> None:
        self._write_atomic(self.tasks_path, "".join(json.dumps(r) + "\n" for r in records))

    def write_prompt(self, key: str, messages: list[dict[str, str]]) -> None:
        self._write_atomic(self.prompt_path(key), json.dumps(messages, indent=1) + "\n")

    def write_response(self, key: str, sample: int, turn: int, text: str) -> None:
        self._write_atomic(self.response_path(key, sample, turn), text)

    def append_generation(self, record: dict[str, Any]) -> None:
        self._append(self.generations_path, record)

    def append_verdict(self, record: dict[str, Any]) -> None:
        self._append(self.verdicts_path, record)

    # reading
    def exists(self) -> bool:
        return self.config_path.is_file()

    def read_config(self) -> dict[str, Any] | None:
        return json.loads(self.config_path.read_text()) if self.config_path.is_file() else None

    def read_tasks(self) -> list[dict[str, Any]]:
        return _read_jsonl(self.tasks_path)

    def read_prompt(self, key: str) -> list[dict[str, str]] | None:
        p = self.prompt_path(key)
        return json.loads(p.read_text()) if p.is_file() else None

    def read_response(self, key: str, sample: int, turn: int) -> str | None:
        p = self.response_path(key, sample, turn)
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def read_verdicts(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        """(task key, sample, turn) → the verdict record (the last one wins)."""
        return {(r["task"], int(r["sample"]), int(r["turn"])): r for r in _read_jsonl(self.verdicts_path)
                if {"task", "sample", "turn", "verdict"} <= r.keys()}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line torn by an interruption
            continue
    return records
