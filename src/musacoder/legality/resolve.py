"""What an expression in a candidate refers to, as far as the AST can tell.

The static rules ask one question of every call in the forward path: what does it reach? `Resolver.value` answers with a
`Value`: a torch or library path, the candidate's extension module or one of its functions, a Triton kernel, a function
or lambda of the file, an instance of one of its classes, an nn submodule, a literal container, a plain Python value, or
UNKNOWN. It follows import aliases, module-level and local assignments (including `global` ones and loop variables over
literal containers), attributes assigned on `self` (in any method or the class body), dict/list/tuple literals,
`functools.partial`, `staticmethod`, lambdas and the return values of the file's own functions. What it cannot follow is
UNKNOWN, and the rules defer such calls to the runtime evidence rather than guess.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

# Value kinds.
TORCH = "torch"  # path: a dotted path under torch (import aliases resolved)
LIBRARY = "library"  # path: a dotted path under another imported module (triton, math, functools, …)
EXTENSION = "extension"  # a module built by load_inline
KERNEL = "kernel"  # a function of an extension module, or a Triton kernel subscripted with its grid
TRITON = "triton_kernel"  # a @triton.jit / @triton.autotune function (launched as kernel[grid](...))
TRITON_MEMBER = "triton_member"  # an attribute of a Triton kernel (kernel.run, kernel.warmup, …)
FUNCTION = "function"  # a def or lambda of the file: node, scope
CLASS = "class"  # a class of the file: node
INSTANCE = "instance"  # an instance of a class of the file: node is the class
SUBMODULE = "submodule"  # an instance of a torch.nn module (path: its constructor)
SUBMODULE_MEMBER = "submodule_member"  # an attribute of such a module (a parameter, or a method such as .forward)
CONTAINER = "container"  # a dict/list/tuple literal: node, scope
PYOBJ = "pyobject"  # a plain Python value (constant, string, list(...), len(...))
BUILTIN = "builtin"  # a Python builtin: path is its name
UNKNOWN = "unknown"

_NN_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
_TRANSPARENT_BUILTINS = {"staticmethod", "classmethod"}
# builtins whose result is a plain value whatever they are given; the others (min, max, sorted, sum, abs, round, list,
# zip …) can hand back one of their arguments, a tensor included (`min([t]).numpy()`), so what they return is unknown
_PYOBJ_BUILTINS = {"str", "int", "float", "bool", "len", "range", "repr", "format", "hash", "id"}


@dataclass(frozen=True, eq=False)
class Scope:
    """Where a name is looked up: a def or lambda (`fn`, None for the module), the class whose `self` it sees, the name
    of `self` there, and the enclosing scope."""

    fn: ast.AST | None = None
    cls: ast.ClassDef | None = None
    self_name: str | None = None
    parent: Scope | None = None


@dataclass(frozen=True)
class Value:
    kind: str
    path: str = ""
    node: ast.AST | None = field(default=None, compare=False)
    scope: Scope | None = field(default=None, compare=False)
    ident: int = 0  # id() of `node` where the node matters for equality (functions, classes, containers)

    def __str__(self) -> str:
        return self.path or self.kind


UNKNOWN_VALUE = Value(UNKNOWN)


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _local_walk(fn: ast.AST):
    """Nodes of a def/lambda body, including nested defs and lambdas (their names are merged into this scope, which
    only makes a lookup more often UNKNOWN), but not nested classes."""
    todo = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))


def _module_walk(tree: ast.Module):
    """Statements executed at import time: the module body, not the bodies of defs, lambdas or classes."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


