"""Inputs for correctness trials and timing rounds, reproducible from a seed in both processes.

`make_inputs(module, seed, perturb)` calls the task's `get_inputs()` under `torch.manual_seed(seed)`, then reshapes
the distribution of every floating input x according to `perturb` (drawn from a second stream seeded by `seed`):

* `None`: the task's own distribution (timing's where the task's domain forbids "center", or
  `VerifyConfig.timing_inputs` is "task");
* `"scale"`: x·exp(0.5·z), z ~ N(0, 1): signs (and so positivity constraints) kept, values no longer uniform, so a
  partial reduction tuned to uniform inputs fails;
* `"center"`: x − mean(x): zero-mean inputs (what timing uses by default), where results are sums that cancel. A
  partial or subsampled reduction then misses by the order of the result itself, and rounding the inputs to a 10-bit
  mantissa (fp16, bf16, TF32 math) moves the output hundreds of times more than fp32 arithmetic does, which the
  precision rule (`musacoder.judge.compare.precision_check`) relies on;
* `"slice"`: centred, then one contiguous run of n/16 elements at a random position (in flat order) gets
  +8·std(x): skipping or approximating any part of the input changes the output beyond tolerance.

A task whose domain forbids a perturbation (the reference output is not finite) gets the plain inputs instead; the
trusted side decides that and tells the worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading

import torch

PERTURBATIONS = (None, "scale", "center", "slice")

# torch's default generator is process-global: verifications running in parallel threads must not interleave
# "seed, then draw", or two of them would draw from each other's streams and disagree with their workers.
_RNG_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int, device: str | torch.device = "cpu"):
    """Run a block on torch's default generators seeded with `seed` (the CPU's, and `device`'s when it is a GPU),
    restoring their states afterwards (thread-safe)."""
    dev = torch.device(device)
    with _RNG_LOCK:
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [], device_type="cuda"):
            torch.manual_seed(seed)
            yield


def _perturbed(x: torch.Tensor, mode: str, g: torch.Generator) -> torch.Tensor:
    if mode == "scale":
        z = torch.randn(x.shape, generator=g, dtype=torch.float32, device=x.device).to(x.dtype)
        return x * torch.exp(0.5 * z)
    x = x - x.mean(dtype=torch.float32).to(x.dtype)  # no float32 copy of a half-precision input
    if mode == "slice" and x.numel():
        n = x.numel()
        length = max(1, n // 16)
        start = int(torch.randint(0, n - length + 1, (1,), generator=g, device=x.device))
        flat = x.reshape(-1)  # x is a fresh tensor here: offset one run in place
        flat[start:start + length] += 8.0 * float(x.float().std()) if n > 1 else 8.0
    return x


def make_inputs(module, seed: int, perturb: str | bool | None = None, device: str | torch.device = "cpu") -> list:
    """The task's inputs for `seed`, created on `device` (`get_inputs()` runs under it as the default device, so a GPU
    draws them with its own generator: fast, and the same in every process on that kind of GPU), reshaped by
    `perturb` (one of `PERTURBATIONS`; `True` means `"scale"`)."""
    mode = "scale" if perturb is True else (perturb or None)
    if mode not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {perturb!r}; choose one of {PERTURBATIONS}")
    dev = torch.device(device)
    with seeded(seed, dev), dev:
        inputs = list(module.get_inputs())
        if mode is None:
            return inputs
        gens: dict = {}
        for k, x in enumerate(inputs):  # replaced one at a time: an original is freed before the next is perturbed
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                g = gens.get(x.device)
                if g is None:
                    g = gens[x.device] = torch.Generator(device=x.device).manual_seed(seed ^ 0x5DEECE66D)
                del x
                inputs[k] = _perturbed(inputs[k], mode, g)
        return inputs


def make_init_inputs(module, seed: int) -> list:
    with seeded(seed):
        return list(module.get_init_inputs())


def map_tensors(fn, obj, leaves: tuple[type, ...] = (torch.Tensor,)):
    """`obj` with `fn` applied to every tensor in it (every instance of `leaves`), through nested lists and tuples
    (their types kept)."""
    if isinstance(obj, leaves):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(fn, x, leaves) for x in obj)
    return obj


def to_device(obj, device: str):
    """Clone every tensor onto `device` (the candidate always gets its own copies); a `HostTensor` comes back whole."""
    return map_tensors(lambda t: t.to_device(device) if isinstance(t, HostTensor)
                       else t.detach().to(device=device, copy=True), obj, (torch.Tensor, HostTensor))


def to_cpu(obj):
    return map_tensors(lambda t: t.detach().to("cpu", copy=True), obj)


# torch's page-locked host allocator hands out power-of-two blocks: a tensor kept there is split into chunks of
# exactly this many bytes (and one smaller last chunk), so a 2.1 GB output takes 2.1 GB of it rather than 4
HOST_CHUNK_BYTES = 64 << 20


class HostTensor:
    """A contiguous tensor kept in host memory as byte chunks (`to_host`), page-locked where asked: from there it goes
    back to a GPU at the link's speed, 51 GiB/s against 8-9 GiB/s from pageable memory on an H100
    (docs/benchmarks.md, *The host link*), by direct transfers rather than through the driver's staging buffer that a
    process's pageable copies share. `dtype` and `shape` are the tensor's."""

    __slots__ = ("chunks", "dtype", "shape")

    def __init__(self, chunks: tuple, dtype: torch.dtype, shape: tuple):
        self.chunks, self.dtype, self.shape = chunks, dtype, shape

    @classmethod
    def empty(cls, shape: tuple, dtype: torch.dtype, pinned: bool) -> "HostTensor":
        """Fresh chunks for a contiguous tensor of `shape` and `dtype` (page-locked with `pinned`, where they can be
        had), to be filled by `write`."""
        size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        return cls(tuple(_host_bytes(min(HOST_CHUNK_BYTES, size - at), pinned)
                         for at in range(0, size, HOST_CHUNK_BYTES)), dtype, tuple(shape))

    def write(self, at: int, t: torch.Tensor) -> None:
        """Copy `t` (of this dtype, any device) into the elements from flat index `at` on: a device tensor goes
        straight into the chunks, without a pageable copy between."""
        if t.dtype != self.dtype:
            raise ValueError(f"write of a {t.dtype} tensor into a {self.dtype} one")
        src = t.detach().reshape(-1).view(torch.uint8)
        first = at * t.element_size()
        done = 0
        for i, c in enumerate(self.chunks):
            start = i * HOST_CHUNK_BYTES  # every chunk but the last holds exactly HOST_CHUNK_BYTES
            lo, hi = max(first, start), min(first + src.numel(), start + c.numel())
            if lo < hi:
                c[lo - start:hi - start].copy_(src[lo - first:hi - first])
                done += hi - lo
        if done != src.numel():
            raise ValueError(f"write of {src.numel()} bytes at element {at} runs past a {self.nbytes}-byte tensor")

    @property
    def nbytes(self) -> int:
        return sum(c.numel() for c in self.chunks)

    def to_device(self, device) -> torch.Tensor:
        out = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        at = 0
        for c in self.chunks:
            out[at:at + c.numel()].copy_(c)
            at += c.numel()
        return out.view(self.dtype).view(self.shape)


def _host_bytes(n: int, pinned: bool) -> torch.Tensor:
    """`n` bytes of host memory, page-locked with `pinned` (pageable where page-locked memory cannot be had)."""
    try:
        return torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
    except RuntimeError:  # no page-locked memory to be had
        return torch.empty(n, dtype=torch.uint8)


def to_host(obj, pinned: bool):
    """Every tensor of `obj` copied to the host, each contiguous one as a `HostTensor` in page-locked chunks with
    `pinned` (pageable where page-locked memory cannot be had), the others as `to_cpu` copies them."""
    def one(t: torch.Tensor):
        t = t.detach()
        if not (t.is_contiguous() and t.numel()):
            return t.to("cpu", copy=True)
        try:
            t.view(-1).view(torch.uint8)
        except RuntimeError:  # a dtype without a byte view
            return t.to("cpu", copy=True)
        kept = HostTensor.empty(tuple(t.shape), t.dtype, pinned)
        kept.write(0, t)
        return kept

    return map_tensors(one, obj)


def spec_tensors(spec) -> list[tuple[tuple, torch.dtype]]:
    """The (shape, dtype) of every tensor an `output_spec` describes, in order (none for malformed parts)."""
    kind = spec[0] if isinstance(spec, (list, tuple)) and spec else None
    if kind == "seq" and len(spec) > 1 and isinstance(spec[1], (list, tuple)):
        return [t for s in spec[1] for t in spec_tensors(s)]
    if kind == "tensor" and len(spec) > 2 and isinstance(getattr(torch, str(spec[2]), None), torch.dtype):
        return [(tuple(int(d) for d in spec[1]), getattr(torch, str(spec[2])))]
    return []


def spec_bytes(spec) -> int:
    """Bytes of the tensors an `output_spec` describes."""
    return sum(math.prod(shape) * torch.empty((), dtype=dt).element_size() for shape, dt in spec_tensors(spec))


def reserve_host(spec, copies: int) -> int:
    """Page-lock host memory for `copies` kept copies of outputs like `spec` (the chunks `to_host` will ask for, all
    at once, then dropped): torch's host allocator keeps freed page-locked blocks, so later `to_host` calls of these
    sizes take them back instead of page-locking fresh memory (2-2.8 GiB/s on an H100, docs/benchmarks.md, *The host
    link*). Returns the bytes page-locked (0 where page-locked memory cannot be had)."""
    held = [HostTensor.empty(shape, dt, pinned=True) for _ in range(copies) for shape, dt in spec_tensors(spec)
            if math.prod(shape)]
    return sum(c.numel() for h in held for c in h.chunks if c.is_pinned())


def output_spec(obj):
    """What a reference returned, for a worker to check a candidate's outputs against before it touches them:
    `["tensor", shape, dtype]` per tensor, `["seq", [spec, ...]]` per list or tuple, `["value", type name]` otherwise.
    Shapes and dtypes only (nothing a candidate could not work out from the task)."""
    if isinstance(obj, torch.Tensor):
        return ["tensor", list(obj.shape), str(obj.dtype).removeprefix("torch.")]
    if isinstance(obj, (list, tuple)):
        return ["seq", [output_spec(x) for x in obj]]
    return ["value", type(obj).__name__]


# In timing rounds (inputs from other seeds than the spec's) a tensor may differ in shape from the spec, as a task
# whose output shape depends on its values would, but not hold more than 1/SHAPE_SLACK more elements than the spec's
# (plus 1 Mi): room for such variation, while the copy the harness keeps of a checked round's output stays within
# the memory it budgets for one output (a view of stride 0 can claim a terabyte).
SHAPE_SLACK = 8


def output_problem(out, spec=None, exact: bool = True, where: str = "output") -> str | None:
    """Why a candidate's outputs `out` cannot be the reference's (`spec`, from `output_spec`), or None. Checked in the
    worker before any copy: the outputs are objects of the candidate's making, and copying a view of stride 0 that
    claims a terabyte, or rebuilding a tuple type of its own, would fail in the verifier's code, not the candidate's.
    Always: only plain `torch.Tensor`s (no subclass, no meta or sparse tensor) and builtin lists and tuples. With a
    spec: the same structure, dtypes and shapes (`exact`), or shapes of the same rank holding at most 1/`SHAPE_SLACK`
    more elements (not `exact`: timing rounds, whose inputs are not the spec's)."""
    if isinstance(out, torch.Tensor):
        if type(out) is not torch.Tensor:
            return f"forward returned a tensor subclass ({type(out).__name__}); return plain torch.Tensor outputs"
        if out.is_meta:
            return "forward returned a meta tensor (no data)"
        if out.layout != torch.strided or out.is_quantized or out.is_nested:
            return f"{where}: forward returned a {out.layout} tensor; return dense (strided) tensors"
    elif isinstance(out, (list, tuple)) and type(out) not in (list, tuple):
        return f"{where}: forward returned type {type(out).__name__}; return tensors, or a plain tuple or list of them"
    if spec is None:
        if isinstance(out, (list, tuple)):
            return next((p for i, x in enumerate(out) if (p := output_problem(x, None, exact, f"{where}[{i}]"))), None)
        return None
    kind = spec[0] if isinstance(spec, (list, tuple)) and spec else None
    if kind == "seq":
        if type(out) not in (list, tuple) or len(out) != len(spec[1]):
            return f"{where}: expected a sequence of {len(spec[1])} outputs, got {_kind(out)}"
        return next((p for i, (x, s) in enumerate(zip(out, spec[1]))
                     if (p := output_problem(x, s, exact, f"{where}[{i}]"))), None)
    if kind == "tensor":
        if not isinstance(out, torch.Tensor):
            return f"{where}: expected a tensor, got {_kind(out)}"
        shape, dtype = list(spec[1]), spec[2]
        if str(out.dtype).removeprefix("torch.") != dtype:
            return f"{where}: dtype {str(out.dtype).removeprefix('torch.')}, expected {dtype}"
        if exact and list(out.shape) != shape:
            return f"{where}: shape {list(out.shape)}, expected {shape}"
        expected = math.prod(shape)
        if out.dim() != len(shape) or out.numel() > expected + expected // SHAPE_SLACK + (1 << 20):
            return f"{where}: shape {list(out.shape)}, expected one like {shape}"
        return None
    if isinstance(out, (torch.Tensor, list, tuple)):  # the reference returned a plain value here
        return f"{where}: expected a {spec[1] if kind == 'value' else 'value'}, got {_kind(out)}"
    return None


def _kind(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {list(x.shape)}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)}"
    return f"a {type(x).__name__}"


def nbytes(obj) -> int:
    """Bytes held by the tensors in a (nested) list or tuple."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, HostTensor):
        return obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(x) for x in obj)
    return 0


def seed_for(master: int, *parts: int) -> int:
    """A derived 63-bit seed: BLAKE2b of the master and the parts. One-way, so a seed a candidate can read where it
    runs (`torch.initial_seed()` after the harness seeded its constructor, say) tells it nothing about the master,
    from which the trial plan, the timing schedule and every other trial's inputs are derived."""
    data = b"".join((int(p) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little") for p in (master, *parts))
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=b"musacoder-seed").digest(), "little") \
        & 0x7FFFFFFFFFFFFFFF
