"""Random operator graphs (stage 1, part b), NNSmith-style: typed DAGs of 2–6 ops with shape inference.

Each op declares which values it accepts (rank, sizes) and infers its output shape; a graph grows from one input by
appending ops that accept the current value, now and then joining an earlier value of the same shape (a residual) or
a fresh input, so the result is a DAG rather than a chain. Half the graphs follow the fusion template
producer (GEMM/conv) → affine (bias/scale) → activation → [normalisation] → reduction; the rest are free walks.

Sizes are symbolic: every dim is an expression over module-level constants (`out_features1`, `(height // 2)`), so
the rendered task's sizes can be overridden and its parameters follow.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable

from musacoder.data.records import TaskSpec

MAX_ELEMENTS = 1 << 22  # per intermediate value at scale 1 (16 MiB in fp32): keeps a graph CPU-sized


@dataclass(frozen=True)
class Dim:
    expr: str  # a constant's name or an expression over constants
    value: int


@dataclass(frozen=True)
class Value:
    var: str
    shape: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(d.value for d in self.shape)


@dataclass
class Graph:
    """A graph under construction: the forward statements, the module's parameters and the size constants."""

    rng: random.Random
    scale: float
    constants: dict = field(default_factory=dict)
    init_args: list[str] = field(default_factory=list)
    init_lines: list[str] = field(default_factory=list)
    forward_args: list[str] = field(default_factory=list)
    forward_lines: list[str] = field(default_factory=list)
    input_lines: list[str] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    counter: int = 0

    def size(self, base: int | tuple[int, ...], odd: bool = False) -> int:
        v = self.rng.choice(base) if isinstance(base, tuple) else base
        if odd:
            v = v - 1 if v > 2 else v
        s = max(1, round(v * self.scale)) if self.scale != 1.0 else v
        return s + 1 if v % 2 and not s % 2 else s

    def const(self, stem: str, value) -> str:
        """A new module-level constant; its name is `stem`, or `stem<k>` when taken."""
        name, k = stem, 1
        while name in self.constants:
            k += 1
            name = f"{stem}{k}"
        self.constants[name] = value
        return name

    def uses(self, *exprs: str) -> None:
        """Make the constants these init-time expressions mention arguments of `Model.__init__`."""
        for e in exprs:
            for tok in _names(e):
                if tok in self.constants and tok not in self.init_args:
                    self.init_args.append(tok)

    def emit(self, expr: str, shape: tuple[Dim, ...], op: str) -> Value:
        var = f"v{self.counter}"
        self.counter += 1
        self.forward_lines.append(f"{var} = {expr}")
        v = Value(var, shape)
        self.values.append(v)
        self.ops.append(op)
        return v

    def attr(self, stem: str) -> str:
        return f"{stem}{len(self.ops)}"


def _names(expr: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)


def _shape_expr(shape: tuple[Dim, ...]) -> str:
    return "(" + ", ".join(d.expr for d in shape) + (",)" if len(shape) == 1 else ")")


# ---------------------------------------------------------------------------------------------------- ops
@dataclass(frozen=True)
class Op:
    """An op: `accepts(value)` says whether it can follow `value`; `apply(graph, value)` emits it, returns the
    output value (its shape inferred)."""

    name: str
    family: str
    accepts: Callable[[Value], bool]
    apply: Callable[[Graph, Value], Value]


def _linear(g: Graph, v: Value) -> Value:
    out = g.const("out_features", g.size((64, 128, 256), odd=g.rng.random() < 0.3))
    a = g.attr("linear")
    g.uses(v.shape[-1].expr, out)
    g.init_lines.append(f"self.{a} = nn.Linear({v.shape[-1].expr}, {out})")
    return g.emit(f"self.{a}({v.var})", v.shape[:-1] + (Dim(out, g.constants[out]),), "linear")