class Resolver:
    """Module structure (imports, functions, classes, Triton kernels, load_inline calls, ModelNew) and the values its
    names and attributes are bound to."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.aliases: dict[str, str] = {}  # local name -> dotted module/object path
        self.functions: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.triton_kernels: set[str] = set()
        self.load_inline_calls: list[ast.Call] = []
        self.modelnew: ast.ClassDef | None = None
        self.module_scope = Scope()
        self._bindings: dict[int, dict[str, list[tuple[ast.AST | Value, Scope]]]] = {}
        self._globals: dict[int, set[str]] = {}
        self._attrs: dict[int, dict[str, list[tuple[ast.AST | Value, Scope]]]] = {}
        self._active: set[tuple[int, int]] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
                if any(self.resolve(d if not isinstance(d, ast.Call) else d.func) in ("triton.jit", "triton.autotune")
                       for d in node.decorator_list):
                    self.triton_kernels.add(node.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                if node.name == "ModelNew":
                    self.modelnew = node
        for node in ast.walk(tree):
            # the builders: load_inline, and cpp_extension.load of source files (both hooked by the worker)
            if isinstance(node, ast.Call) and ((path := self.resolve(node.func) or "").endswith("load_inline")
                                               or path.endswith("cpp_extension.load")):
                self.load_inline_calls.append(node)

    # -- names ---------------------------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        """Dotted path with the first component resolved through import aliases (`F.relu` → torch.nn.functional.relu)."""
        d = dotted(node)
        if d is None:
            return None
        head, _, rest = d.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
            return f"{base}.{rest}" if rest else base
        return d

    def method_scope(self, cls: ast.ClassDef, fn: ast.FunctionDef) -> Scope:
        """The scope of method `fn` of `cls` (its first argument is `self`)."""
        args = fn.args.posonlyargs + fn.args.args
        return Scope(fn, cls, args[0].arg if args else None, self.module_scope)

    def methods(self, cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
        return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def _scope_bindings(self, scope: Scope) -> dict[str, list[tuple[ast.AST | Value, Scope]]]:
        """Every binding of a name in `scope`: (expression or Value, scope it evaluates in)."""
        key = id(scope.fn)
        if key in self._bindings:
            return self._bindings[key]
        out: dict[str, list] = {}
        unknown = (UNKNOWN_VALUE, scope)

        def bind(target: ast.AST, value, where: Scope) -> None:
            if isinstance(target, ast.Name):
                out.setdefault(target.id, []).append((value, where))
            elif isinstance(target, (ast.Tuple, ast.List)):
                pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                for i, t in enumerate(target.elts):
                    bind(t.value if isinstance(t, ast.Starred) else t,
                         value.elts[i] if pairs else UNKNOWN_VALUE, where)

        def bind_args(a: ast.arguments) -> None:
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None:
                    out.setdefault(arg.arg, []).append(unknown)

        if scope.fn is None:
            nodes = list(_module_walk(self.tree))
            for fn in ast.walk(self.tree):  # `global NAME` assignments inside functions bind module names too
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names = {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
                    for node in ast.walk(fn):
                        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                                if isinstance(t, ast.Name) and t.id in names:
                                    value = node.value if isinstance(node, ast.Assign) else UNKNOWN_VALUE
                                    out.setdefault(t.id, []).append((value, Scope(fn, None, None, self.module_scope)))
        else:
            nodes = list(_local_walk(scope.fn))
            bind_args(scope.fn.args)
            self._globals[key] = {n for g in nodes if isinstance(g, ast.Global) for n in g.names}
        for node in nodes:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    bind(t, node.value, scope)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                bind(node.target, node.value, scope)
            elif isinstance(node, ast.NamedExpr):
                bind(node.target, node.value, scope)
            elif isinstance(node, (ast.AugAssign, ast.With, ast.AsyncWith, ast.ExceptHandler)):
                targets = [node.target] if isinstance(node, ast.AugAssign) else \
                    [i.optional_vars for i in node.items if i.optional_vars] if isinstance(node, (ast.With, ast.AsyncWith)) \
                    else ([ast.Name(node.name)] if node.name else [])
                for t in targets:
                    bind(t, UNKNOWN_VALUE, scope)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bind(node.target, Value("element", node=node.iter, scope=scope), scope)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(node.name, []).append((self._function_value(node, scope), scope))
                if node is not scope.fn:
                    bind_args(node.args)
            elif isinstance(node, ast.Lambda):
                bind_args(node.args)
            elif isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append((Value(CLASS, node.name, node, ident=id(node)), scope))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    out.setdefault(name, []).append((self._name_value(name, self.module_scope, imports_only=True), scope))
        self._bindings[key] = out
        return out

    def _function_value(self, fn: ast.AST, scope: Scope) -> Value:
        """A def or lambda as a value; its body resolves in a scope nested in `scope`."""
        inner = Scope(fn, scope.cls, scope.self_name, scope)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.fn is None:
            inner = Scope(fn, None, None, scope)
        name = getattr(fn, "name", "<lambda>")
        if any(self.resolve(d if not isinstance(d, ast.Call) else d.func) in ("triton.jit", "triton.autotune")
               for d in getattr(fn, "decorator_list", [])):
            return Value(TRITON, name, fn, inner, id(fn))
        return Value(FUNCTION, name, fn, inner, id(fn))

    def _attr_bindings(self, cls: ast.ClassDef) -> dict[str, list[tuple[ast.AST | Value, Scope]]]:
        """Every `self.NAME = …` in the methods of `cls` and every `NAME = …` in its body."""
        key = id(cls)
        if key in self._attrs:
            return self._attrs[key]
        out: dict[str, list] = {}
        for node in cls.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, []).append((node.value, self.module_scope))
        for fn in self.methods(cls).values():
            scope = self.method_scope(cls, fn)
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and getattr(node, "value", None):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                        pairs = isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == len(elts) \
                            and isinstance(node, ast.Assign)
                        for i, e in enumerate(elts):
                            if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
                                    and e.value.id == scope.self_name:
                                value = node.value.elts[i] if pairs else node.value if len(elts) == 1 else UNKNOWN_VALUE
                                if isinstance(node, ast.AugAssign):
                                    value = UNKNOWN_VALUE
                                out.setdefault(e.attr, []).append((value, scope))
        self._attrs[key] = out
        return out

    # -- values --------------------------------------------------------------------------------------------------
    def value(self, node: ast.AST | Value, scope: Scope) -> Value:
        """What `node` evaluates to in `scope` (UNKNOWN where that cannot be told)."""
        if isinstance(node, Value):
            return self._element(node) if node.kind == "element" else node
        key = (id(node), id(scope))
        if key in self._active:
            return UNKNOWN_VALUE
        self._active.add(key)
        try:
            return self._value(node, scope)
        finally:
            self._active.discard(key)

    def _merge(self, values: list[Value]) -> Value:
        """One value for several bindings: the common one, else UNKNOWN. `None` placeholders (a lazily built extension
        starts as None) do not count, since nothing can be called through them."""
        real = [v for v in values if not (v.kind == PYOBJ and v.path == "None")] or values
        if not real:
            return UNKNOWN_VALUE
        if all(v == real[0] for v in real):
            return real[0]
        if all(v.kind == real[0].kind for v in real) and real[0].kind in (EXTENSION, KERNEL, PYOBJ):
            return Value(real[0].kind, " | ".join(dict.fromkeys(v.path for v in real)))
        return UNKNOWN_VALUE

    def _value(self, node: ast.AST, scope: Scope) -> Value:
        if isinstance(node, ast.Constant):
            return Value(PYOBJ, "None" if node.value is None else type(node.value).__name__)
        if isinstance(node, (ast.JoinedStr, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return Value(PYOBJ, type(node).__name__)
        if isinstance(node, (ast.Dict, ast.List, ast.Tuple)):
            return Value(CONTAINER, type(node).__name__.lower(), node, scope, id(node))
        if isinstance(node, ast.Name):
            if scope.cls is not None and node.id == scope.self_name and not self._shadows_self(node.id, scope):
                return Value(INSTANCE, scope.cls.name, scope.cls, ident=id(scope.cls))
            return self._name_value(node.id, scope)
        if isinstance(node, ast.Attribute):
            return self._attribute_value(node, scope)
        if isinstance(node, ast.Subscript):
            return self._subscript_value(node, scope)
        if isinstance(node, ast.Call):
            return self._call_value(node, scope)
        if isinstance(node, ast.Lambda):
            return self._function_value(node, scope)
        if isinstance(node, ast.IfExp):
            return self._merge([self.value(node.body, scope), self.value(node.orelse, scope)])
        if isinstance(node, ast.NamedExpr):
            return self.value(node.value, scope)
        return UNKNOWN_VALUE

    def _name_value(self, name: str, scope: Scope, imports_only: bool = False) -> Value:
        s = scope
        while s is not None and not imports_only:
            bindings = self._scope_bindings(s)
            if s.fn is not None and name in self._globals.get(id(s.fn), ()):
                s = self.module_scope
                continue
            if name in bindings:
                return self._merge([self.value(v, where) for v, where in bindings[name]])
            if s.fn is None:
                break
            s = s.parent
        if name in self.aliases:
            path = self.aliases[name]
            return Value(TORCH if path.split(".")[0] == "torch" else LIBRARY, path)
        if hasattr(builtins, name):
            return Value(BUILTIN, name)
        return UNKNOWN_VALUE

    def _members(self, cls: ast.ClassDef, attr: str) -> Value:
        """`instance.attr` for an instance of a class of the file: a method, or what the attribute was assigned."""
        methods = self.methods(cls)
        if attr in methods:
            fn = methods[attr]
            return Value(FUNCTION, f"{cls.name}.{attr}", fn, self.method_scope(cls, fn), id(fn))
        bindings = self._attr_bindings(cls).get(attr)
        if bindings:
            return self._merge([self.value(v, where) for v, where in bindings])
        return UNKNOWN_VALUE

    def _attribute_value(self, node: ast.Attribute, scope: Scope) -> Value:
        base = node.value
        if isinstance(base, ast.Name) and scope.cls is not None and base.id == scope.self_name \
                and not self._shadows_self(base.id, scope):
            return self._members(scope.cls, node.attr)
        bv = self.value(base, scope)
        if bv.kind in (TORCH, LIBRARY):
            return Value(bv.kind, f"{bv.path}.{node.attr}")
        if bv.kind == EXTENSION:
            return Value(KERNEL, f"{bv.path}.{node.attr}")
        if bv.kind in (INSTANCE, CLASS):
            return self._members(bv.node, node.attr)
        if bv.kind == SUBMODULE:
            return Value(SUBMODULE_MEMBER, f"{bv.path}.{node.attr}")
        if bv.kind == TRITON:
            return Value(TRITON_MEMBER, f"{bv.path}.{node.attr}")
        if bv.kind in (PYOBJ, CONTAINER):
            return Value(PYOBJ, f"{bv.path}.{node.attr}")
        return UNKNOWN_VALUE

    def _shadows_self(self, name: str, scope: Scope) -> bool:
        """Whether `self` is rebound inside the method (then `self.x` is not the instance's attribute)."""
        s = scope
        while s is not None and s.fn is not None:
            bindings = self._scope_bindings(s).get(name, [])
            if len(bindings) > 1 or (bindings and bindings[0][0] is not UNKNOWN_VALUE):
                return True
            s = s.parent
        return False

    def _subscript_value(self, node: ast.Subscript, scope: Scope) -> Value:
        bv = self.value(node.value, scope)
        if bv.kind == TRITON:
            return Value(KERNEL, f"{bv.path}[grid]")
        if bv.kind != CONTAINER:
            return UNKNOWN_VALUE
        c, key = bv.node, node.slice
        if isinstance(key, ast.Constant):
            if isinstance(c, ast.Dict):
                for k, v in zip(c.keys, c.values):
                    if isinstance(k, ast.Constant) and k.value == key.value:
                        return self.value(v, bv.scope)
            elif isinstance(key.value, int) and -len(c.elts) <= key.value < len(c.elts) \
                    and not any(isinstance(e, ast.Starred) for e in c.elts):
                return self.value(c.elts[key.value], bv.scope)
        return self._element(Value("element", node=c, scope=bv.scope), literal=True)

    def _element(self, v: Value, literal: bool = False) -> Value:
        """An element of a container (a loop variable, or a subscript with a key not known): the common value of all
        elements of a literal dict/list/tuple, else UNKNOWN."""
        c = v.node if literal else None
        if c is None:
            cv = self.value(v.node, v.scope)
            if cv.kind != CONTAINER:
                return UNKNOWN_VALUE
            c, scope = cv.node, cv.scope
        else:
            scope = v.scope
        elts = c.values if isinstance(c, ast.Dict) else c.elts
        if not elts or any(isinstance(e, ast.Starred) for e in elts):
            return UNKNOWN_VALUE
        return self._merge([self.value(e, scope) for e in elts])

    def _call_value(self, node: ast.Call, scope: Scope) -> Value:
        if any(node is c for c in self.load_inline_calls):
            return Value(EXTENSION, "load_inline(...)")
        fv = self.value(node.func, scope)
        if fv.kind == LIBRARY and fv.path == "functools.partial" and node.args:
            return self.value(node.args[0], scope)
        if fv.kind == BUILTIN:
            if fv.path in _TRANSPARENT_BUILTINS and node.args:
                return self.value(node.args[0], scope)
            return Value(PYOBJ, f"{fv.path}(...)") if fv.path in _PYOBJ_BUILTINS else UNKNOWN_VALUE
        if fv.kind == FUNCTION:
            return self._returns(fv)
        if fv.kind == CLASS:
            return Value(INSTANCE, fv.path, fv.node, ident=fv.ident)
        if fv.kind == TORCH and fv.path.startswith("torch.nn.") and fv.path.rsplit(".", 1)[-1][:1].isupper():
            if fv.path.rsplit(".", 1)[-1] in _NN_CONTAINERS:
                # a container of torch.nn modules runs PyTorch; one holding the file's own modules is not provable
                parts = [e for a in node.args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else
                                                         a.values if isinstance(a, ast.Dict) else [a])]
                if parts and all(self.value(p, scope).kind == SUBMODULE for p in parts):
                    return Value(SUBMODULE, fv.path)
                return UNKNOWN_VALUE
            if fv.path.rsplit(".", 1)[-1] == "Parameter":
                return UNKNOWN_VALUE
            return Value(SUBMODULE, fv.path)
        return UNKNOWN_VALUE

    def _returns(self, fv: Value) -> Value:
        """What calling a def or lambda of the file returns, when all its `return`s agree."""
        fn = fv.node
        if isinstance(fn, ast.Lambda):
            return self.value(fn.body, fv.scope)
        rets = [n for n in _local_walk(fn) if isinstance(n, ast.Return)]
        nested = {id(r) for n in _local_walk(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                  for r in ast.walk(n) if isinstance(r, ast.Return)}
        values = [self.value(r.value, fv.scope) if r.value is not None else Value(PYOBJ, "None")
                  for r in rets if id(r) not in nested]
        return self._merge(values) if values else Value(PYOBJ, "None")

    def callee(self, v: Value) -> tuple[ast.AST, Scope] | None:
        """The def/lambda that calling `v` runs (a function, or the `forward` of an instance of a class of the file)."""
        if v.kind == FUNCTION:
            return v.node, v.scope
        if v.kind == INSTANCE:
            fn = self.methods(v.node).get("forward")
            if fn is not None:
                return fn, self.method_scope(v.node, fn)
        return None
