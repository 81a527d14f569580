"""Static legality: AST rules on the candidate before anything of it runs.

The rules reject what a kernel-writing answer never needs and a reward hacker always does: PyTorch compute in the
forward path, calling the reference, swallowing kernel failures, threads and side streams, patching torch/time/builtins,
introspection of the process, and native sources that spawn threads, touch files or call back into Python. The runtime
profiler (`musacoder.legality.runtime`) backs these rules up for everything an AST cannot see.

A rule rejects only what it can prove. Where the analysis (`musacoder.legality.resolve`) cannot tell what a call in the
forward path reaches (an extension handed through a parameter, an attribute set outside the class, a dict indexed by a
variable …), the call is listed in `StaticReport.deferred` and left to the runtime evidence: the build hook counts calls
of the candidate's own extension functions and Triton launches (no own kernel run → illegal), and the profiler requires
every outermost aten op to be on the whitelist.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field

from musacoder import syntax
from musacoder.legality import resolve as R
from musacoder.legality.policy import (
    ALLOWED_DUNDERS, ALLOWED_IMPORTS, ARRAY_EXITS, BUILTIN_CALLS, CODE_LOADING_ATTRS, DEVICE_CLOCK, DEVICE_CLOCK_ATTRS,
    FRAME_ATTRS, CPP_EXTENSION_ALLOWED, ESCAPE_MODULE_NAMES, FORBIDDEN_ATTRS,
    OS_ALLOWED, OPERATOR_ALLOWED, TYPING_ALLOWED, WARNINGS_ALLOWED, FORBIDDEN_BUILTINS, FORBIDDEN_MODULE_PREFIXES,
    NATIVE_FORBIDDEN, NATIVE_SOURCE_SUFFIXES, NUMPY_ALLOWED, OPERATOR_MATMUL, PYTHON_METHODS, TENSOR_COMPUTE_FALLBACK, TENSOR_PLUMBING, THREAD_STREAM_NAMES,
    TORCH_PLUMBING, TORCH_SUBMODULE_PLUMBING, VENDOR_PATTERNS,
)


@dataclass
class StaticReport:
    violations: list[str] = field(default_factory=list)
    kernel_defs: list[str] = field(default_factory=list)  # native kernels/functions the code defines
    kernel_calls: list[str] = field(default_factory=list)  # those the forward path calls
    # Calls in the forward path whose target the analysis could not resolve ("line N: callee(...)"). They are not
    # violations: the runtime checks (own-kernel launch count, aten-op whitelist) decide them.
    deferred: list[str] = field(default_factory=list)

    @property
    def legal(self) -> bool:
        return not self.violations


def _string_constants(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _native_sources(tree: ast.AST) -> str:
    """Every string literal that looks like C/C++/CUDA (the sources passed to load_inline)."""
    return "\n".join(s for s in _string_constants(tree)
                     if re.search(r"#\s*include|__global__|torch::|at::|\bvoid\b|\{", s))


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_KERNEL_NAME = re.compile(r"__global__\s+(?:[\w:]+\s+|\*\s*)*?(\w+)\s*\(")


_SCALAR_RETURN = re.compile(
    r"(?:^|[;{}\n])\s*(?:(?:static|inline|extern|constexpr)\s+)*(?:const\s+)?"
    r"(?:void|bool|char|short|int|long|long\s+long|unsigned(?:\s+(?:int|long|long\s+long))?|float|double|size_t|"
    r"u?int(?:8|16|32|64)_t|std::string|py::(?:int_|float_|bool_))\s*&?\s+(\w+)\s*\(")


def scalar_functions(native: str) -> frozenset[str]:
    """Names of the C++ functions declared to return a plain scalar, a string or nothing. What any other function
    of the candidate's extension returns is taken as a tensor by the operator rules (a type spelled another way,
    through an alias or `auto`, is a tensor to them too)."""
    return frozenset(_SCALAR_RETURN.findall(native))


def kernel_names(native: str) -> list[str]:
    """Names of the `__global__` functions in CUDA source, wherever `__launch_bounds__` and qualifiers stand."""
    return _KERNEL_NAME.findall(_LAUNCH_BOUNDS.sub(" ", native))


@functools.lru_cache(maxsize=None)
def _object_at(path: str):
    """The object at a dotted path rooted at an importable module, or None (no such module or attribute)."""
    import importlib

    try:
        obj = importlib.import_module(path.split(".")[0])
        for part in path.split(".")[1:]:
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - not importable here, or no such attribute
        return None
    return obj


def _torch_object(path: str):
    """The object at a dotted torch path, or None (also when torch cannot be imported)."""
    return _object_at(path) if path.split(".")[0] == "torch" else None


@functools.lru_cache(maxsize=None)
def _is_tensor_method(name: str) -> bool:
    """Whether `name` is a method of torch.Tensor (that is not plumbing); a fixed list stands in without torch."""
    if name in TENSOR_PLUMBING or name.startswith("_"):
        return False
    tensor = _torch_object("torch.Tensor")
    return hasattr(tensor, name) if tensor is not None else name in TENSOR_COMPUTE_FALLBACK


def _torch_call_allowed(path: str) -> bool:
    """Whether a call of the torch function at `path` is plumbing (allocation, views, metadata, building the
    extension) rather than compute."""
    parts = tuple(path.split(".")[1:])
    if len(parts) == 1 and parts[0] in TORCH_PLUMBING:
        return True
    if len(parts) == 2 and parts[0] == "Tensor" and parts[1] in TENSOR_PLUMBING:
        return True
    for prefix, names in TORCH_SUBMODULE_PLUMBING.items():
        if parts[:len(prefix)] == prefix and len(parts) == len(prefix) + 1 and parts[-1] in names:
            return True
    return bool(parts) and parts[0] == "nn" and parts[-1] == "Parameter"


def _is_torch_compute_function(path: str) -> bool:
    """Whether a torch path names a function (not a dtype, constant, class or module) outside the plumbing whitelist."""
    if _torch_call_allowed(path):
        return False
    obj = _torch_object(path)
    return obj is not None and callable(obj) and not isinstance(obj, type)


# ---------------------------------------------------------------------------------------------------------------------
# Rule sections. Each returns the violations it finds, in source order.

def _check_modelnew(an: R.Resolver) -> list[str]:
    """ModelNew must subclass torch.nn.Module directly (not the reference `Model` or anything else)."""
    v = []
    for base in an.modelnew.bases:
        b = an.resolve(base) or ""
        if b not in ("torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module", "Module"):
            v.append(f"line {base.lineno}: ModelNew must subclass torch.nn.Module directly, not {ast.unparse(base)}")
    return v


def _check_imports(tree: ast.Module) -> list[str]:
    """Only the allowed modules may be imported, none of their introspection/fallback sub-packages, nothing relative."""
    v = []
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            if node.level:
                v.append(f"line {node.lineno}: relative imports are not allowed")
        for m in mods:
            root = m.split(".")[0]
            if root not in ALLOWED_IMPORTS:
                v.append(f"line {node.lineno}: import of {m!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})")
            elif m.startswith(FORBIDDEN_MODULE_PREFIXES) or any(m == p.rstrip(".") for p in FORBIDDEN_MODULE_PREFIXES):
                v.append(f"line {node.lineno}: import of {m!r} is not allowed (introspection/fallback module)")
            elif m.split(".")[-1] in ESCAPE_MODULE_NAMES:
                v.append(f"line {node.lineno}: import of {m!r} reaches the {m.split('.')[-1]!r} module; not allowed")
            elif why := reach_violation(m):
                v.append(f"line {node.lineno}: import of {m!r}: {why}")
    return v


def _module_allowed(name: str) -> bool:
    return (name.split(".")[0] in ALLOWED_IMPORTS or name in ("posixpath", "ntpath")) and not (
        name.startswith(FORBIDDEN_MODULE_PREFIXES) or any(name == p.rstrip(".") for p in FORBIDDEN_MODULE_PREFIXES))


@functools.lru_cache(maxsize=4096)
def reach_violation(dotted: str) -> str | None:
    """Why the path `dotted` (rooted at an allowed module) reaches what a candidate may not use, or None: a private
    name (`_…`), an `os` or `cpp_extension` name off their allow-lists, or a module that is not itself allowed,
    found by walking the real objects (`torch.sys`, `os.path.genericpath`, `torch.nn.functional.torch.overrides`)."""
    import importlib
    import types

    parts = dotted.split(".")
    if parts[0] not in ALLOWED_IMPORTS:
        return None
    for i, p in enumerate(parts[1:], 1):
        if p.startswith("_") and not (p.startswith("__") and p.endswith("__")):
            return f"{'.'.join(parts[:i + 1])} is private API of an allowed module"
    if parts[0] == "os" and len(parts) > 1 and parts[1] not in OS_ALLOWED:
        return f"os.{parts[1]} is not allowed (of os only {', '.join(sorted(OS_ALLOWED))})"
    if parts[0] in ("typing", "typing_extensions") and len(parts) > 1 and parts[1] not in TYPING_ALLOWED:
        return (f"{parts[0]}.{parts[1]} is not allowed (of {parts[0]} only the names annotations use: its other "
                "functions evaluate strings)")
    if parts[0] == "operator" and len(parts) > 1 and parts[1] not in OPERATOR_ALLOWED:
        return (f"operator.{parts[1]} is not allowed (of operator only {', '.join(sorted(OPERATOR_ALLOWED))}: its "
                "arithmetic is PyTorch compute on tensors)")
    if parts[0] == "numpy" and len(parts) > 1 and parts[1] not in NUMPY_ALLOWED:
        return (f"numpy.{parts[1]} is not allowed (of numpy only prod, on a tensor's sizes: NumPy on data is "
                "compute outside your kernels)")
    if parts[0] == "warnings" and len(parts) > 1 and parts[1] not in WARNINGS_ALLOWED:
        return f"warnings.{parts[1]} is not allowed (of warnings only warn: caught warnings read the caller's stack)"
    if parts[:3] == ["torch", "utils", "cpp_extension"] and len(parts) > 3 and parts[3] not in CPP_EXTENSION_ALLOWED:
        return (f"torch.utils.cpp_extension.{parts[3]} is not allowed (build with load_inline or load, which the "
                "verifier hooks)")
    try:
        obj = importlib.import_module(parts[0])
    except Exception:  # noqa: BLE001 - not installed here (triton, torch_musa): the name rules above still apply
        return None
    for i, p in enumerate(parts[1:], 1):
        if not isinstance(obj, (types.ModuleType, type)):
            break
        try:
            obj = getattr(obj, p)
        except Exception:  # noqa: BLE001 - no such attribute: the candidate fails at run time
            break
        if isinstance(obj, types.ModuleType) and not _module_allowed(obj.__name__):
            return (f"{'.'.join(parts[:i + 1])} is the module {obj.__name__!r}, which an allowed module imports; "
                    "a candidate may not use it")
    return None


def _attribute_violations(node: ast.Attribute, an: R.Resolver) -> list[str]:
    """Dunder access, forbidden torch/os attributes, modules reached through allowed ones, private API, global-state
    setters, threads, streams, events and graphs."""
    v = []
    if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
        v.append(f"line {node.lineno}: dunder attribute access {node.attr!r} is not allowed")
    if node.attr in ARRAY_EXITS:
        v.append(f"line {node.lineno}: .{node.attr} moves tensor data to NumPy or Python, where the computation is "
                 "neither your kernel nor visible to the verifier; not allowed")
    if node.attr in ESCAPE_MODULE_NAMES:
        v.append(f"line {node.lineno}: .{node.attr} reaches the {node.attr!r} module through another object; "
                 "a candidate may not use it")
    r = an.resolve(node) or ""
    head = r.split(".")[0]
    if node.attr not in ESCAPE_MODULE_NAMES and (why := reach_violation(r)):
        v.append(f"line {node.lineno}: {why}")
    if head in FORBIDDEN_ATTRS:
        rest = r[len(head) + 1:]
        for bad in FORBIDDEN_ATTRS[head]:
            if rest == bad or rest.startswith(bad + "."):
                v.append(f"line {node.lineno}: {r} is not allowed in a candidate")
                break
    last = r.rsplit(".", 1)[-1]
    if head == "torch" and (last.startswith("set_") and last != "set_device" or "memory" in r.split(".")[1:-1]
                            or last.startswith("reset_")
                            or last in ("empty_cache", "caching_allocator_alloc", "manual_seed_all")):
        v.append(f"line {node.lineno}: {r} changes global PyTorch state (threads, precision, memory); not allowed")
    if node.attr in THREAD_STREAM_NAMES and head in ("torch", "threading", "concurrent", "multiprocessing"):
        v.append(f"line {node.lineno}: threads, streams, events and graphs ({r}) are not allowed")
    if node.attr in ("record_stream", "CUDAGraph", "make_graphed_callables"):
        v.append(f"line {node.lineno}: {node.attr} is not allowed")
    return v


def _assignment_violations(node: ast.AST, an: R.Resolver) -> list[str]:
    """Monkey-patching: assigning to an attribute of an imported module, or rebinding an imported name."""
    v = []
    targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
    for t in targets:
        for sub in ast.walk(t):
            if isinstance(sub, ast.Attribute):
                root = sub
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in an.aliases and root.id != "self":
                    v.append(f"line {node.lineno}: assigning to {ast.unparse(sub)} patches an imported "
                             "module (monkey-patching is not allowed)")
                    break
            if isinstance(sub, ast.Name) and sub.id in an.aliases and isinstance(node, ast.Assign) \
                    and node.lineno > 0 and sub is t:
                v.append(f"line {node.lineno}: rebinding imported name {sub.id!r} is not allowed")
    if v:
        return v
    for t in targets:  # only attributes of self: `T = torch.Tensor; T.detach = f` patched what the harness calls
        for sub in ast.walk(t):
            if isinstance(sub, ast.Attribute) and not isinstance(sub.ctx, ast.Load) \
                    and not (isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                return [f"line {node.lineno}: assigning to {ast.unparse(sub)} sets an attribute of something other "
                        "than self (monkey-patching is not allowed: only self.<name> may be set, since patching a "
                        "class or module changes what the harness runs)"]
    return v


def _scoped(tree: ast.Module, an: R.Resolver):
    """Every node of the file with the scope its names resolve in (the module's, a method's, a function's)."""
    todo = [(tree, an.module_scope)]
    while todo:
        node, scope = todo.pop()
        yield node, scope
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if isinstance(node, ast.ClassDef) and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    inner = an.method_scope(node, child)
                elif scope.fn is None:
                    inner = R.Scope(child, None, None, scope)
                else:
                    inner = R.Scope(child, scope.cls, scope.self_name, scope)
            todo.append((child, inner))


@functools.lru_cache(maxsize=1024)
def _names_module(path: str) -> bool:
    """Whether the dotted path (rooted at an allowed module) is a module object."""
    import types

    return isinstance(_object_at(path), types.ModuleType)


def _followed_path(node: ast.Attribute, an: R.Resolver, scope) -> str:
    """The dotted path an attribute reaches from an allowed module through names bound by assignment (`e = enum;
    e.bltns` is enum.bltns), or "" where the value cannot be followed to one."""
    try:
        val = an.value(node, scope)
    except RecursionError:
        return ""
    return val.path if val.kind in (R.TORCH, R.LIBRARY) and isinstance(val.path, str) else ""


_MODULE_DUNDERS = {"__name__", "__file__", "__doc__", "__spec__", "__package__", "__annotations__"}


def _check_names(tree: ast.Module) -> list[str]:
    """Every name the code reads must be one it binds (assigns, imports, defines, takes as a parameter) or a builtin.
    Any other could only come from whoever fills the module's globals at run time (Triton's interpreter copies its
    own, `np` and `inspect` among them, into a kernel's module on its first launch)."""
    import builtins

    bound = set(dir(builtins)) | _MODULE_DUNDERS
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif type(node).__name__ in ("TypeVar", "ParamSpec", "TypeVarTuple"):  # `def f[T](x: T)`, Python 3.12+
            bound.add(node.name)
    return [f"line {n.lineno}: the name {n.id!r} is never defined or imported in the file (only a value put into the "
            "module's globals at run time could answer it)"
            for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound]


def _check_triton_bodies(tree: ast.Module, an: R.Resolver) -> list[str]:
    """A `@triton.jit` body is device code: on a GPU Triton compiles it, but its interpreter (`TRITON_INTERPRET=1`, the
    triton backend on a CPU) runs it as Python, where it could call PyTorch on tensors passed as `tl.constexpr`. It may
    reach only Triton and `math`."""
    v = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name in an.triton_kernels):
        inner = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
        for node in ast.walk(fn):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and id(node) not in inner:
                path = an.resolve(node) or ""
                root = path.split(".")[0]
                if root in ALLOWED_IMPORTS and root not in ("triton", "math"):
                    v.append(f"line {node.lineno}: the Triton kernel {fn.name} uses {path}; a kernel's body may use "
                             "only triton.language, math and its own names")
    return list(dict.fromkeys(v))