def _conv(g: Graph, v: Value) -> Value:
    out = g.const("out_channels", g.size((8, 16, 32), odd=g.rng.random() < 0.3))
    k = g.rng.choice((1, 3, 3, 5))
    ks = g.const("kernel_size", k)
    a = g.attr("conv")
    g.uses(v.shape[1].expr, out, ks)
    g.init_lines.append(f"self.{a} = nn.Conv2d({v.shape[1].expr}, {out}, {ks}, padding={ks} // 2)")
    return g.emit(f"self.{a}({v.var})", (v.shape[0], Dim(out, g.constants[out])) + v.shape[2:], "conv2d")


def _bias(g: Graph, v: Value) -> Value:
    c = v.shape[1] if v.rank == 4 else v.shape[-1]
    shape = (c.expr, 1, 1) if v.rank == 4 else (c.expr,)
    name = g.const("bias_shape", shape)
    g.uses(name)
    a = g.attr("bias")
    g.init_lines.append(f"self.{a} = nn.Parameter(torch.randn({name}) * 0.02)")
    return g.emit(f"{v.var} + self.{a}", v.shape, "bias_add")


def _scale(g: Graph, v: Value) -> Value:
    s = g.const("scaling_factor", g.rng.choice((0.5, 2.0, 1.5, 0.125)))
    return g.emit(f"{v.var} * {s}", v.shape, "scale")


_ACT = {"relu": "torch.relu({})", "gelu": "F.gelu({})", "silu": "F.silu({})", "tanh": "torch.tanh({})",
        "sigmoid": "torch.sigmoid({})", "leaky_relu": "F.leaky_relu({}, 0.1)", "hardswish": "F.hardswish({})",
        "mish": "F.mish({})", "softplus": "F.softplus({})", "elu": "F.elu({})"}


def _act(name: str) -> Callable[[Graph, Value], Value]:
    def apply(g: Graph, v: Value) -> Value:
        return g.emit(_ACT[name].format(v.var), v.shape, name)

    return apply


def _clamp(g: Graph, v: Value) -> Value:
    lo = g.const("clamp_min", -1.0)
    hi = g.const("clamp_max", 1.0)
    return g.emit(f"torch.clamp({v.var}, min={lo}, max={hi})", v.shape, "clamp")


def _residual(g: Graph, v: Value) -> Value:
    same = [u for u in g.values[:-1] if u.shape == v.shape] or [v]
    u = g.rng.choice(same)
    op = g.rng.choice(("add", "mul"))
    return g.emit(f"{v.var} {'+' if op == 'add' else '*'} {u.var}", v.shape, f"residual_{op}")


def _new_input(g: Graph, v: Value) -> Value:
    name = f"y{len(g.forward_args)}"
    if g.rng.random() < 0.5 and v.rank >= 2:  # broadcast: size 1 everywhere but one feature dim
        keep = 1 if v.rank == 4 else v.rank - 1
        shape = tuple(d if i == keep else Dim("1", 1) for i, d in enumerate(v.shape))
        op = "broadcast_mul"
        expr = f"{v.var} * {name}"
    else:
        shape, op, expr = v.shape, "add_input", f"{v.var} + {name}"
    g.forward_args.append(name)
    g.input_lines.append(f"{name} = torch.randn{_shape_expr(shape)}")
    return g.emit(expr, v.shape, op)


def _reduce(kind: str) -> Callable[[Graph, Value], Value]:
    def apply(g: Graph, v: Value) -> Value:
        dim = g.rng.randrange(1, v.rank)
        keep = g.rng.random() < 0.5
        fn = {"sum": "torch.sum", "mean": "torch.mean", "amax": "torch.amax", "logsumexp": "torch.logsumexp"}[kind]
        shape = tuple(Dim("1", 1) if i == dim else d for i, d in enumerate(v.shape)) if keep else \
            tuple(d for i, d in enumerate(v.shape) if i != dim)
        return g.emit(f"{fn}({v.var}, dim={dim}{', keepdim=True' if keep else ''})", shape, kind)

    return apply


def _softmax(kind: str) -> Callable[[Graph, Value], Value]:
    def apply(g: Graph, v: Value) -> Value:
        dim = g.rng.randrange(1, v.rank)
        return g.emit(f"torch.{kind}({v.var}, dim={dim})", v.shape, kind)

    return apply


