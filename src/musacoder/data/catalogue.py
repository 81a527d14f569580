"""Catalogue of torch ops and `nn` modules, each with targeted variants (stage 1, part a).

An entry builds a `TaskSpec` from a random stream, a variant and a dtype:

* `base`: CPU-sized, regular sizes;
* `odd`: odd sizes with tails that no power-of-two tile covers (1023, 257, 33, …);
* `noncontig`: an input that is a transposed or strided view;
* `broadcast`: a second operand of broadcast shape (binary and affine entries);
* `fp16` / `bf16`: half-precision inputs (and parameters) where the op supports them on the CPU.

Sizes are multiplied by `scale` (odd sizes stay odd), so `--scale 8` makes GPU-sized tasks from the same entries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from musacoder.data.records import TaskSpec

HALF = ("fp16", "bf16")
DTYPES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16"}
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class Sizes:
    """Size picker for one candidate: `n(base, odd)` is `base` (or `odd` in the odd variant) times the scale."""

    def __init__(self, rng: random.Random, variant: str, scale: float):
        self.rng, self.odd, self.scale = rng, variant == "odd", scale

    def n(self, base: int | tuple[int, ...], odd: int | tuple[int, ...] | None = None, fixed: bool = False) -> int:
        pool = odd if (self.odd and odd is not None) else base
        v = self.rng.choice(pool) if isinstance(pool, tuple) else pool
        if fixed or self.scale == 1.0:
            return v
        s = max(1, round(v * self.scale))
        return s + 1 if v % 2 and not s % 2 else s  # keep odd sizes odd


@dataclass(frozen=True)
class Entry:
    """One catalogue entry: `build(rng, sizes, variant, dtype) -> TaskSpec` for the variants it supports."""

    name: str
    family: str
    build: Callable[..., TaskSpec]
    variants: tuple[str, ...] = ("base", "odd")


def _rand(shape: str, dt: str, domain: str = "any") -> str:
    """A `torch` expression making a random input of `shape` (a tuple expression) in `dt`."""
    d = DTYPES[dt]
    if domain == "positive":
        return f"torch.rand({shape}, dtype={d}) + 0.5"
    if domain == "unit":
        return f"torch.rand({shape}, dtype={d}) * 1.8 - 0.9"
    return f"torch.randn({shape}, dtype={d})"


def _input(name: str, dims: list[str], dt: str, variant: str, domain: str = "any") -> str:
    """`name = …` making an input of shape `dims`; the noncontig variant transposes the last two dims or strides the
    last one."""
    shape = f"({', '.join(dims)},)" if len(dims) == 1 else f"({', '.join(dims)})"
    if variant == "noncontig" and len(dims) >= 2:
        swapped = dims[:-2] + [dims[-1], dims[-2]]
        return f"{name} = ({_rand('(' + ', '.join(swapped) + ')', dt, domain)}).transpose(-2, -1)"
    if variant == "noncontig":
        return f"{name} = ({_rand('(' + dims[0] + ' * 2,)', dt, domain)})[::2]"
    return f"{name} = {_rand(shape, dt, domain)}"


# ---------------------------------------------------------------------------------------------------- elementwise
_UNARY = {  # name: (expression of x, family, domain)
    "ReLU": ("torch.relu(x)", "activation", "any"),
    "GELU": ("F.gelu(x)", "activation", "any"),
    "GELUTanh": ("F.gelu(x, approximate='tanh')", "activation", "any"),
    "SiLU": ("F.silu(x)", "activation", "any"),
    "Sigmoid": ("torch.sigmoid(x)", "activation", "any"),
    "Tanh": ("torch.tanh(x)", "activation", "any"),
    "LeakyReLU": ("F.leaky_relu(x, negative_slope=negative_slope)", "activation", "any"),
    "ELU": ("F.elu(x, alpha=alpha)", "activation", "any"),
    "SELU": ("torch.selu(x)", "activation", "any"),
    "Softplus": ("F.softplus(x)", "activation", "any"),
    "Hardtanh": ("F.hardtanh(x, min_val=-clip, max_val=clip)", "activation", "any"),
    "Hardsigmoid": ("F.hardsigmoid(x)", "activation", "any"),
    "Hardswish": ("F.hardswish(x)", "activation", "any"),
    "Mish": ("F.mish(x)", "activation", "any"),
    "Softsign": ("F.softsign(x)", "activation", "any"),
    "Exp": ("torch.exp(x)", "elementwise", "unit"),
    "Log": ("torch.log(x)", "elementwise", "positive"),
    "Sqrt": ("torch.sqrt(x)", "elementwise", "positive"),
    "Rsqrt": ("torch.rsqrt(x)", "elementwise", "positive"),
    "Erf": ("torch.erf(x)", "elementwise", "any"),
    "Abs": ("torch.abs(x)", "elementwise", "any"),
    "Clamp": ("torch.clamp(x, min=-clip, max=clip)", "elementwise", "any"),
}
_SCALARS = {"negative_slope": 0.01, "alpha": 1.0, "clip": 0.5}


def _unary(name: str) -> Callable[..., TaskSpec]:
    expr, family, domain = _UNARY[name]

    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        rank = rng.choice((2, 2, 3, 4))
        if rank == 2:
            dims = {"batch_size": sz.n((16, 32), (17, 31)), "dim": sz.n((1024, 4096), (1023, 4097, 1000))}
        elif rank == 3:
            dims = {"batch_size": sz.n(8, 7), "seq_len": sz.n((64, 128), (63, 129)), "dim": sz.n(256, (255, 257))}
        else:
            dims = {"batch_size": sz.n(4, 3), "channels": sz.n(16, 15), "height": sz.n(32, 31), "width": sz.n(32, 33)}
        scalars = {k: v for k, v in _SCALARS.items() if k in expr}
        return TaskSpec(
            name=name, family=family, kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
            doc=f"Applies {name} elementwise to a rank-{rank} tensor.",
            constants={**dims, **scalars}, forward_lines=[f"return {expr}"],
            input_lines=[_input("x", list(dims), dt, variant, domain), "return [x]"],
            ops=[name.lower()],
        )

    return build


_BINARY = {  # name: (expression, family, domain of y)
    "Add": ("x + y", "elementwise", "any"),
    "Mul": ("x * y", "elementwise", "any"),
    "Sub": ("x - y", "elementwise", "any"),
    "Div": ("x / y", "elementwise", "positive"),
    "Maximum": ("torch.maximum(x, y)", "elementwise", "any"),
    "Minimum": ("torch.minimum(x, y)", "elementwise", "any"),
    "Where": ("torch.where(x > 0, x, y)", "elementwise", "any"),
    "Addcmul": ("torch.addcmul(x, x, y, value=0.5)", "elementwise", "any"),
}


def _binary(name: str) -> Callable[..., TaskSpec]:
    expr, family, domain = _BINARY[name]

    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        dims = {"batch_size": sz.n((16, 32), (17, 33)), "dim": sz.n((1024, 2048), (1023, 2047, 1000))}
        x_dims = list(dims)
        if variant == "broadcast":
            y_dims = rng.choice((["1", "dim"], ["batch_size", "1"], ["dim"]))
        else:
            y_dims = x_dims
        return TaskSpec(
            name=name, family="broadcast" if variant == "broadcast" else family, kind="catalogue", variant=variant,
            dtype=DTYPE_NAMES[dt], doc=f"{name} of two tensors.", constants=dims, forward_args=["x", "y"],
            forward_lines=[f"return {expr}"],
            input_lines=[_input("x", x_dims, dt, variant), _input("y", y_dims, dt, "base" if variant == "broadcast"
                                                                  else variant, domain), "return [x, y]"],
            ops=[name.lower()],
        )

    return build


# ---------------------------------------------------------------------------------------------------- reductions
_REDUCE = {  # name: (expression with `dim`, family)
    "Sum": ("torch.sum(x, dim=reduce_dim)", "reduction"),
    "Mean": ("torch.mean(x, dim=reduce_dim)", "reduction"),
    "Max": ("torch.amax(x, dim=reduce_dim)", "reduction"),
    "Min": ("torch.amin(x, dim=reduce_dim)", "reduction"),
    "Argmax": ("torch.argmax(x, dim=reduce_dim)", "reduction"),
    "Argmin": ("torch.argmin(x, dim=reduce_dim)", "reduction"),
    "LogSumExp": ("torch.logsumexp(x, dim=reduce_dim)", "reduction"),
    "L2Norm": ("torch.linalg.vector_norm(x, dim=reduce_dim)", "reduction"),
    "Var": ("torch.var(x, dim=reduce_dim)", "reduction"),
    "Std": ("torch.std(x, dim=reduce_dim)", "reduction"),
    "CumSum": ("torch.cumsum(x, dim=reduce_dim)", "scan"),
    "Softmax": ("torch.softmax(x, dim=reduce_dim)", "softmax"),
    "LogSoftmax": ("torch.log_softmax(x, dim=reduce_dim)", "softmax"),
}


def _reduce(name: str) -> Callable[..., TaskSpec]:
    expr, family = _REDUCE[name]

    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        dims = {"batch_size": sz.n(16, 15), "dim1": sz.n((256, 512), (255, 513)), "dim2": sz.n((256, 128), (257, 129))}
        rd = rng.choice((1, 2, -1)) if family != "softmax" else rng.choice((1, -1, -1))
        return TaskSpec(
            name=name, family=family, kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
            doc=f"{name} over dimension {rd} of a rank-3 tensor.",
            constants={**dims, "reduce_dim": rd}, init_args=[], forward_lines=[f"return {expr}"],
            input_lines=[_input("x", list(dims), dt, variant), "return [x]"],
            ops=[name.lower()],
        )

    return build


# ---------------------------------------------------------------------------------------------------- normalisation
def _norm(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        d = DTYPES[dt]
        if kind in ("LayerNorm", "RMSNorm", "L2Normalize"):
            dims = {"batch_size": sz.n(16, 15), "seq_len": sz.n(64, 63), "hidden": sz.n((512, 768), (511, 769))}
            init, init_args = [], ["hidden"]
            if kind == "LayerNorm":
                init = [f"self.norm = nn.LayerNorm(hidden, dtype={d})"]
                fwd = ["return self.norm(x)"]
            elif kind == "RMSNorm":
                dims["eps"] = 1e-6
                init = [f"self.weight = nn.Parameter(torch.ones(hidden, dtype={d}) + 0.1 * torch.randn(hidden, dtype={d}))",
                        "self.eps = eps"]
                init_args = ["hidden", "eps"]
                fwd = ["rms = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + self.eps)",
                       "return (x.float() * rms).to(x.dtype) * self.weight"]
            else:
                init_args = []
                fwd = ["return F.normalize(x, p=2.0, dim=-1)"]
        else:
            dims = {"batch_size": sz.n(8, 7), "channels": sz.n(32, 30), "height": sz.n(32, 31), "width": sz.n(32, 33)}
            if kind == "GroupNorm":
                dims["num_groups"] = sz.n(8, 5, fixed=True) if variant == "odd" else 8
                init = [f"self.norm = nn.GroupNorm(num_groups, channels, dtype={d})"]
                init_args = ["num_groups", "channels"]
            elif kind == "BatchNorm2d":
                init = [f"self.norm = nn.BatchNorm2d(channels, dtype={d})"]
                init_args = ["channels"]
            else:
                init = [f"self.norm = nn.InstanceNorm2d(channels, affine=True, dtype={d})"]
                init_args = ["channels"]
            fwd = ["return self.norm(x)"]
        return TaskSpec(
            name=kind, family="normalization", kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
            doc=f"{kind} of the input.", constants=dims, init_args=init_args, init_lines=init, forward_lines=fwd,
            input_lines=[_input("x", [k for k in dims if k not in ("eps", "num_groups")], dt, variant), "return [x]"],
            ops=[kind.lower()],
        )

    return build


# ---------------------------------------------------------------------------------------------------- GEMM
def _gemm(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        d = DTYPES[dt]
        M, K, N = sz.n((128, 256), (127, 129, 255)), sz.n((256, 512), (257, 511, 200)), sz.n((128, 256), (63, 129, 255))
        init, init_args, fargs = [], [], ["A", "B"]
        if kind == "Matmul":
            consts = {"M": M, "K": K, "N": N}
            fwd = ["return torch.matmul(A, B)"]
            inputs = [_input("A", ["M", "K"], dt, variant), _input("B", ["K", "N"], dt, "base"), "return [A, B]"]
        elif kind == "MatmulTransposedA":
            consts = {"M": M, "K": K, "N": N}
            fwd = ["return torch.matmul(A.T, B)"]
            inputs = [_input("A", ["K", "M"], dt, "base"), _input("B", ["K", "N"], dt, variant), "return [A, B]"]
        elif kind == "BatchedMatmul":
            consts = {"batch_size": sz.n(8, 7), "M": M // 2 or 1, "K": K // 2 or 1, "N": N // 2 or 1}
            fwd = ["return torch.bmm(A, B)"]
            inputs = [_input("A", ["batch_size", "M", "K"], dt, variant), _input("B", ["batch_size", "K", "N"], dt, "base"),
                      "return [A, B]"]
        elif kind == "MatVec":
            consts = {"M": M * 8, "K": K * 4}
            fwd = ["return torch.matmul(A, B)"]
            inputs = [_input("A", ["M", "K"], dt, variant), _input("B", ["K", "1"], dt, "base"), "return [A, B]"]
        elif kind == "Linear":
            consts = {"batch_size": M, "in_features": K, "out_features": N}
            init = [f"self.linear = nn.Linear(in_features, out_features, dtype={d})"]
            init_args, fargs = ["in_features", "out_features"], ["x"]
            fwd = ["return self.linear(x)"]
            inputs = [_input("x", ["batch_size", "in_features"], dt, variant), "return [x]"]
        elif kind == "TensorMatmul3D":
            consts = {"batch_size": sz.n(4, 3), "M": M // 2 or 1, "K": K, "N": N}
            fwd = ["return torch.matmul(A, B)"]
            inputs = [_input("A", ["batch_size", "M", "K"], dt, variant), _input("B", ["K", "N"], dt, "base"),
                      "return [A, B]"]
        else:  # lower-triangular product
            consts = {"N": N}
            fwd = ["return torch.tril(torch.matmul(A, B))"]
            inputs = [_input("A", ["N", "N"], dt, variant), _input("B", ["N", "N"], dt, "base"),
                      "A = torch.tril(A)", "B = torch.tril(B)", "return [A, B]"]
        return TaskSpec(name=kind, family="gemm", kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
                        doc=f"{kind}.", constants=consts, init_args=init_args, init_lines=init, forward_args=fargs,
                        forward_lines=fwd, input_lines=inputs, ops=[kind.lower()])

    return build


# ---------------------------------------------------------------------------------------------------- conv / pool
def _conv(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        d = DTYPES[dt]
        k = rng.choice((1, 3, 5)) if kind != "Conv3d" else 3
        stride = rng.choice((1, 1, 2))
        pad = k // 2 if rng.random() < 0.7 else 0
        cin, cout = sz.n((8, 16), (3, 7, 13)), sz.n((16, 32), (15, 17))
        consts = {"batch_size": sz.n(4, 3), "in_channels": cin, "out_channels": cout, "kernel_size": k,
                  "stride": stride, "padding": pad}
        if kind == "Conv1d":
            consts["length"] = sz.n(256, 255)
            spatial = ["length"]
        elif kind == "Conv3d":
            consts.update(depth=sz.n(8, 7), height=sz.n(16, 15), width=sz.n(16, 17))
            spatial = ["depth", "height", "width"]
        else:
            consts.update(height=sz.n(32, 31), width=sz.n(32, 33))
            spatial = ["height", "width"]
        args = "in_channels, out_channels, kernel_size, stride=stride, padding=padding"
        if kind == "DepthwiseConv2d":
            consts["out_channels"] = cin
            ctor = f"nn.Conv2d({args}, groups=in_channels, bias=False, dtype={d})"
        elif kind == "ConvTranspose2d":
            ctor = f"nn.ConvTranspose2d({args}, dtype={d})"
        else:
            ctor = f"nn.{kind}({args}, dtype={d})"
        return TaskSpec(
            name=kind, family="conv", kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
            doc=f"{kind}, kernel {k}, stride {stride}, padding {pad}.", constants=consts,
            init_args=["in_channels", "out_channels", "kernel_size", "stride", "padding"], init_lines=[f"self.conv = {ctor}"],
            forward_lines=["return self.conv(x)"],
            input_lines=[_input("x", ["batch_size", "in_channels", *spatial], dt, variant), "return [x]"],
            ops=[kind.lower()],
        )

    return build


def _pool(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        consts = {"batch_size": sz.n(8, 7), "channels": sz.n(16, 15), "height": sz.n(64, 63), "width": sz.n(64, 65)}
        if kind == "MaxPool2d":
            consts.update(kernel_size=rng.choice((2, 3)), stride=2)
            fwd = "F.max_pool2d(x, kernel_size, stride=stride)"
        elif kind == "AvgPool2d":
            consts.update(kernel_size=rng.choice((2, 3)), stride=rng.choice((1, 2)))
            fwd = "F.avg_pool2d(x, kernel_size, stride=stride)"
        elif kind == "AdaptiveAvgPool2d":
            consts.update(output_size=rng.choice((1, 4, 7)))
            fwd = "F.adaptive_avg_pool2d(x, output_size)"
        else:
            consts = {"batch_size": consts["batch_size"], "channels": consts["channels"], "length": sz.n(512, 511),
                      "kernel_size": rng.choice((2, 3, 4)), "stride": rng.choice((1, 2))}
            fwd = "F.max_pool1d(x, kernel_size, stride=stride)"
        dims = [k for k in ("batch_size", "channels", "height", "width", "length") if k in consts]
        return TaskSpec(name=kind, family="pooling", kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
                        doc=f"{kind}.", constants=consts, forward_lines=[f"return {fwd}"],
                        input_lines=[_input("x", dims, dt, variant), "return [x]"], ops=[kind.lower()])

    return build


# ---------------------------------------------------------------------------------------------------- indexing, losses
def _indexing(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        consts = {"batch_size": sz.n(64, 63), "dim": sz.n(1024, 1023)}
        x = _input("x", ["batch_size", "dim"], dt, variant)
        init, init_args, fargs = [], [], ["x", "index"]
        if kind == "Gather":
            consts["num_index"] = sz.n(256, 255)
            fwd = "torch.gather(x, 1, index)"
            inputs = [x, "index = torch.randint(0, dim, (batch_size, num_index))", "return [x, index]"]
        elif kind == "IndexSelect":
            consts["num_index"] = sz.n(32, 31)
            fwd = "torch.index_select(x, 0, index)"
            inputs = [x, "index = torch.randint(0, batch_size, (num_index,))", "return [x, index]"]
        elif kind == "Embedding":
            consts = {"num_embeddings": sz.n(1000, 999), "embedding_dim": sz.n(128, 127), "batch_size": sz.n(16, 15),
                      "seq_len": sz.n(64, 63)}
            init = ["self.embedding = nn.Embedding(num_embeddings, embedding_dim)"]
            init_args, fargs = ["num_embeddings", "embedding_dim"], ["index"]
            fwd = "self.embedding(index)"
            inputs = ["index = torch.randint(0, num_embeddings, (batch_size, seq_len))", "return [index]"]
        elif kind == "MaskedFill":
            fwd = "x.masked_fill(index, 0.0)"
            inputs = [x, "index = torch.rand(batch_size, dim) < 0.3", "return [x, index]"]
        else:  # ScatterAdd into a smaller table: sums per bucket
            consts["num_buckets"] = sz.n(128, 127)
            fwd = "torch.zeros(x.shape[0], num_buckets, dtype=x.dtype).scatter_add(1, index, x)"
            inputs = [x, "index = torch.randint(0, num_buckets, (batch_size, dim))", "return [x, index]"]
        return TaskSpec(name=kind, family="indexing", kind="catalogue", variant=variant, dtype=DTYPE_NAMES[dt],
                        doc=f"{kind}.", constants=consts, init_args=init_args, init_lines=init, forward_args=fargs,
                        forward_lines=[f"return {fwd}"], input_lines=inputs, ops=[kind.lower()])

    return build


def _loss(kind: str) -> Callable[..., TaskSpec]:
    def build(rng: random.Random, sz: Sizes, variant: str, dt: str) -> TaskSpec:
        consts = {"batch_size": sz.n(128, 127), "dim": sz.n(1024, 1023)}
        fargs = ["predictions", "targets"]
        pred = _input("predictions", ["batch_size", "dim"], dt, variant)
        if kind == "CrossEntropy":
            fwd = "F.cross_entropy(predictions, targets)"
            tgt = "targets = torch.randint(0, dim, (batch_size,))"
        elif kind == "KLDiv":
            pred = "predictions = torch.log_softmax(torch.randn(batch_size, dim), dim=-1)"
            fwd = "F.kl_div(predictions, targets, reduction='batchmean')"
            tgt = "targets = torch.softmax(torch.randn(batch_size, dim), dim=-1)"
        elif kind == "CosineSimilarityLoss":
            fwd = "torch.mean(1 - F.cosine_similarity(predictions, targets, dim=1))"
            tgt = "targets = torch.randn(batch_size, dim)"
        elif kind == "Hinge":
            fwd = "torch.mean(torch.clamp(1 - predictions * targets, min=0))"
            tgt = "targets = torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1"
        else:
            fwd = {"MSE": "F.mse_loss(predictions, targets)", "SmoothL1": "F.smooth_l1_loss(predictions, targets)",
                   "L1": "F.l1_loss(predictions, targets)"}[kind]
            tgt = "targets = torch.randn(batch_size, dim)"
        return TaskSpec(name=kind + "Loss" if not kind.endswith("Loss") else kind, family="loss", kind="catalogue",
                        variant=variant, dtype=DTYPE_NAMES[dt], doc=f"{kind} loss.", constants=consts,
                        forward_args=fargs, forward_lines=[f"return {fwd}"],
                        input_lines=[pred, tgt, "return [predictions, targets]"], ops=[kind.lower()])

    return build


def _entries() -> list[Entry]:
    ew = ("base", "odd", "noncontig", "fp16", "bf16")
    out: list[Entry] = [Entry(n, _UNARY[n][1], _unary(n), ew) for n in _UNARY]
    out += [Entry(n, _BINARY[n][1], _binary(n), ("base", "odd", "noncontig", "broadcast", "fp16", "bf16"))
            for n in _BINARY]
    out += [Entry(n, _REDUCE[n][1], _reduce(n), ew) for n in _REDUCE]
    out += [Entry(n, "normalization", _norm(n), ("base", "odd", "noncontig", "bf16"))
            for n in ("LayerNorm", "RMSNorm", "L2Normalize", "GroupNorm", "BatchNorm2d", "InstanceNorm2d")]
    out += [Entry(n, "gemm", _gemm(n), ("base", "odd", "noncontig", "bf16", "fp16"))
            for n in ("Matmul", "MatmulTransposedA", "BatchedMatmul", "MatVec", "Linear", "TensorMatmul3D",
                      "LowerTriangularMatmul")]
    out += [Entry(n, "conv", _conv(n), ("base", "odd", "noncontig", "bf16"))
            for n in ("Conv1d", "Conv2d", "Conv3d", "DepthwiseConv2d", "ConvTranspose2d")]
    out += [Entry(n, "pooling", _pool(n), ("base", "odd", "noncontig"))
            for n in ("MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "MaxPool1d")]
    out += [Entry(n, "indexing", _indexing(n), ("base", "odd"))
            for n in ("Gather", "IndexSelect", "Embedding", "MaskedFill", "ScatterAdd")]
    out += [Entry(n, "loss", _loss(n), ("base", "odd"))
            for n in ("MSE", "SmoothL1", "L1", "CrossEntropy", "KLDiv", "CosineSimilarityLoss", "Hinge")]
    return out


CATALOGUE: tuple[Entry, ...] = tuple(_entries())
FAMILIES: tuple[str, ...] = tuple(sorted({e.family for e in CATALOGUE} | {"broadcast"}))


def catalogue_task(rng: random.Random, scale: float = 1.0, families: set[str] | None = None) -> TaskSpec:
    """One catalogue candidate: an entry (restricted to `families` when given), one of its variants, sizes."""
    entries = [e for e in CATALOGUE if not families or e.family in families
               or ("broadcast" in families and "broadcast" in e.variants)]
    if not entries:
        raise ValueError(f"no catalogue entry in families {sorted(families or [])}; known: {', '.join(FAMILIES)}")
    entry = rng.choice(entries)
    variants = entry.variants
    if families and entry.family not in families:  # chosen for its broadcast variant
        variants = ("broadcast",)
    variant = rng.choice(variants)
    dt = variant if variant in HALF else "fp32"
    return entry.build(rng, Sizes(rng, variant, scale), variant, dt)