def _check_escape_hatches(tree: ast.Module, an: R.Resolver, writes: "SourceWrites | None" = None) -> list[str]:
    """Whole-file rules: introspection, patching, escape hatches, threads/streams, dispatch overrides, Tensor
    subclasses, broad excepts and any use of the reference `Model`. `open` is allowed only in the source writes
    `writes` found."""
    v = []
    opens = writes.opens if writes else set()
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for node, scope in _scoped(tree, an):
        path = (an.resolve(node) or "") if isinstance(node, (ast.Name, ast.Attribute)) else ""
        imported = path.split(".")[0] in ALLOWED_IMPORTS  # rooted at an import: the name rules judge it
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            parent = parents.get(id(node))
            if imported and not (isinstance(parent, ast.Attribute) and parent.value is node) \
                    and _names_module(path):  # a module handed on as a value: past every rule keyed on its name
                v.append(f"line {node.lineno}: the module {path} is used as a value ({ast.unparse(parent or node)[:50]}); "
                         "use modules only by their attributes")
            if not (isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call) and parent.func is node)):
                val = an.value(node, scope)  # a PyTorch compute function kept as a value: a fallback in waiting
                if val.kind == R.TORCH and _is_torch_compute_function(val.path):
                    v.append(f"line {node.lineno}: {val.path} is a PyTorch compute op kept as a value; only your own "
                             "kernels may compute")
        if isinstance(node, ast.Attribute) and node.attr not in ESCAPE_MODULE_NAMES and not imported:
            if (reached := _followed_path(node, an, scope)) and (why := reach_violation(reached)):
                v.append(f"line {node.lineno}: {why} (reached as {ast.unparse(node)})")
        if isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRS:
            v.append(f"line {node.lineno}: .{node.attr} reaches interpreter frames or code objects; not allowed")
        if isinstance(node, ast.Attribute) and node.attr in CODE_LOADING_ATTRS:
            v.append(f"line {node.lineno}: .{node.attr} loads GPU code at run time, past every rule that reads a "
                     "kernel; launch @triton.jit kernels or your extension's functions")
        clock = None
        if isinstance(node, ast.Attribute) and node.attr in DEVICE_CLOCK_ATTRS:
            clock = f".{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := DEVICE_CLOCK.search(node.value)):
            clock = repr(m.group(0))
        if clock:
            v.append(f"line {node.lineno}: {clock} reads the GPU's clock (a kernel that times itself can tell the "
                     "rounds the profiler watches from the timed ones); not allowed")
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS and id(node) not in opens:
            v.append(f"line {node.lineno}: use of {node.id!r} is not allowed" + (SourceWrites.HOW if node.id == "open"
                                                                                  else ""))
        elif isinstance(node, ast.Attribute):
            v += _attribute_violations(node, an)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            v += _assignment_violations(node, an)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("__") \
                and node.name.endswith("__") and node.name != "__init__":
            v.append(f"line {node.lineno}: defining {node.name} is not allowed (dispatch and operator overrides "
                     "can fake results)")
        elif isinstance(node, ast.ClassDef) and node is not an.modelnew:
            for base in node.bases:
                if (an.resolve(base) or "").split(".")[-1] in ("Tensor",):
                    v.append(f"line {node.lineno}: subclassing torch.Tensor is not allowed (outputs must be plain tensors)")
        elif isinstance(node, ast.Try):
            for h in node.handlers:
                broad = h.type is None or (an.resolve(h.type) or "") in ("Exception", "BaseException", "RuntimeError")
                if isinstance(h.type, ast.Tuple):
                    broad = any((an.resolve(e) or "") in ("Exception", "BaseException", "RuntimeError") for e in h.type.elts)
                if broad:
                    v.append(f"line {h.lineno}: broad try/except ({ast.unparse(h.type) if h.type else 'bare except'}) "
                             "can hide a failing kernel behind a fallback; let errors propagate")
        if isinstance(node, ast.Name) and node.id == "Model" and not isinstance(node.ctx, ast.Store):
            v.append(f"line {node.lineno}: ModelNew may not use the reference Model")
    return v


