"""Decontamination: flag input tasks that are copies of (or the same program as) a task in a reference folder.

Each task gets a fingerprint: the shingles of its normalised source (`musacoder.data.textsim`) and, when its
reference traces on meta tensors, its structure signature (`musacoder.data.signature`). Against every reference task
it gets a text similarity t (Jaccard of the shingle sets once the boilerplate shingles, those found in more than 5 %
of the reference files, are set aside) and a structure similarity s (None when either side could not be traced),
combined as

    score = max(t, (s + t) / 2)   when s is known,   score = t   otherwise,

and the input is contaminated when its best score reaches `threshold` (0.6), or when s reaches `structure_threshold`
(0.95: the same aten program with the same size relations, however it is written) and t reaches
`structure_text_floor` (0 by default: a task that runs KernelBench's program is KernelBench's task, in another dtype
or layout too). docs/data.md gives the measured distributions these numbers were set from.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from collections import Counter

from pydantic import BaseModel

from musacoder.data.records import DecontamRow
from musacoder.data.signature import Signature, signature, structure_similarity, trace_ops
from musacoder.data.textsim import jaccard, source_shingles


class DecontamConfig(BaseModel):
    """Thresholds of the contamination rule (module docstring)."""

    threshold: float = 0.6
    structure_threshold: float = 0.95
    structure_text_floor: float = 0.0
    common_fraction: float = 0.05  # shingles in more than this share of the reference files are boilerplate
    trace: bool = True  # off: text similarity only (no task code is executed)


@dataclass(frozen=True)
class Fingerprint:
    file: str
    text: frozenset[int]
    structure: Signature | None


def is_task_source(source: str) -> bool:
    """Whether a file is a KernelBench-format problem: top-level `class Model`, `get_inputs`, `get_init_inputs`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    return {"Model", "get_inputs", "get_init_inputs"} <= names


def find_task_files(root: str | Path) -> list[Path]:
    """Task files under `root`, recursively (hidden folders and `__pycache__` skipped), sorted by path."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"task folder not found: {root}")
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).parts
        if any(part.startswith(".") or part == "__pycache__" for part in rel):
            continue
        try:
            if is_task_source(p.read_text(errors="replace")):
                out.append(p)
        except OSError:
            continue
    return out


def fingerprint(path: Path, label: str, trace: bool = True) -> Fingerprint:
    source = path.read_text(errors="replace")
    records = trace_ops(source) if trace else None
    return Fingerprint(label, source_shingles(source), signature(records) if records else None)


def combine(structure: float | None, text: float) -> float:
    """score = max(t, (s + t) / 2) when s is known, else t (module docstring)."""
    return text if structure is None else max(text, 0.5 * (structure + text))


def contaminated(structure: float | None, text: float, config: DecontamConfig) -> bool:
    if combine(structure, text) >= config.threshold:
        return True
    return structure is not None and structure >= config.structure_threshold and text >= config.structure_text_floor


def common_shingles(against: list[Fingerprint], fraction: float) -> frozenset[int]:
    """Shingles found in more than `fraction` of the reference files (at least 2): boilerplate every KernelBench
    file shares (`class n0(torch.nn.Module)`, `super().__init__()`, `def get_init_inputs(): return`), which would
    otherwise make any two one-op tasks look alike."""
    df = Counter(s for fp in against for s in fp.text)
    cut = max(2, fraction * len(against))
    return frozenset(s for s, n in df.items() if n > cut)


def text_similarity(a: frozenset[int], b: frozenset[int], common: frozenset[int] = frozenset()) -> float:
    """Jaccard index of the shingle sets without the common ones (of the full sets when that empties either)."""
    a2, b2 = a - common, b - common
    return jaccard(a2, b2) if a2 and b2 else jaccard(a, b)


def best_match(fp: Fingerprint, against: list[Fingerprint], config: DecontamConfig,
               common: frozenset[int] = frozenset()) -> DecontamRow:
    """The reference task closest to `fp` (highest combined score; a contaminated pair wins over a clean one)."""
    best: tuple | None = None
    for ref in against:
        t = text_similarity(fp.text, ref.text, common)
        s = structure_similarity(fp.structure, ref.structure) if fp.structure and ref.structure else None
        flagged = contaminated(s, t, config)
        key = (flagged, combine(s, t), s or 0.0)
        if best is None or key > best[0]:
            best = (key, ref.file, s, t)
    if best is None:
        return DecontamRow(file=fp.file, contaminated=False, match=None, score=0.0, traced=fp.structure is not None)
    (flagged, score, _), match, s, t = best
    return DecontamRow(file=fp.file, contaminated=flagged, match=match, score=round(score, 4),
                       structure=None if s is None else round(s, 4), text=round(t, 4),
                       traced=fp.structure is not None)


def fingerprints(root: str | Path, trace: bool = True, progress=None) -> list[Fingerprint]:
    """Fingerprints of every task file under `root`, labelled by their path relative to `root`."""
    root = Path(root)
    files = find_task_files(root)
    out = []
    for p in files:
        label = p.name if root.is_file() else str(p.relative_to(root))
        out.append(fingerprint(p, label, trace))
        if progress:
            progress()
    return out


def decontaminate(input_dir: str | Path, against_dir: str | Path, config: DecontamConfig | None = None,
                  progress: bool = False) -> list[DecontamRow]:
    """One row per task file under `input_dir`: is it a copy of a task under `against_dir`? (`match` is a path
    relative to `against_dir`, `file` one relative to `input_dir`.)"""
    config = config or DecontamConfig()
    n_in, n_ref = len(find_task_files(input_dir)), len(find_task_files(against_dir))
    with _bar(progress, n_in + n_ref) as tick:
        against = fingerprints(against_dir, config.trace, tick)
        inputs = fingerprints(input_dir, config.trace, tick)
    common = common_shingles(against, config.common_fraction)
    return [best_match(fp, against, config, common) for fp in inputs]


class _bar:
    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.p = Progress(TextColumn("fingerprints"), BarColumn(), MofNCompleteColumn())
        self.p.__enter__()
        t = self.p.add_task("", total=self.total)
        return lambda: self.p.update(t, advance=1)

    def __exit__(self, *exc):
        if self.enabled:
            self.p.__exit__(*exc)
