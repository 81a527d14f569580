"""Operator families of a task: its reference profiled with `torch.profiler` (on the meta device, else the CPU),
each aten op mapped to a family, and the task labelled by the most demanding family it uses.

Families: gemm, conv, reduction, normalization, softmax, elementwise (elementwise math and activations), broadcast
(an elementwise binary op whose operands differ in shape), indexing (gather/scatter/index/select/sort/cumulative),
pooling, other. Layout and allocation ops (`view`, `empty`, `copy_`, …) belong to no family. A task's `family` is
the first family in `PRIORITY` that it uses: a Linear → GELU → sum task is `gemm`, a softmax over a sum is
`softmax`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

FAMILIES: tuple[str, ...] = ("gemm", "conv", "reduction", "normalization", "softmax", "elementwise", "broadcast",
                             "indexing", "pooling", "other")
# most demanding first: the family that decides a task's label
PRIORITY: tuple[str, ...] = ("conv", "gemm", "normalization", "softmax", "pooling", "indexing", "reduction",
                             "broadcast", "elementwise", "other")

_LAYOUT = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
           "view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided", "expand", "expand_as", "permute",
           "transpose", "t", "contiguous", "clone", "copy_", "to", "_to_copy", "detach", "alias", "lift_fresh",
           "squeeze", "unsqueeze", "flatten", "unflatten", "slice", "split", "chunk", "unbind", "narrow",
           "resize_", "fill", "zero", "copy", "lift", "result_type", "item", "_local_scalar_dense", "size",
           "stride", "numel",
           "arange", "broadcast_to", "_has_compatible_shallow_copy_type", "set_", "random_", "normal_", "uniform_",
           "rand", "randn", "randint", "dropout", "feature_dropout", "is_nonzero", "cat", "stack", "pad",
           "constant_pad_nd", "repeat", "tile"}
_GEMM = {"mm", "bmm", "addmm", "addmv", "mv", "matmul", "linear", "baddbmm", "addbmm", "dot", "vdot", "einsum",
         "_addmm_activation", "outer", "ger", "tensordot", "bilinear", "_trilinear", "scaled_dot_product_attention",
         "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math", "lstm", "gru",
         "rnn_tanh", "rnn_relu", "_thnn_fused_lstm_cell", "mkldnn_rnn_layer"}
_CONV = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "mkldnn_convolution", "_slow_conv2d_forward", "slow_conv3d_forward",
         "slow_conv_transpose2d", "slow_conv_transpose3d", "_nnpack_spatial_convolution", "slow_conv_dilated2d",
         "slow_conv_dilated3d", "_mkldnn_convolution_transpose", "mkldnn_convolution_transpose",
         "convolution_overrideable", "thnn_conv2d"}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "std", "var",
              "std_mean", "var_mean", "logsumexp", "argmax", "argmin", "all", "any", "count_nonzero", "nansum",
              "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
              "cross_entropy_loss", "nll_loss", "nll_loss_forward", "nll_loss2d_forward", "cosine_similarity",
              "hinge_embedding_loss", "triplet_margin_loss", "margin_ranking_loss", "soft_margin_loss",
              "cosine_embedding_loss", "pairwise_distance", "cdist", "_cdist_forward", "frobenius_norm", "aminmax"}
_NORM = {"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "batch_norm", "native_batch_norm",
         "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "_batch_norm_impl_index",
         "instance_norm", "rms_norm", "_fused_rms_norm", "local_response_norm", "normalize",
         "_batch_norm_with_update", "_batch_norm_no_update"}
_SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "softmin", "gumbel_softmax"}
_POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
         "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
         "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
         "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "mkldnn_max_pool2d",
         "mkldnn_adaptive_avg_pool2d", "lp_pool1d", "lp_pool2d", "fractional_max_pool2d", "pixel_shuffle",
         "pixel_unshuffle", "upsample_nearest2d", "upsample_bilinear2d", "_upsample_bilinear2d_aa"}
_INDEXING = {"index", "index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add",
             "index_put", "index_put_", "_index_put_impl_", "index_copy", "masked_fill", "masked_select",
             "masked_scatter", "take", "take_along_dim", "embedding", "embedding_bag", "_embedding_bag", "one_hot",
             "nonzero", "where", "sort", "argsort", "topk", "kthvalue", "cumsum", "cumprod", "cummax", "cummin",
             "logcumsumexp", "_logcumsumexp", "flip", "roll", "tril", "triu", "diag", "diagonal", "diag_embed",
             "unfold", "im2col", "col2im", "searchsorted", "bucketize", "histc", "unique", "_unique2",
             "index_fill", "select_scatter", "slice_scatter", "repeat_interleave"}
# binary elementwise ops: a "broadcast" op when the two operand shapes differ
_BINARY = {"add", "sub", "mul", "div", "rsub", "pow", "maximum", "minimum", "fmod", "remainder", "atan2", "eq",
           "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "bitwise_and", "hypot", "lerp", "addcmul",
           "addcdiv", "copysign", "floor_divide", "xlogy", "where", "fmax", "fmin"}


def aten_name(event_name: str) -> str:
    """`aten::add_` → `add`; `aten::_softmax.out` → `_softmax`."""
    name = event_name.split("::", 1)[-1].split(".", 1)[0]
    return name[:-1] if name.endswith("_") and not name.startswith("_") and name[:-1] else name


def op_family(op: str, shapes: Sequence[Sequence[int]] | None = None) -> str | None:
    """The family of one aten op (`aten_name` form), or None for layout and allocation ops. `shapes` are the op's
    tensor operand shapes (what the profiler records); a binary elementwise op on two non-scalar operands of
    different shapes is `broadcast`."""
    if op in _LAYOUT or op.startswith(("_assert", "_cast", "_to", "resolve_", "_reshape", "_unsafe", "empty")):
        return None
    for table, family in ((_CONV, "conv"), (_GEMM, "gemm"), (_NORM, "normalization"), (_SOFTMAX, "softmax"),
                          (_POOL, "pooling"), (_REDUCTION, "reduction"), (_INDEXING, "indexing")):
        if op in table:
            return family
    if op in _BINARY and shapes:
        dims = [tuple(s) for s in shapes if s]  # scalars record an empty shape
        if len(dims) >= 2 and len(set(dims)) > 1:
            return "broadcast"
    if op.startswith(("conv", "cudnn_conv", "mkldnn_conv")):
        return "conv"
    if "pool" in op:
        return "pooling"
    if "norm" in op:
        return "normalization"
    if op.startswith(("_foreach", "_fused")):
        return "other"
    return "elementwise"


def task_family(op_families: Iterable[str]) -> str:
    """The label of a task using these families: the first of `PRIORITY` present (`other` when none is)."""
    present = set(op_families)
    return next((f for f in PRIORITY if f in present), "other")


def profile_ops(task, *, warmup: int = 1, device: str | None = None,
                max_real_elements: int = 1 << 24) -> list[tuple[str, list[list[int]]]]:
    """The aten ops (name, operand shapes) of one forward of the task's reference, outermost ops only (an
    `aten::linear` is counted, not the `aten::addmm` it calls). Runs the task's code in this process: on the `meta`
    device first (shapes only: no memory, no arithmetic, any size), on the CPU when an op has no meta kernel
    (`.item()`, data-dependent shapes) and its inputs hold at most `max_real_elements` (else ValueError).
    `device` forces one of them."""
    if device is None:
        try:
            return profile_ops(task, warmup=0, device="meta")
        except Exception as e:  # noqa: BLE001 - no meta kernel somewhere: run it for real, if it is small
            n = _input_elements(task)
            if n > max_real_elements:
                raise ValueError(f"{task.key}: an op has no meta kernel ({type(e).__name__}: {str(e)[:200]}) and its "
                                 f"inputs hold {n} elements (> {max_real_elements}) to run on the CPU; profile a "
                                 "smaller copy of the task") from e
            return profile_ops(task, warmup=warmup, device="cpu")
    import torch
    from torch.profiler import ProfilerActivity, profile

    from musacoder.tasks import load_module

    module = load_module(task, module_name=f"musacoder_profile_{abs(hash(task.key))}")
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = list(module.get_inputs())
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(*inputs)
    out = []
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:  # outermost: what the reference asked for, not how aten implements it
            out.append((aten_name(e.name), _shapes(e)))
    return out


def _input_elements(task) -> int:
    import torch

    from musacoder.tasks import load_module

    module = load_module(task, module_name=f"musacoder_profile_n_{abs(hash(task.key))}")
    with torch.device("meta"):
        inputs = list(module.get_inputs())
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def _shapes(event) -> list[list[int]]:
    return [list(s) for s in (event.input_shapes or []) if isinstance(s, (list, tuple))]


def families_of(ops: Iterable[tuple[str, Sequence[Sequence[int]]]]) -> Counter:
    """Counts of families over profiled ops (layout ops left out)."""
    return Counter(f for op, shapes in ops if (f := op_family(op, shapes)) is not None)