class _Element(ast.expr):
    """A synthetic node: one element of `of` (a loop's or an unpacking's target)."""

    _fields = ()

    def __init__(self, of: ast.AST):
        super().__init__()
        self.of = of


class _Tensors:
    """Which expressions of one forward-path function are tensors for certain: forward's own inputs, what torch's
    allocation and view plumbing returns, what the candidate's extension functions return (save those whose C++
    declares a plain scalar or `void`), views and slices of those, and names bound to them. Python operators on
    such a tensor (`x * (x > 0)`, `out += b`) are PyTorch compute through operator overloading. Anything not known to be a tensor (sizes, `self` attributes, helper parameters) is left alone."""

    _SCALAR_METHODS = {"size", "numel", "nelement", "dim", "ndimension", "item", "stride", "element_size", "data_ptr",
                       "storage_offset", "get_device", "is_contiguous", "is_floating_point", "tolist", "type"}
    _SCALAR_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "layout", "requires_grad"}

    def __init__(self, an: R.Resolver, fn: ast.AST, scope: R.Scope, is_forward: bool,
                 scalar_kernels: frozenset[str] = frozenset(), tensor_params: frozenset[str] = frozenset()):
        self.an, self.scope, self.scalar_kernels = an, scope, scalar_kernels
        args = fn.args.posonlyargs + fn.args.args if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        self.inputs = {a.arg for a in args[1:]} | ({fn.args.vararg.arg} if getattr(fn.args, "vararg", None) else set()) \
            if is_forward else set()
        self.inputs |= tensor_params  # a helper's parameters that a forward-path call passes tensors to
        self.bound: dict[str, list[ast.AST]] = {}
        self.self_attrs: dict[str, list[ast.AST]] = {}  # `self.y = <tensor>` in this function
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    self._bind(t, node.value)
            elif isinstance(node, ast.NamedExpr):
                self.bound.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._bind(node.target, _Element(node.iter))  # what iterating a tensor or a tuple of them yields
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, item.context_expr)
        self._active: set[int] = set()

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bound.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            self.self_attrs.setdefault(target.attr, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = zip(target.elts, value.elts) if isinstance(value, (ast.Tuple, ast.List)) and \
                len(value.elts) == len(target.elts) else ((t, _Element(value)) for t in target.elts)
            for t, v in pairs:
                self._bind(t.value if isinstance(t, ast.Starred) else t, v)

    def is_tensor(self, e: ast.AST) -> bool:
        if id(e) in self._active:
            return False
        self._active.add(id(e))
        try:
            return self._is_tensor(e)
        finally:
            self._active.discard(id(e))

    def _is_tensor(self, e: ast.AST) -> bool:
        if isinstance(e, _Element):  # an element of a tuple/list literal, of a tensor, or of what a kernel returned
            it = e.of
            if isinstance(it, (ast.Tuple, ast.List, ast.Set)):
                return any(self.is_tensor(x.value if isinstance(x, ast.Starred) else x) for x in it.elts)
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("zip", "enumerate"):
                return False  # tuples of them: judged where an element is taken out (a subscript) - not followed
            return self.is_tensor(it)
        if isinstance(e, (ast.Tuple, ast.List)) and any(isinstance(x, ast.Starred) for x in e.elts):
            return False
        if isinstance(e, ast.Name):  # an input rebound (`x = x.contiguous()`) is still one
            return e.id in self.inputs or any(self.is_tensor(v) for v in self.bound.get(e.id, ()))
        if isinstance(e, ast.Subscript):
            return self.is_tensor(e.value)
        if isinstance(e, ast.Attribute):
            if e.attr in ("T", "mT", "H", "data", "real", "imag"):
                return self.is_tensor(e.value)
            if e.attr in self._SCALAR_ATTRS:
                return False
            if isinstance(e.value, ast.Name) and e.value.id == "self" and e.attr in self.self_attrs:
                return any(self.is_tensor(v) for v in self.self_attrs[e.attr])
            return self.an.value(e, self.scope).kind == R.SUBMODULE_MEMBER and e.attr in ("weight", "bias")
        if isinstance(e, (ast.BinOp, ast.UnaryOp)):
            return any(self.is_tensor(x) for x in ([e.left, e.right] if isinstance(e, ast.BinOp) else [e.operand]))
        if isinstance(e, ast.Call):
            if self._builtin_on_tensor(e):
                return True
            fv = self.an.value(e.func, self.scope)
            if fv.kind == R.KERNEL and not fv.path.endswith("[grid]"):  # an extension function's result: a tensor
                return fv.path.split(".")[-1] not in self.scalar_kernels  # unless its C++ returns a plain scalar
            if fv.kind == R.TORCH:
                return fv.path.split(".")[-1] in TORCH_PLUMBING and _torch_call_allowed(fv.path)
            if isinstance(e.func, ast.Attribute) and e.func.attr not in self._SCALAR_METHODS \
                    and e.func.attr in TENSOR_PLUMBING:
                return self.is_tensor(e.func.value)
        return False

    _MATH_BUILTINS = {"abs", "round", "pow", "sum", "min", "max", "divmod"}

    def _builtin_on_tensor(self, e: ast.Call) -> bool:
        return isinstance(e.func, ast.Name) and e.func.id in self._MATH_BUILTINS and \
            any(self.is_tensor(a) for a in e.args)

    def arithmetic(self, node: ast.AST) -> str | None:
        """The tensor operand of a Python operator (or of `abs`, `sum`, `max` … , which run one) at `node`, or None."""
        if isinstance(node, ast.Call) and self._builtin_on_tensor(node):
            return next(ast.unparse(a)[:40] for a in node.args if self.is_tensor(a))
        if isinstance(node, ast.BinOp):
            operands = [node.left, node.right]
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            operands = [node.operand]
        elif isinstance(node, ast.Compare) and not any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                        for o in node.ops):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.AugAssign):
            operands = [node.target, node.value]
        else:
            return None
        return next((ast.unparse(o)[:40] for o in operands if self.is_tensor(o)), None)


