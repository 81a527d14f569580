"""Tasks in KernelBench format, their loaders and size overrides.

A problem file defines `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()` and module-level size constants
(`batch_size = 4096`). Size constants are overridden by rewriting their assignments in the module's AST before the
module runs, so constants derived from them follow and `get_inputs()` makes the smaller tensors.
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from musacoder import syntax
from musacoder.records import Task

_PROBLEM_FILE = re.compile(r"^(\d+)_.*\.py$")


class TaskError(ValueError):
    """A problem file or an override is unusable; the message says which and what to do."""


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
          ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _constant(node: ast.AST, known: dict[str, Any]) -> Any:
    """The value of a constant expression: literals, earlier constants by name, unary +/- and arithmetic on numbers
    (`M = 16384 * 4`, `dim = batch_size // 2`). Raises ValueError for anything else (calls, attributes, …)."""
    if isinstance(node, ast.Name):
        if node.id in known:
            return known[node.id]
        raise ValueError(node.id)
    if isinstance(node, ast.Tuple):
        return tuple(_constant(e, known) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _constant(node.operand, known)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
        raise ValueError("unary operand")
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        a, b = _constant(node.left, known), _constant(node.right, known)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            raise ValueError("operands")
        if isinstance(node.op, ast.Pow) and abs(b) > 64:
            raise ValueError("exponent")
        try:
            return _ARITH[type(node.op)](a, b)
        except ArithmeticError as e:
            raise ValueError(str(e)) from e
    return ast.literal_eval(node)


def size_constants(source: str) -> dict[str, Any]:
    """Module-level `NAME = <constant>` assignments (ints, floats, bools, strings, and tuples of them), including
    arithmetic on numbers and on earlier constants (`M = 16384 * 4`), evaluated to their values."""
    tree = syntax.parse(source)
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value_node = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value_node = node.target.id, node.value
        else:
            continue
        try:
            value = _constant(value_node, found)
        except (ValueError, SyntaxError, TypeError):
            found.pop(name, None)  # reassigned to something else: no longer a constant
            continue
        if isinstance(value, (int, float, bool, str, tuple)):
            found[name] = value
    return found


def parse_override(text: str) -> tuple[str, int | float | bool | str]:
    """`NAME=VALUE` → (name, value); VALUE is parsed as a Python literal, else kept as a string."""
    if "=" not in text:
        raise TaskError(f"bad override {text!r}: expected NAME=VALUE, e.g. --set batch_size=16")
    name, raw = text.split("=", 1)
    name, raw = name.strip(), raw.strip()
    if not name.isidentifier():
        raise TaskError(f"bad override {text!r}: {name!r} is not a Python identifier")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return name, value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, tuple):
        return "tuple"
    return type(value).__name__


def _fits(new: Any, old: Any) -> bool:
    """Whether an override value can stand where the task's constant stood: the same kind (an int where an int was,
    an int or a float where a float was, a tuple of elements that fit the old first element's kind where a tuple was)."""
    if isinstance(old, tuple):
        return isinstance(new, tuple) and (not old or all(_fits(a, old[0]) for a in new))
    if _kind(old) == "float":
        return _kind(new) in ("int", "float")
    return _kind(new) == _kind(old)


def check_overrides(source: str, overrides: dict[str, Any], where: str = "task") -> None:
    """Raise TaskError unless every override names a size constant of the task and has that constant's kind
    (`--set batch_size=abc` for `batch_size = 16` is refused here, before anything is built or run)."""
    known = size_constants(source)
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise TaskError(
            f"{where}: unknown size constant(s) {', '.join(unknown)}; this task defines: "
            f"{', '.join(sorted(known)) or '(none)'}"
        )
    for name, value in overrides.items():
        if not _fits(value, known[name]):
            raise TaskError(f"{where}: bad value for {name}: {value!r} is a {_kind(value)}, but {name} is "
                            f"{known[name]!r} in this task (a {_kind(known[name])}); give a value of that kind")


def apply_overrides(source: str, overrides: dict[str, Any], where: str = "task") -> str:
    """Rewrite the module-level assignments of the named constants; unknown names and values of the wrong kind
    are an error (`check_overrides`)."""
    if not overrides:
        return source
    check_overrides(source, overrides, where)
    tree = syntax.parse(source)
    for node in tree.body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        if target in overrides:
            node.value = ast.copy_location(syntax.parse(repr(overrides[target]), mode="eval").body, node.value)
    return ast.unparse(ast.fix_missing_locations(tree))


