"""Port a KernelBench tree (every `levelN/*.py` task file) or one candidate file to MUSA, with a report.

A file is "ported" when it was translated and nothing CUDA-specific was left unmapped; a file with unmapped names is
still written (so it can be inspected) but listed in the report as not ported, with the names.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from musacoder.port.python import translate_python
from musacoder.port.report import PortReport


@dataclass
class FileResult:
    path: str  # relative to the tree root, e.g. "level1/19_ReLU.py"
    changed: bool
    ported: bool
    report: PortReport
    error: str | None = None

    def as_dict(self) -> dict:
        return {"path": self.path, "changed": self.changed, "ported": self.ported, "error": self.error,
                **self.report.as_dict()}


@dataclass
class TreeResult:
    files: list[FileResult] = field(default_factory=list)

    @property
    def ported(self) -> list[FileResult]:
        return [f for f in self.files if f.ported]

    @property
    def not_ported(self) -> list[FileResult]:
        return [f for f in self.files if not f.ported]

    def summary(self) -> dict:
        total = PortReport()
        for f in self.files:
            total.merge(f.report)
        return {"files": len(self.files), "ported": len(self.ported), "changed": sum(f.changed for f in self.files),
                "not_ported": {f.path: f.error or sorted(f.report.unmapped) for f in self.not_ported},
                "mapped": dict(sorted(total.mapped.items())), "unmapped": sorted(total.unmapped),
                "kept": sorted(total.kept)}


def port_source(source: str, where: str = "<source>") -> tuple[str, PortReport]:
    """The MUSA version of a Python task or candidate file. Raises ValueError when the result does not parse."""
    try:
        ast.parse(source, filename=where)
    except SyntaxError as e:
        raise ValueError(f"{where}: not valid Python ({e.msg}, line {e.lineno}); nothing to port") from e
    out, report = translate_python(source)
    try:
        ast.parse(out, filename=where)
    except SyntaxError as e:  # a translator bug, never a silent pass
        raise ValueError(f"{where}: the ported file does not parse ({e.msg}, line {e.lineno})") from e
    return out, report


def port_file(path: Path, root: Path) -> tuple[str | None, FileResult]:
    rel = path.relative_to(root).as_posix()
    try:
        source = path.read_text()
        out, report = port_source(source, rel)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError) as e:
        return None, FileResult(rel, False, False, PortReport(), error=str(e))
    return out, FileResult(rel, out != source, report.complete, report)


def task_files(root: Path, levels: tuple[int, ...] = (1, 2, 3)) -> list[Path]:
    files = []
    for level in levels:
        files += sorted((root / f"level{level}").glob("*.py"), key=lambda p: (_problem_id(p), p.name))
    return files


def _problem_id(p: Path) -> int:
    head = p.name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**9


def port_tree(root: Path, out_dir: Path, levels: tuple[int, ...] = (1, 2, 3)) -> TreeResult:
    """Port every `ROOT/levelN/*.py` into the same tree under `out_dir`; writes `out_dir/port_report.json`."""
    root, out_dir = Path(root), Path(out_dir)
    if root.resolve() == out_dir.resolve():
        raise ValueError("--out must differ from the KernelBench directory (the originals would be overwritten)")
    result = TreeResult()
    for path in task_files(root, levels):
        out, fr = port_file(path, root)
        result.files.append(fr)
        if out is not None:
            dest = out_dir / fr.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "port_report.json").write_text(json.dumps(
        {"to": "musa", "source": str(root), **result.summary(), "per_file": [f.as_dict() for f in result.files]},
        indent=1, ensure_ascii=False))
    return result