def _param_names(fn: ast.AST) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ("self", "cls")]


def _tensor_params(fn: ast.AST, call: ast.Call, tensors: "_Tensors | None") -> frozenset[str]:
    """The parameters of `fn` that `call` passes a tensor to (positionally, by keyword or unpacked)."""
    if tensors is None or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return frozenset()
    a = fn.args
    positional = [x.arg for x in a.posonlyargs + a.args]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    out = set()
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            if tensors.is_tensor(_Element(arg.value)):
                out.update(positional[i:] + ([a.vararg.arg] if a.vararg else []))
            break
        if tensors.is_tensor(arg):
            out.add(positional[i] if i < len(positional) else a.vararg.arg if a.vararg else "")
    for kw in call.keywords:
        if kw.arg is None or tensors.is_tensor(kw.value):
            if kw.arg is None:
                out.update(_param_names(fn))
            else:
                out.add(kw.arg if kw.arg in _param_names(fn) else (a.kwarg.arg if a.kwarg else ""))
    out.discard("")
    return frozenset(out)


# Arithmetic on a tensor's sizes, which is Python on integers, not PyTorch compute: `math.prod(x.shape)`,
# `numpy.prod(x.size())`, `torch.prod(torch.tensor(x.shape))` (a tensor built from sizes: a handful of integers).
SHAPE_TORCH_CALLS = {"torch.tensor", "torch.as_tensor", "torch.Size"}  # build a small tensor from sizes
SHAPE_COUNTS = {"torch.prod", "torch.numel"}  # legal only over such a tensor
LIBRARY_PRODUCTS = {"math.prod", "numpy.prod", "functools.reduce"}  # legal only over sizes
_SIZE_METHODS = {"size", "numel", "nelement", "dim", "ndimension", "stride", "element_size"}


def _is_shape(e: ast.AST, tensors: "_Tensors | None", depth: int = 0) -> bool:
    """Whether `e` is for certain a tensor's sizes or plain integers: `x.shape`, `x.size()`, `x.size(1)`,
    `x.numel()`, slices and items of those, int literals, tuples and lists of them, names bound only to them."""
    if depth > 8:
        return False
    if isinstance(e, ast.Constant):
        return isinstance(e.value, int) and not isinstance(e.value, bool)
    if isinstance(e, ast.Attribute):  # of a tensor: not an attribute the candidate set on itself (`self.shape`)
        return e.attr in ("shape", "ndim") and not (isinstance(e.value, ast.Name) and e.value.id == "self")
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if isinstance(e.func.value, ast.Name) and e.func.value.id == "self":
            return False
        return e.func.attr in _SIZE_METHODS and all(isinstance(a, ast.Constant) or _is_shape(a, tensors, depth + 1)
                                                     for a in e.args)
    if isinstance(e, ast.Subscript):
        return _is_shape(e.value, tensors, depth + 1)
    if isinstance(e, (ast.Tuple, ast.List)):
        return all(_is_shape(x, tensors, depth + 1) for x in e.elts)
    if isinstance(e, ast.Starred):
        return _is_shape(e.value, tensors, depth + 1)
    if isinstance(e, ast.BinOp) and not isinstance(e.op, ast.MatMult):
        return _is_shape(e.left, tensors, depth + 1) and _is_shape(e.right, tensors, depth + 1)
    if isinstance(e, ast.Name) and tensors is not None and e.id not in tensors.inputs:
        bound = tensors.bound.get(e.id, [])
        return bool(bound) and all(_is_shape(b, tensors, depth + 1) for b in bound)
    return False


