"""Structure signature of a task: the aten ops its reference runs, with shapes reduced to ranks and relations.

`trace_ops` runs `Model` on its inputs on the meta device (no memory, no arithmetic: KernelBench's largest tasks
trace in milliseconds) under a dispatch mode that records every aten op with the shapes of its tensor arguments and
results. `signature_tokens` then normalises each op to two tokens:

* coarse: the op's name (in-place and view variants folded: `relu_` → `relu`, `_unsafe_view`/`reshape` → `view`)
  and the ranks of its tensors, e.g. `addmm|1,2,2>2`;
* fine: the same with every size replaced by a symbol given in order of first appearance over the whole trace
  (size 1 stays `1`), e.g. `addmm|c;a,b;b,c>a,c`: which dims are equal to which, not how large they are.

Similarity (`structure_similarity`) averages the Jaccard indices of the 1-, 2- and 3-gram sets of both token streams,
so the same program at other sizes scores at least 0.5 and the same program with the same size relations 1.0.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

MAX_OPS = 512  # a trace is cut here (recurrent models unroll to thousands of ops; the prefix is signature enough)
DROP = frozenset({"detach", "alias", "lift_fresh", "lift_fresh_copy", "_has_compatible_shallow_copy_type",
                  "is_same_size", "_local_scalar_dense", "empty", "empty_like", "empty_strided"})
FOLD = {"_unsafe_view": "view", "reshape": "view", "flatten": "view", "unsqueeze": "view", "squeeze": "view",
        "_reshape_alias": "view", "t": "permute", "transpose": "permute", "clone": "copy", "contiguous": "copy",
        "copy": "copy", "_to_copy": "cast", "expand": "expand", "as_strided": "view"}


@dataclass(frozen=True)
class OpRecord:
    op: str
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]


class _Cut(Exception):
    pass


def _shapes(obj) -> list[tuple[int, ...]]:
    import torch

    out = []
    if isinstance(obj, torch.Tensor):
        out.append(tuple(int(s) for s in obj.shape))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            out.extend(_shapes(x))
    elif isinstance(obj, dict):
        for x in obj.values():
            out.extend(_shapes(x))
    return out


def trace_ops(source: str, max_ops: int = MAX_OPS) -> list[OpRecord] | None:
    """The aten ops of one forward of the task's `Model` on meta tensors, or None when the task cannot be traced
    that way (its module fails to import, it reads tensor values with `.item()`, it makes CPU tensors in forward …).
    Executes the task's code: for trusted task folders only."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from musacoder.tasks import load_module, task_from_source

    records: list[OpRecord] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            records.append(OpRecord(func.overloadpacket.__name__, tuple(_shapes([args, kwargs or {}])),
                                    tuple(_shapes(out))))
            if len(records) >= max_ops:
                raise _Cut
            return out

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = load_module(task_from_source(source, "traced"), "musacoder_traced_task")
            with torch.device("meta"):
                torch.manual_seed(0)
                model = module.Model(*module.get_init_inputs())
                inputs = module.get_inputs()
            with torch.no_grad(), Recorder():
                model(*inputs)
    except _Cut:
        pass
    except BaseException as e:  # noqa: BLE001 - anything a foreign task raises means "not traceable"
        if isinstance(e, KeyboardInterrupt):
            raise
        return None
    return records


def _name(op: str) -> str:
    op = op.rstrip("_") if not op.startswith("_") else op
    return FOLD.get(op, op)


def signature_tokens(records: list[OpRecord]) -> tuple[list[str], list[str]]:
    """(coarse, fine) token streams of a trace (pure; see the module docstring)."""
    symbols: dict[int, str] = {}

    def sym(n: int) -> str:
        if n == 1:
            return "1"
        if n not in symbols:
            symbols[n] = _symbol(len(symbols))
        return symbols[n]

    coarse, fine = [], []
    for r in records:
        name = _name(r.op)
        if name in DROP:
            continue
        ranks_in = ",".join(str(len(s)) for s in r.inputs)
        ranks_out = ",".join(str(len(s)) for s in r.outputs)
        coarse.append(f"{name}|{ranks_in}>{ranks_out}")
        shapes_in = ";".join(",".join(sym(d) for d in s) for s in r.inputs)
        shapes_out = ";".join(",".join(sym(d) for d in s) for s in r.outputs)
        fine.append(f"{name}|{shapes_in}>{shapes_out}")
    return coarse, fine


def _symbol(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return s


def ngram_set(tokens: list[str], ns: tuple[int, ...] = (1, 2, 3)) -> frozenset[tuple[str, ...]]:
    """All n-grams (n in `ns`) of the stream framed by `^` and `$`, so a one-op trace still has 2- and 3-grams."""
    framed = ["^", *tokens, "$"]
    return frozenset(tuple(framed[i:i + n]) for n in ns for i in range(len(framed) - n + 1))


@dataclass(frozen=True)
class Signature:
    coarse: frozenset
    fine: frozenset
    n_ops: int


def signature(records: list[OpRecord]) -> Signature:
    coarse, fine = signature_tokens(records)
    return Signature(ngram_set(coarse), ngram_set(fine), len(coarse))


def structure_similarity(a: Signature, b: Signature) -> float:
    """(J(coarse_a, coarse_b) + J(fine_a, fine_b)) / 2 with J the Jaccard index of the n-gram sets."""
    from musacoder.data.textsim import jaccard

    return 0.5 * (jaccard(a.coarse, b.coarse) + jaccard(a.fine, b.fine))