def _layer_norm(g: Graph, v: Value) -> Value:
    a = g.attr("norm")
    g.uses(v.shape[-1].expr)
    g.init_lines.append(f"self.{a} = nn.LayerNorm({v.shape[-1].expr})")
    return g.emit(f"self.{a}({v.var})", v.shape, "layer_norm")


def _group_norm(g: Graph, v: Value) -> Value:
    c = v.shape[1]
    groups = g.const("num_groups", max(d for d in (1, 2, 4, 8) if c.value % d == 0))
    a = g.attr("norm")
    g.uses(c.expr, groups)
    g.init_lines.append(f"self.{a} = nn.GroupNorm({groups}, {c.expr})")
    return g.emit(f"self.{a}({v.var})", v.shape, "group_norm")


def _batch_norm(g: Graph, v: Value) -> Value:
    a = g.attr("norm")
    g.uses(v.shape[1].expr)
    g.init_lines.append(f"self.{a} = nn.BatchNorm2d({v.shape[1].expr})")
    return g.emit(f"self.{a}({v.var})", v.shape, "batch_norm")


def _max_pool(g: Graph, v: Value) -> Value:
    shape = v.shape[:2] + tuple(Dim(f"({d.expr} // 2)", d.value // 2) for d in v.shape[2:])
    return g.emit(f"F.max_pool2d({v.var}, 2)", shape, "max_pool2d")


def _global_pool(g: Graph, v: Value) -> Value:
    return g.emit(f"torch.mean({v.var}, dim=(2, 3))", v.shape[:2], "global_avg_pool")


def _flatten(g: Graph, v: Value) -> Value:
    d = Dim(" * ".join(x.expr for x in v.shape[1:]), math.prod(x.value for x in v.shape[1:]))
    return g.emit(f"torch.flatten({v.var}, 1)", (v.shape[0], d), "flatten")


def _transpose(g: Graph, v: Value) -> Value:
    return g.emit(f"{v.var}.transpose(1, 2)", (v.shape[0], v.shape[2], v.shape[1]) + v.shape[3:], "transpose")


def _self_matmul(g: Graph, v: Value) -> Value:
    s = g.const("attn_scale", round(1.0 / math.sqrt(v.shape[-1].value), 6))
    return g.emit(f"torch.matmul({v.var}, {v.var}.transpose(-2, -1)) * {s}",
                  v.shape[:-1] + (v.shape[-2],), "bmm")


def _small(v: Value, factor: int = 1) -> bool:
    return v.numel * factor <= MAX_ELEMENTS


OPS: tuple[Op, ...] = (
    Op("linear", "gemm", lambda v: v.rank in (2, 3) and v.shape[-1].value <= 4096 and _small(v, 2), _linear),
    Op("conv2d", "conv", lambda v: v.rank == 4 and v.shape[1].value <= 64 and _small(v, 4), _conv),
    Op("bmm", "gemm", lambda v: v.rank == 3 and v.shape[1].value <= 512 and _small(v), _self_matmul),
    Op("bias_add", "elementwise", lambda v: v.rank in (2, 3, 4), _bias),
    Op("scale", "elementwise", lambda v: True, _scale),
    *(Op(a, "activation", lambda v: True, _act(a)) for a in _ACT),
    Op("clamp", "activation", lambda v: True, _clamp),
    Op("residual", "elementwise", lambda v: True, _residual),
    Op("new_input", "broadcast", lambda v: v.rank >= 1, _new_input),
    *(Op(r, "reduction", lambda v: v.rank >= 2, _reduce(r)) for r in ("sum", "mean", "amax", "logsumexp")),
    *(Op(s, "softmax", lambda v: v.rank >= 2, _softmax(s)) for s in ("softmax", "log_softmax")),
    Op("layer_norm", "normalization", lambda v: v.rank in (2, 3) and v.shape[-1].value > 1, _layer_norm),
    Op("group_norm", "normalization", lambda v: v.rank == 4 and v.shape[1].value > 1, _group_norm),
    Op("batch_norm", "normalization", lambda v: v.rank == 4, _batch_norm),
    Op("max_pool2d", "pooling", lambda v: v.rank == 4 and min(d.value for d in v.shape[2:]) >= 4, _max_pool),
    Op("global_avg_pool", "pooling", lambda v: v.rank == 4, _global_pool),
    Op("flatten", "reshape", lambda v: v.rank == 4 and math.prod(d.value for d in v.shape[1:]) <= 8192, _flatten),
    Op("transpose", "reshape", lambda v: v.rank == 3, _transpose),
)
_BY_FAMILY: dict[str, list[Op]] = {}
for _op in OPS:
    _BY_FAMILY.setdefault(_op.family, []).append(_op)

# the fusion template: a producer, then an affine op, an activation, an optional normalisation, a reduction
_TEMPLATE = (("gemm", "conv"), ("elementwise", "broadcast"), ("activation",), ("normalization", "activation"),
             ("reduction", "softmax", "pooling"))


def _pick(g: Graph, v: Value, families: tuple[str, ...] | None) -> Op | None:
    pool = [op for op in OPS if (families is None or op.family in families) and op.accepts(v)]
    if not pool:
        return None
    fams = sorted({op.family for op in pool})
    fam = g.rng.choice(fams)
    return g.rng.choice([op for op in pool if op.family == fam])


def _start(g: Graph) -> Value:
    odd = g.rng.random() < 0.3
    kind = g.rng.choice(("2d", "3d", "4d"))
    if kind == "2d":
        dims = {"batch_size": g.size((32, 64), odd), "in_features": g.size((256, 512, 1024), odd)}
    elif kind == "3d":
        dims = {"batch_size": g.size((4, 8), odd), "seq_len": g.size((64, 128), odd), "hidden": g.size((64, 128), odd)}
    else:
        dims = {"batch_size": g.size((2, 4), odd), "in_channels": g.size((3, 8, 16)), "height": g.size((32, 16), odd),
                "width": g.size((32, 16), odd)}
    for k, val in dims.items():
        g.const(k, val)
    g.forward_args.append("x")
    g.input_lines.append(f"x = torch.randn({', '.join(dims)})")
    v = Value("x", tuple(Dim(k, val) for k, val in dims.items()))
    g.values.append(v)
    return v


def graph_task(rng: random.Random, scale: float = 1.0) -> TaskSpec:
    """One random graph of 2–6 ops rendered as a task spec (`ops` lists the ops in order)."""
    g = Graph(rng=rng, scale=scale)
    v = _start(g)
    n_ops = rng.randint(2, 6)
    template = rng.random() < 0.5
    steps = list(_TEMPLATE) if template else [None] * n_ops
    if template:
        while len(steps) > n_ops:  # drop optional middle steps to fit the op budget
            steps.pop(rng.randrange(1, len(steps) - 1))
    for fams in steps:
        op = _pick(g, v, fams) or _pick(g, v, None)
        if op is None:
            break
        v = op.apply(g, v)
    g.forward_lines.append(f"return {v.var}")
    g.input_lines.append(f"return [{', '.join(g.forward_args)}]")
    title = "_".join(_TITLE.get(o, o.title().replace("_", "")) for o in g.ops)
    return TaskSpec(
        name=title, family="graph", kind="graph", variant="template" if template else "walk",
        doc=f"Operator graph: {' -> '.join(g.ops)}.", constants=g.constants, init_args=g.init_args,
        init_lines=g.init_lines, forward_args=g.forward_args, forward_lines=g.forward_lines,
        input_lines=g.input_lines, ops=g.ops, out_shape=[d.value for d in v.shape],
    )


_TITLE = {"linear": "Gemm", "conv2d": "Conv2d", "bmm": "BMM", "gelu": "GELU", "silu": "SiLU", "relu": "ReLU",
          "elu": "ELU", "layer_norm": "LayerNorm", "group_norm": "GroupNorm", "batch_norm": "BatchNorm",
          "logsumexp": "LogSumExp", "log_softmax": "LogSoftmax", "bias_add": "BiasAdd", "max_pool2d": "MaxPool2d"}