def _is_shape_tensor(e: ast.AST, tensors: "_Tensors | None") -> bool:
    """`torch.tensor(<sizes>)` (or `as_tensor`, `Size`): a tensor holding only a tensor's sizes."""
    if isinstance(e, ast.Name) and tensors is not None and e.id not in tensors.inputs:
        bound = tensors.bound.get(e.id, [])
        return bool(bound) and all(_is_shape_tensor(b, tensors) for b in bound)
    if not (isinstance(e, ast.Call) and e.args):
        return False
    return (tensors.an.resolve(e.func) or "") in SHAPE_TORCH_CALLS and _is_shape(e.args[0], tensors) \
        if tensors is not None else False


def _shape_arithmetic(node: ast.AST, tensors: "_Tensors") -> bool:
    """An operator whose operands are all sizes (`x.shape[0] * x.shape[1]`), whatever the tensor rules guessed."""
    if isinstance(node, ast.BinOp):
        return _is_shape(node.left, tensors) and _is_shape(node.right, tensors)
    return False


class _DeviceGuards:
    """Branches of `forward` that cannot run for the task's inputs. With the cuda backend the verifier gives every
    input on the GPU, so the body of `if not x.is_cuda:` (or `x.device.type != "cuda"`, `x.is_cpu`, such a test
    joined by `and` to anything, or by `or` to other such tests) is dead, as is the `else` of `if x.is_cuda:`. Only a
    test on a parameter of forward that forward never rebinds counts; for any other backend nothing is pruned."""

    def __init__(self, fn: ast.AST, backend: str):
        self.active = backend == "cuda"
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        rebound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        self.inputs = {a.arg for a in args[1:]} - rebound
        self.pruned: list[int] = []

    def _input(self, e: ast.AST) -> bool:
        return isinstance(e, ast.Name) and e.id in self.inputs

    def _on_gpu(self, e: ast.AST) -> bool | None:
        """True/False when `e` is a device test of an input whose value the verifier fixes, else None."""
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            inner = self._on_gpu(e.operand)
            return None if inner is None else not inner
        if isinstance(e, ast.Attribute) and self._input(e.value) and e.attr in ("is_cuda", "is_cpu"):
            return e.attr == "is_cuda"
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Eq, ast.NotEq)) \
                and isinstance(e.left, ast.Attribute) and e.left.attr == "type" \
                and isinstance(e.left.value, ast.Attribute) and e.left.value.attr == "device" \
                and self._input(e.left.value.value) and isinstance(e.comparators[0], ast.Constant) \
                and e.comparators[0].value in ("cuda", "cpu"):
            is_cuda = e.comparators[0].value == "cuda"
            return is_cuda if isinstance(e.ops[0], ast.Eq) else not is_cuda
        return None

    def value(self, e: ast.AST) -> bool | None:
        """The test's value for the verifier's inputs, where it is provable: True, False, or None (unknown)."""
        if isinstance(e, ast.BoolOp):
            vals = [self.value(x) for x in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else True if all(v is True for v in vals) else None
            return True if True in vals else False if all(v is False for v in vals) else None
        return self._on_gpu(e)

    def walk(self, stmt: ast.AST):
        """`ast.walk` that does not enter a branch the test proves dead."""
        todo = [stmt]
        while todo:
            node = todo.pop()
            yield node
            children = list(ast.iter_child_nodes(node))
            if self.active and isinstance(node, (ast.If, ast.IfExp)):
                known = self.value(node.test)
                dead = node.body if known is False else node.orelse if known is True else None
                if dead is not None:
                    dead = dead if isinstance(dead, list) else [dead]
                    self.pruned.append(node.lineno)
                    children = [c for c in children if not any(c is d for d in dead)]
            todo.extend(children)


class _ForwardPath:
    """ModelNew.forward and everything it reaches that the analysis can resolve: methods, module functions, lambdas,
    partials and the `forward` of the file's own modules. Checks every call there, collecting violations, the own
    kernels called and the calls it could not resolve."""

    def __init__(self, an: R.Resolver, rep: StaticReport, native: str, backend: str = "cpu",
                 writes: "SourceWrites | None" = None):
        self.an, self.rep, self.backend = an, rep, backend
        self.writes = writes.calls if writes else set()
        self.scalar_kernels = scalar_functions(native)
        self.violations: list[str] = []
        self.functions: list[ast.AST] = []
        self._seen: set[int] = set()
        self._todo: list[tuple[ast.AST, R.Scope]] = []
        self._tensor_params: dict[int, frozenset[str]] = {}  # per function: parameters passed tensors
        self._params: set[str] = set()  # of the function being checked
        self._tuple_types = {t.id for node in an.tree.body if isinstance(node, ast.Assign)
                             and isinstance(node.value, ast.Call)
                             and (R.dotted(node.value.func) or "").split(".")[-1] in ("namedtuple", "NamedTuple")
                             for t in node.targets if isinstance(t, ast.Name)}

    def run(self) -> list[str]:
        an = self.an
        forward = self.forward = an.methods(an.modelnew).get("forward")
        if forward is not None:
            self._follow(forward, an.method_scope(an.modelnew, forward))
            for fn in self._launch_hooks():  # Triton runs these around the kernels forward launches
                self._follow(fn, an.module_scope)
        while self._todo:
            fn, scope = self._todo.pop(0)
            self.functions.append(fn)
            self._check_function(fn, scope)
        return self.violations

    def _launch_hooks(self) -> list[ast.AST]:
        """Functions and lambdas given to Triton's decorators (`autotune`'s `pre_hook`/`post_hook`/`prune_configs_by`,
        `heuristics`) and to `triton.Config(pre_hook=…)`: Triton calls them with the launch's arguments."""
        an, out = self.an, []
        exprs = [d for fn in an.functions.values() if fn.name in an.triton_kernels for d in fn.decorator_list]
        exprs += [n for n in ast.walk(an.tree) if isinstance(n, ast.Call)
                  and (an.resolve(n.func) or "").startswith("triton.")]
        for e in exprs:
            for node in ast.walk(e):
                if isinstance(node, ast.Lambda):
                    out.append(node)
                elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                    val = an.value(node, an.module_scope)
                    if val.kind == R.FUNCTION:
                        out.append(val.node)
        return out

    def _follow(self, fn: ast.AST, scope: R.Scope, tensor_params: frozenset[str] = frozenset()) -> None:
        """Queue `fn` for checking; again if a call now passes tensors to parameters no earlier call did."""
        known = self._tensor_params.get(id(fn), frozenset())
        if id(fn) not in self._seen or not tensor_params <= known:
            self._seen.add(id(fn))
            self._tensor_params[id(fn)] = known | tensor_params
            self._todo.append((fn, scope))

    def _check_function(self, fn: ast.AST, scope: R.Scope) -> None:
        self._params = set(_param_names(fn))
        parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        tensors = _Tensors(self.an, fn, scope, is_forward=fn is self.forward, scalar_kernels=self.scalar_kernels,
                           tensor_params=self._tensor_params.get(id(fn), frozenset()))
        dead = _DeviceGuards(fn, self.backend) if fn is self.forward else None
        for node in (n for stmt in body for n in (dead.walk(stmt) if dead else ast.walk(stmt))):
            if isinstance(node, ast.Try):
                self.violations.append(f"line {node.lineno}: try/except in the forward path is not allowed")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.violations.append(f"line {node.lineno}: the @ operator runs a PyTorch matmul; write a kernel")
            elif (operand := tensors.arithmetic(node)) is not None and not _shape_arithmetic(node, tensors):
                self.violations.append(f"line {node.lineno}: arithmetic on the tensor {operand} ({ast.unparse(node)[:60]}) "
                                       "runs PyTorch ops; compute in your kernels")
            elif isinstance(node, ast.Call):
                self._check_call(node, scope, tensors)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) and \
                    isinstance(node.value.func, ast.Name) and node.value.func.id == "type" and \
                    node.attr not in ("__name__", "__qualname__"):
                self.violations.append(f"line {node.lineno}: {ast.unparse(node)[:60]} reaches a tensor method through "
                                       "the class (a PyTorch op taken as a value); compute in your kernels")
            elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                parent = parents.get(id(node))
                if isinstance(parent, ast.Attribute) or (isinstance(parent, ast.Call) and parent.func is node):
                    continue  # part of a longer chain, or a call (checked as a call)
                self._check_reference(node, scope, parent)

    def _check_reference(self, node: ast.AST, scope: R.Scope, parent: ast.AST | None) -> None:
        """A function used as a value (a callback, `map(f, …)`): torch compute is rejected, the file's functions are
        followed, a Triton kernel handed on is deferred."""
        val = self.an.value(node, scope)
        if val.kind == R.TORCH and _is_torch_compute_function(val.path):
            self.violations.append(f"line {node.lineno}: {val.path} is a PyTorch compute op passed as a function; "
                                   "forward must use your own kernels")
        elif val.kind == R.FUNCTION:  # called by other code (a Triton grid, a callback): its arguments are unseen
            self._follow(val.node, val.scope)
        elif isinstance(node, ast.Name) and node.id in _Tensors._MATH_BUILTINS and isinstance(parent, ast.Call) \
                and node in parent.args:
            self.violations.append(f"line {node.lineno}: the builtin {node.id} passed as a function runs PyTorch ops "
                                   "on tensors; compute in your kernels")
        elif val.kind == R.TRITON and not isinstance(parent, ast.Subscript):
            self.rep.deferred.append(f"line {node.lineno}: Triton kernel {val.path} handed to other code")

    def _defer(self, call: ast.Call) -> None:
        """A call the analysis cannot resolve. Only one through a parameter of the function it stands in (a module or
        kernel a caller handed over: `def run(module, x): return module.fn(x)`) is left to the runtime evidence; any
        other (a helper found in a dict by a variable, a value built at run time) is rejected, since the runtime
        evidence is collected in the profiled calls alone and a candidate may tell those apart."""
        root = call.func
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name) and root.id in self._params:
            self.rep.deferred.append(f"line {call.lineno}: {ast.unparse(call.func)}(...)")
            return
        if isinstance(call.func, ast.Name) and call.func.id in self._tuple_types:
            return  # a named tuple type of the file's (`collections.namedtuple`): its constructor is plumbing
        self.violations.append(f"line {call.lineno}: {ast.unparse(call.func)[:60]}(...) is a call the analysis cannot "
                               "follow in the forward path; call your kernels and your own functions directly")

    def _check_call(self, call: ast.Call, scope: R.Scope, tensors: "_Tensors | None" = None) -> None:
        """Classify one call by what it reaches: own kernel, followed code, torch (whitelist), nn submodule (illegal),
        Python plumbing, or unknown (deferred; a tensor compute method on a receiver that may be a tensor, i.e. one
        not resolved to an extension, a module instance or a plain Python value, is rejected)."""
        an, v = self.an, self.violations
        f = call.func
        if id(call) in self.writes:
            return  # writing a native source from a literal (`f.write(cuda_src)`)
        fv = an.value(f, scope)
        text = ast.unparse(f)
        if fv.kind == R.KERNEL or (fv.kind == R.TRITON_MEMBER and isinstance(f, ast.Attribute) and f.attr == "run"):
            self.rep.kernel_calls.append(text if not isinstance(f, ast.Subscript) else ast.unparse(f.value))
            return
        if fv.kind in (R.SUBMODULE, R.SUBMODULE_MEMBER):
            v.append(f"line {call.lineno}: calling submodule {text} runs PyTorch's implementation; read its "
                     "parameters and pass them to your kernel instead")
            return
        if fv.kind == R.TORCH:
            if fv.path in SHAPE_TORCH_CALLS and call.args and _is_shape(call.args[0], tensors) \
                    or fv.path in SHAPE_COUNTS and call.args and _is_shape_tensor(call.args[0], tensors):
                return  # arithmetic on a tensor's sizes (`torch.prod(torch.tensor(x.shape))`), not on its data
            if fv.path in SHAPE_COUNTS:
                v.append(f"line {call.lineno}: {fv.path}(...) over tensor data is PyTorch compute; to count elements "
                         "write x.numel() or math.prod(x.shape)")
            elif fv.path.startswith(("torch.nn.functional", "torch.special", "torch.linalg", "torch.fft")):
                v.append(f"line {call.lineno}: {fv.path} is a PyTorch compute op; forward must use your own kernels")
            elif not _torch_call_allowed(fv.path):
                v.append(f"line {call.lineno}: {fv.path}(...) is a PyTorch op outside the plumbing whitelist")
            return
        if fv.kind == R.LIBRARY:
            if fv.path in OPERATOR_MATMUL:
                v.append(f"line {call.lineno}: {fv.path} is the @ operator, a PyTorch matmul; write a kernel")
            elif fv.path in LIBRARY_PRODUCTS and not all(_is_shape(a, tensors) for a in call.args[:1]):
                v.append(f"line {call.lineno}: {fv.path}(...) over {ast.unparse(call.args[0])[:40]} multiplies what "
                         "is not a tensor's sizes (tensor data is PyTorch compute); use it on x.shape or x.size() "
                         "only, or compute in your kernels")
            return
        target = an.callee(fv)
        if target is not None:
            self._follow(*target, _tensor_params(target[0], call, tensors))
            return
        if fv.kind in (R.BUILTIN, R.CLASS, R.PYOBJ) or (isinstance(f, ast.Name) and f.id in BUILTIN_CALLS):
            return
        if isinstance(f, ast.Attribute):
            receiver = an.value(f.value, scope)
            if receiver.kind in (R.PYOBJ, R.CONTAINER, R.BUILTIN) or f.attr in TENSOR_PLUMBING \
                    or f.attr in PYTHON_METHODS:
                return
            if f.attr in ("prod", "numel") and _is_shape_tensor(f.value, tensors):
                return  # `torch.tensor(x.shape).prod()`: the product of a tensor's sizes
            if receiver.kind in (R.UNKNOWN, R.SUBMODULE_MEMBER) and _is_tensor_method(f.attr):
                v.append(f"line {call.lineno}: .{f.attr}() in the forward path is not in the plumbing whitelist; "
                         "compute must happen in your kernels")
                return
        self._defer(call)


