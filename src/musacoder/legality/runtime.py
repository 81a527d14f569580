"""Runtime legality: which operators ran inside the candidate's forward, read from `torch.profiler` events.

Every registered operator is judged, whatever its namespace: `aten::` ops against the whitelist, and those of any
other namespace (`mkldnn::`, `mkl::`, `quantized::`, `prims::`, oneDNN's, c10d's …: whole layers, GEMMs and
convolutions PyTorch registers outside ATen) are never plumbing, so they are illegal.
Only the *outermost* operator of each call chain is judged (whitelisted composites such as `empty_like` dispatch into
internals like `empty_strided`, which are fine); an op called from inside the candidate's C++ wrapper is seen too,
nested under the `musacoder::ext::<fn>` range the build hook opens, and reported as coming from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The paper's anti-fallback whitelist, plus the aliases and casts PyTorch dispatches for the same plumbing.
PAPER_WHITELIST = {
    "_local_scalar_dense", "item", "alias", "allclose", "equal", "arange", "as_strided", "stride", "broadcast_to",
    "expand", "flatten", "reshape", "view", "permute", "transpose", "select", "slice", "squeeze", "unsqueeze",
    "clone", "contiguous", "copy_", "empty", "empty_like", "full", "ones", "zeros", "rand", "randint", "randn",
}
PLUMBING_EXTRAS = {
    "empty_strided", "_to_copy", "to", "_reshape_alias", "_unsafe_view", "view_as", "expand_as", "t", "numpy_T",
    "detach", "lift_fresh", "resolve_conj", "resolve_neg", "new_empty", "new_empty_strided", "new_zeros", "new_ones",
    "new_full", "zeros_like", "ones_like", "full_like", "fill_", "zero_", "unflatten", "split", "chunk", "unbind",
    "narrow", "movedim", "type_as", "size", "sym_size", "sym_stride", "sym_numel", "numel", "dim", "is_contiguous",
    "squeeze_", "unsqueeze_", "as_strided_", "_has_compatible_shallow_copy_type", "set_", "result_type",
    "is_nonzero", "split_with_sizes", "lift_fresh_copy", "scalar_tensor", "view_as_real", "view_as_complex",
    "resize_", "uniform_", "normal_", "random_", "record_stream", "empty_permuted", "_empty_affine_quantized",
    "contiguous", "expand_copy", "reshape_as", "align_to", "requires_grad_", "detach_",
}
# Ops allowed on a tensor of a tensor's sizes only (`torch.prod(torch.tensor(x.shape))`): their recorded input is
# one dimension of at most MAX_SIZES_TENSOR elements (a tensor's rank). Without recorded shapes they stay illegal.
SIZE_ARITHMETIC = {"aten::prod"}
MAX_SIZES_TENSOR = 8
ALLOWED_ATEN = PAPER_WHITELIST | PLUMBING_EXTRAS
ALLOWED_PREFIXES = ("_assert_", "_cast_")
EXT_RANGE = "musacoder::ext::"
FORWARD_RANGE = "musacoder::candidate_forward"  # the worker's range around each profiled forward call
# Kernel names of vendor libraries (policy switch `allow_vendor_libs`, strict by default).
VENDOR_KERNEL = re.compile(r"cublas|cudnn|cutlass_80|sm\d+_xmma|nvjet|gemv2|gemmk|ampere_sgemm|volta_sgemm|magma", re.I)


def own_kernels(kernels: list[str], defs: list[str]) -> list[str]:
    """The device kernels (profiler names: demangled signatures such as `void relu_kernel<256>(float const*, …)`, or
    bare names) that are the candidate's own `defs`: the name must stand as the kernel's function name, not as a
    part of another (a kernel named `k` is not `elementwise_kernel`), optionally with Triton's specialisation
    suffix (`_0d1d2de`), and not inside PyTorch's namespaces (a kernel named like one of ATen's is not the
    candidate's when ATen's ran)."""
    out = []
    for k in kernels:
        for name in defs:
            m = re.search(r"(?<![\w:])((?:\w+::|\(anonymous namespace\)::)*)" + re.escape(name) + r"(?:_\d\w*)?(?!\w)",
                          k)
            if m and not m.group(1).startswith(("at::", "c10::", "cub::", "thrust::", "cutlass::")):
                out.append(k)
                break
    return out


# Operator namespaces besides `aten` (those of the dispatcher's registry are added at run time, `_op_namespaces`);
# `musacoder` holds the harness's own ranges, `profiler` the record-function ops behind them (neither is reachable
# from candidate code)
OTHER_OP_NAMESPACES = {"prims", "prim", "quantized", "_quantized", "mkldnn", "mkldnn_prepacked", "mkl", "onednn",
                       "c10d", "_c10d_functional", "_c10d_functional_autograd", "sparse", "inductor", "xnnpack",
                       "prepacked", "fbgemm", "symm_mem", "torchvision", "torchaudio", "_native", "static_runtime"}
NOT_OPERATORS = {"musacoder", "profiler"}
_registry: frozenset[str] | None = None


def _op_namespaces() -> frozenset[str]:
    """The namespaces of every operator the dispatcher has registered (read once: ATen's, oneDNN's, MKL's …)."""
    global _registry
    if _registry is None:
        try:
            import torch

            _registry = frozenset(n.split("::")[0] for n in torch._C._dispatch_get_all_op_names())
        except Exception:  # noqa: BLE001 - an older torch without the call: the fixed list alone
            _registry = frozenset()
    return _registry


def is_operator(name: str) -> bool:
    """Whether a profiler event is a dispatcher operator (`ns::op`), not a range, a runtime call or a kernel."""
    ns, sep, rest = name.partition("::")
    if not sep or not rest or ns in NOT_OPERATORS or not ns.isidentifier():
        return False
    return ns == "aten" or ns in OTHER_OP_NAMESPACES or ns in _op_namespaces()


def aten_allowed(op: str) -> bool:
    name = op.removeprefix("aten::")
    return name in ALLOWED_ATEN or name.startswith(ALLOWED_PREFIXES)


@dataclass
class RuntimeReport:
    illegal_ops: list[str] = field(default_factory=list)  # "aten::mm (from extension function fn)"
    all_ops: list[str] = field(default_factory=list)
    device_kernels: list[str] = field(default_factory=list)
    device_time_ms: float = 0.0  # summed duration of the GPU kernels seen (all streams)
    python_op_counts: dict[str, int] = field(default_factory=dict)  # outermost aten ops issued from Python


# Plumbing is a handful of calls per forward; thousands of element reads/writes from Python are the output being
# computed in Python, with a decoy kernel called beside it.
MAX_SCALAR_READS = 64
MAX_PYTHON_OPS = 2048


def python_compute_violations(python_op_counts: dict[str, int]) -> list[str]:
    reads = sum(n for op, n in python_op_counts.items() if op in ("aten::item", "aten::_local_scalar_dense"))
    total = sum(python_op_counts.values())
    out = []
    if reads > MAX_SCALAR_READS:
        out.append(f"forward read {reads} tensor elements into Python (.item()); compute must happen in your kernels")
    if total > MAX_PYTHON_OPS:
        out.append(f"forward issued {total} PyTorch plumbing ops from Python in one call (element-wise Python "
                   "computation); compute must happen in your kernels")
    return out


def _size_arithmetic(ev) -> bool:
    """An op of `SIZE_ARITHMETIC` on a one-dimensional input of a tensor's rank at most, with no device kernel."""
    shapes = getattr(ev, "input_shapes", None) or []
    return ev.name in SIZE_ARITHMETIC and bool(shapes) and len(shapes[0]) == 1 \
        and shapes[0][0] <= MAX_SIZES_TENSOR and not getattr(ev, "kernels", None)


def _ancestors(ev):
    p = ev.cpu_parent
    while p is not None:
        yield p
        p = p.cpu_parent


def analyse_events(events) -> RuntimeReport:
    """Judge profiler `FunctionEvent`s recorded around one candidate forward call."""
    rep = RuntimeReport()
    seen = set()
    events = list(events)
    # the thread that called forward (the harness's range around the call); ops recorded on any other thread were
    # run by the candidate's native code there (an OpenMP region, a thread it started), under the profiler's
    # all-threads option
    caller = next((getattr(ev, "thread", None) for ev in events if ev.name == FORWARD_RANGE), None)
    for ev in events:
        name = ev.name
        # device kernels: CUDA's, or MUSA's (torch_musa records them as the PrivateUse1 device)
        if getattr(ev, "device_type", None) is not None and str(ev.device_type).endswith(("CUDA", "PrivateUse1")):
            if getattr(ev, "is_user_annotation", False):
                continue  # a record_function range mirrored on the GPU timeline (it spans the kernels inside it)
            rep.device_kernels.append(name)
            rep.device_time_ms += ev.time_range.elapsed_us() / 1000.0
            continue
        if not is_operator(name):
            continue
        anc = list(_ancestors(ev))
        if any(is_operator(a.name) for a in anc):
            continue  # nested inside another operator: judged through its outermost one
        rep.all_ops.append(name)
        ext = next((a.name[len(EXT_RANGE):] for a in anc if a.name.startswith(EXT_RANGE)), None)
        other = caller is not None and getattr(ev, "thread", caller) != caller
        if ext is None and not other:
            rep.python_op_counts[name] = rep.python_op_counts.get(name, 0) + 1
        if name.startswith("aten::") and aten_allowed(name) or _size_arithmetic(ev):
            continue
        if other:
            where = "called on another thread by the candidate's native code (an OpenMP region or a thread it started)"
        else:
            where = f"called from inside extension function {ext} (C++)" if ext else "called from Python in forward"
        label = f"{name} ({where})"
        if label not in seen:
            seen.add(label)
            rep.illegal_ops.append(label)
    return rep