def check_task_source(source: str, where: str) -> None:
    try:
        tree = syntax.parse(source)
    except SyntaxError as e:
        raise TaskError(f"{where}: not valid Python (line {e.lineno}: {e.msg})") from e
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise TaskError(
            f"{where}: not a KernelBench-format problem, missing {', '.join(missing)} "
            "(expected class Model, get_inputs(), get_init_inputs())"
        )


def task_from_source(source: str, name: str, *, level: int | None = None, path: str | None = None,
                     overrides: dict[str, Any] | None = None) -> Task:
    where = path or name
    check_task_source(source, where)
    overrides = dict(overrides or {})
    apply_overrides(source, overrides, where)  # validates names now, not at run time
    m = re.match(r"^(\d+)_", name)
    return Task(name=name, level=level, problem_id=int(m.group(1)) if m else None, source=source, path=path,
                overrides=overrides)


def _level_of(path: Path) -> int | None:
    m = re.fullmatch(r"level(\d+)", path.parent.name)
    return int(m.group(1)) if m else None


def load_task(path: str | Path, overrides: dict[str, Any] | None = None) -> Task:
    """Load one problem file (`…/level1/19_ReLU.py` or any KernelBench-format file)."""
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"task file not found: {p}")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"task file cannot be read: {p} ({e})") from e
    return task_from_source(source, p.stem, level=_level_of(p), path=str(p), overrides=overrides)


def load_kernelbench_dir(root: str | Path, levels: list[int] | None = None, patterns: list[str] | None = None) -> list[Task]:
    """All problems of a directory in KernelBench layout (`ROOT/level1/19_ReLU.py`, …), sorted by level and id.

    `patterns` are shell globs on the task name (`19_*`) or on `levelN/name`.
    """
    root = Path(root)
    if not root.is_dir():
        raise TaskError(f"KernelBench directory not found: {root} (pass --kernelbench-dir or set KERNELBENCH_DIR)")
    level_dirs = sorted(d for d in root.iterdir() if d.is_dir() and re.fullmatch(r"level\d+", d.name))
    if not level_dirs:
        raise TaskError(f"{root}: no level1/, level2/ … folders; is this a KernelBench checkout (or its KernelBench/ subfolder)?")
    tasks = []
    for d in level_dirs:
        lvl = int(d.name[5:])
        if levels and lvl not in levels:
            continue
        for f in d.glob("*.py"):
            if not _PROBLEM_FILE.match(f.name):
                continue
            if patterns and not any(fnmatch.fnmatch(f.stem, pt) or fnmatch.fnmatch(f"{d.name}/{f.stem}", pt) for pt in patterns):
                continue
            tasks.append(load_task(f))
    return sorted(tasks, key=lambda t: (t.level or 0, t.problem_id or 0, t.name))


def load_hf_kernelbench(levels: list[int] | None = None, dataset: str = "ScalingIntelligence/KernelBench",
                        data_files: dict[str, str] | None = None, split_prefix: str = "level_") -> list[Task]:
    """Problems from the Hugging Face dataset (needs the `datasets` extra and network, or a local copy).

    Each split `level_N` has rows with `code`, `level`, `name`, `problem_id`. `dataset` may also be a local path
    or a loader name ("json", "parquet") together with `data_files`.
    """
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - depends on extras
        raise TaskError("loading KernelBench from Hugging Face needs `pip install musacoder[data]`") from e
    ds = datasets.load_dataset(dataset, data_files=data_files)
    tasks = []
    for split in sorted(ds.keys()):
        if not split.startswith(split_prefix):
            continue
        lvl = int(split[len(split_prefix):])
        if levels and lvl not in levels:
            continue
        for row in ds[split]:
            name = str(row["name"]).removesuffix(".py")
            tasks.append(task_from_source(row["code"], name, level=int(row.get("level", lvl))))
    return sorted(tasks, key=lambda t: (t.level or 0, t.problem_id or 0, t.name))


def load_module(task: Task, module_name: str = "musacoder_task") -> ModuleType:
    """Execute the task's source (with its overrides applied) as a fresh module. Trusted code only."""
    source = apply_overrides(task.source, task.overrides, task.path or task.name)
    module = ModuleType(module_name)
    module.__file__ = task.path or f"<task {task.name}>"
    code = compile(source, module.__file__, "exec")
    exec(code, module.__dict__)  # noqa: S102 - the task file is the trusted reference
    return module