def _check_native_build(an: R.Resolver, backend: str, allow_vendor_libs: bool,
                        writes: "SourceWrites | None" = None) -> list[str]:
    """The cpu/cuda/musa backends build with load_inline (or cpp_extension.load of source files the candidate wrote):
    C++ only for cpu, CUDA sources for cuda, MUSA sources (torch_musa.utils.musa_extension.load_inline(musa_sources=
    ...)) for musa, no vendor link flags."""
    v = []
    if backend not in ("cpu", "cuda", "musa"):
        return v
    if not an.load_inline_calls:
        v.append(f"backend {backend}: no torch.utils.cpp_extension.load_inline(...) (or load(...)) call builds a "
                 "native kernel")
    for call in an.load_inline_calls:
        kws = {k.arg for k in call.keywords}
        if (an.resolve(call.func) or "").endswith("cpp_extension.load"):
            v += _check_load_sources(call, backend, writes)
        elif backend == "cpu" and "cuda_sources" in kws:
            v.append(f"line {call.lineno}: the cpu backend builds C++ only (cpp_sources); cuda_sources given")
        elif backend == "cuda" and "cuda_sources" not in kws:
            v.append(f"line {call.lineno}: the cuda backend needs cuda_sources in load_inline")
        elif backend == "musa" and "musa_sources" not in kws:
            v.append(f"line {call.lineno}: the musa backend needs musa_sources in load_inline "
                     "(torch_musa.utils.musa_extension.load_inline)")
        for kw in call.keywords:
            if kw.arg == "extra_ldflags":
                v += _link_flag_violations(call.lineno, kw.value, allow_vendor_libs)
            elif kw.arg in ("extra_cflags", "extra_cuda_cflags", "extra_musa_cflags") \
                    and _COMPILE_FLAG_FORBIDDEN.search(ast.unparse(kw.value)):
                v.append(f"line {call.lineno}: {kw.arg} may not link, load plugins or include other files "
                         f"({ast.unparse(kw.value)[:120]}); optimisation, warning, macro and architecture flags only")
    return v


def _check_load_sources(call: ast.Call, backend: str, writes: "SourceWrites | None") -> list[str]:
    """`cpp_extension.load(name, sources=[...])`: every source must be a file the candidate writes from a string
    literal of its own file (so the native rules read it), named by a literal with a source suffix; the cuda backend
    needs a `.cu` among them, the cpu backend none."""
    how = ("; write each source from a string literal first (`with open(os.path.join(d, \"k.cu\"), \"w\") as f: "
           "f.write(cuda_src)`) and pass the same path, or build with load_inline(cuda_sources=...)")
    src = next((k.value for k in call.keywords if k.arg == "sources"), call.args[1] if len(call.args) > 1 else None)
    if backend == "musa":
        return [f"line {call.lineno}: the musa backend builds with torch_musa's load_inline(musa_sources=...)"]
    if not isinstance(src, (ast.List, ast.Tuple)) or not src.elts:
        return [f"line {call.lineno}: load(...) needs sources=[...] as a list of paths{how}"]
    written = writes.files if writes else set()
    v, names = [], []
    for e in src.elts:
        name = writes.file_name(e) if writes else None
        if name is None or name not in written:
            v.append(f"line {call.lineno}: the source {ast.unparse(e)[:60]} is not a file this candidate writes from "
                     f"a string literal{how}")
        else:
            names.append(name)
    if backend == "cuda" and names and not any(n.endswith((".cu", ".cuh")) for n in names):
        v.append(f"line {call.lineno}: the cuda backend needs a .cu source among load's sources")
    if backend == "cpu" and any(n.endswith((".cu", ".cuh")) for n in names):
        v.append(f"line {call.lineno}: the cpu backend builds C++ only; a .cu source given to load")
    return v


class SourceWrites:
    """The native source files a candidate writes for `cpp_extension.load`: `with open(P, "w") as f: f.write(S)` or
    `open(P, "w").write(S)`, where P names a file with a source suffix by a string literal (`os.path.join(d,
    "k.cu")`) and S is a string literal of the file (or a name bound only to such literals), so the native rules read
    what is compiled. These are the only uses of `open` allowed: `opens` (their `open` names), `calls` (their write
    calls), `files` (the file names)."""

    HOW = ("; open() may only write a native source from a string literal for cpp_extension.load: "
           "`with open(os.path.join(build_dir, \"k.cu\"), \"w\") as f: f.write(cuda_src)`")

    def __init__(self, tree: ast.Module, an: R.Resolver):
        self.an = an
        self.literals = self._literal_names(tree)
        stores: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
        self._paths = {node.targets[0].id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                       and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                       and stores.get(node.targets[0].id) == 1}
        self.opens: set[int] = set()
        self.calls: set[int] = set()
        self.files: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.With, ast.AsyncWith)) and len(node.items) == 1:
                item = node.items[0]
                var = item.optional_vars
                if isinstance(var, ast.Name) and self._open_for_write(item.context_expr) and node.body and \
                        all(self._write_call(st, var.id) for st in node.body):
                    self._accept(item.context_expr, [st.value for st in node.body])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write" \
                    and self._open_for_write(node.func.value) and self._literal(node.args, node.keywords):
                self._accept(node.func.value, [node])

    _paths: dict[str, ast.AST] = {}

    def file_name(self, e: ast.AST, depth: int = 0) -> str | None:
        """The source file name a path expression ends in: its last string literal with a source suffix, through
        names bound once in the file (`src_path = os.path.join(d, "k.cu")`)."""
        if isinstance(e, ast.Name) and e.id in self._paths and depth < 4:
            return self.file_name(self._paths[e.id], depth + 1)
        names = [n.value for n in ast.walk(e) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and n.value.endswith(NATIVE_SOURCE_SUFFIXES)]
        return names[-1].rsplit("/", 1)[-1] if names else None

    @staticmethod
    def _literal_names(tree: ast.Module) -> set[str]:
        """Module-level names every binding of which is a string literal (or a sum of them)."""
        bound: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                bound.setdefault(node.id, [])
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                bound[node.targets[0].id].append(node.value)
        def lit(e):
            return isinstance(e, ast.Constant) and isinstance(e.value, str) or \
                isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and lit(e.left) and lit(e.right)
        counts = {}
        for node in ast.walk(tree):  # every binding, anywhere, must be one of the literal module-level ones
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                counts[node.id] = counts.get(node.id, 0) + 1
        return {n for n, vals in bound.items() if vals and len(vals) == counts.get(n) and all(map(lit, vals))}

    def _string(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, str)
        if isinstance(e, ast.Name):
            return e.id in self.literals
        return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and self._string(e.left) and self._string(e.right)

    def _literal(self, args: list, keywords: list) -> bool:
        return len(args) == 1 and not keywords and self._string(args[0])

    def _open_for_write(self, e: ast.AST) -> bool:
        if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "open" and e.args):
            return False
        mode = e.args[1] if len(e.args) > 1 else next((k.value for k in e.keywords if k.arg == "mode"), None)
        extra = [k.arg for k in e.keywords if k.arg not in ("mode", "encoding")]
        return isinstance(mode, ast.Constant) and mode.value in ("w", "wt") and not extra and len(e.args) <= 2 \
            and self.file_name(e.args[0]) is not None

    def _write_call(self, st: ast.AST, var: str) -> bool:
        return isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
            and isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "write" \
            and isinstance(st.value.func.value, ast.Name) and st.value.func.value.id == var \
            and self._literal(st.value.args, st.value.keywords)

    def _accept(self, open_call: ast.Call, writes: list[ast.Call]) -> None:
        self.opens.add(id(open_call.func))
        self.calls.update(id(w) for w in writes)
        self.files.add(self.file_name(open_call.args[0]))


# what a candidate may link: OpenMP, the C math and thread runtimes and the device runtime (KernelBench's examples
# pass `[""]` and `-lcuda`); with vendor libraries allowed, `-l` of one.
# Search paths, libraries named by file (`-l:…`, `*.so`, `*.a`) and linker options are out: a foreign BLAS linked
# by path (NumPy's OpenBLAS) computed a matmul under a prefixed name.
_LINK_FLAG_OK = re.compile(r"^(?:|-fopenmp|-lgomp|-lm|-lpthread|-lcuda|-lcudart|-lmusa|-lmusart|-O[0-3sz]?)$")
_LINK_FLAG_VENDOR = re.compile(r"^-l(?:cublas|cublasLt|cudnn|cusparse|cufft|cusolver|curand|mublas|mudnn|musparse|mufft|"
                               r"musolver|hipblas|miopen|mkl_\w+|dnnl|openblas)$")
# compile flags that reach beyond compiling the candidate's own source: linking, plugins, other files included
# (nvcc's `-lineinfo`, line tables for profilers, is a compile flag, not the library `ineinfo`)
_COMPILE_FLAG_FORBIDDEN = re.compile(r"-Wl,|-Xlinker|--linker-options|-fplugin|-specs\b|-include\b|-imacros|-trigraphs|"
                                     r"(?<![\w-])-l(?!ineinfo\b)\S|(?<![\w-])-L\S|\.so\b|\.a\b|(?<![\w-])-B\S")


def _link_flag_violations(lineno: int, value: ast.expr, allow_vendor_libs: bool) -> list[str]:
    flags = value.elts if isinstance(value, (ast.List, ast.Tuple)) else None
    if flags is None or not all(isinstance(f, ast.Constant) and isinstance(f.value, str) for f in flags):
        return [f"line {lineno}: extra_ldflags must be a list of plain strings ({ast.unparse(value)[:120]})"]
    out = []
    for f in flags:
        flag = f.value.strip()
        if _LINK_FLAG_OK.match(flag) or allow_vendor_libs and _LINK_FLAG_VENDOR.match(flag):
            continue
        if VENDOR_PATTERNS.search(flag) and not allow_vendor_libs:
            out.append(f"line {lineno}: linking vendor libraries ({flag}) is not allowed under the strict policy")
        else:
            out.append(f"line {lineno}: the link flag {flag!r} is not allowed: link only OpenMP (-fopenmp) and the C "
                       "runtimes (-lm, -lpthread, -lcuda); no search paths, libraries by file or linker options")
    return out


def _extension_names(tree: ast.Module, an: R.Resolver) -> list[str]:
    """Names the code binds to extension modules (`ext = load_inline(...)`, `self.ext = build()`), for the report."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and an.value(node.value, an.module_scope).kind == R.EXTENSION:
            names.update(d for d in map(R.dotted, node.targets) if d)
    return sorted(names)


def _kernel_defs(tree: ast.Module, an: R.Resolver, backend: str, native: str) -> tuple[list[str], list[str]]:
    """The kernels the code defines for its backend (CUDA `__global__` names, extension names, Triton kernels), and
    the violation when there are none."""
    if backend in ("cuda", "musa"):
        defs = kernel_names(native)
        return defs, [] if defs else [f"backend {backend}: no __global__ kernel is defined in the "
                                      f"{backend.upper()} sources"]
    if backend == "triton":
        defs = sorted(an.triton_kernels)
        return defs, [] if defs else ["backend triton: no @triton.jit kernel is defined"]
    return _extension_names(tree, an), []


def _check_kernel_presence(rep: StaticReport, has_forward: bool, backend: str) -> list[str]:
    """forward must reach an own kernel. Only a forward path that resolves completely and calls none is a provable
    decoy; with deferred calls the runtime launch count decides."""
    if rep.kernel_calls or rep.deferred or not has_forward:
        return []
    what = "a @triton.jit kernel launched as kernel[grid](...)" if backend == "triton" else \
        "a function of the load_inline extension"
    return [f"ModelNew.forward never calls a native kernel ({what}); a kernel defined but not called is a decoy"]


def _check_native_sources(native: str, allow_vendor_libs: bool) -> list[str]:
    """Native source may not spawn threads/processes, touch files, call back into Python, use side streams, bypass
    the dispatcher, change global state, or (strict policy) use vendor libraries."""
    v = []
    # read as the compiler reads it: a backslash before a newline joins the lines first (`std::thr\⏎ead` is
    # `std::thread`), so every name rule sees the joined text as well as the raw one
    native = native + "\n" + re.sub(r"\\[ \t]*\r?\n", "", native)
    for pattern, what in NATIVE_FORBIDDEN:
        m = pattern.search(native)
        if m:
            v.append(f"native source {what} ({m.group(0)!r}); kernels may not")
    # adjacent string literals are one to the compiler (`"%%global" "timer"`); a clock named whole is reported by the
    # rule on every string of the file
    joined = re.sub(r"\"\s*\"", "", native)
    if not DEVICE_CLOCK.search(native) and (m := DEVICE_CLOCK.search(joined)):
        v.append(f"native source reads the GPU's clock ({m.group(0)!r}, in string literals split apart); kernels "
                 "may not")
    if not allow_vendor_libs:
        m = VENDOR_PATTERNS.search(native)
        if m:
            v.append(f"native source uses a vendor library ({m.group(0)}); forbidden under the strict policy")
    return v


def check_static(code: str, backend: str, allow_vendor_libs: bool = False) -> StaticReport:
    """Apply every static rule; returns violations (human-readable, each naming the line), the kernels found, and the
    forward-path calls left to the runtime checks (`deferred`)."""
    rep = StaticReport()
    try:
        tree = syntax.parse(code)
    except SyntaxError as e:
        rep.violations.append(f"syntax error at line {e.lineno}: {e.msg}")
        return rep
    an = R.Resolver(tree)
    if an.modelnew is None:
        rep.violations.append("no class ModelNew defined")
        return rep
    writes = SourceWrites(tree, an)
    v = _check_modelnew(an) + _check_imports(tree) + _check_escape_hatches(tree, an, writes) + _check_names(tree) + \
        _check_triton_bodies(tree, an)
    native = _native_sources(tree)
    path = _ForwardPath(an, rep, native, backend, writes)
    v += path.run()
    if not path.functions:
        v.append("ModelNew has no forward method")
    v += _check_native_build(an, backend, allow_vendor_libs, writes)
    if backend == "musa":  # the native rules are written against CUDA names; MUSA's are read as those
        from musacoder.port.cpp import musa_names_as_cuda

        native = musa_names_as_cuda(native)
    rep.kernel_defs, missing = _kernel_defs(tree, an, backend, native)
    v += missing
    v += _check_kernel_presence(rep, bool(path.functions), backend)
    v += _check_native_sources(native, allow_vendor_libs)
    rep.violations = list(dict.fromkeys(v))
    rep.kernel_calls = list(dict.fromkeys(rep.kernel_calls))
    rep.deferred = list(dict.fromkeys(rep.deferred))
    return rep
