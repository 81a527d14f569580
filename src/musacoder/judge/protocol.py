"""Length-prefixed messages between the trusted process and a candidate worker.

A message is a header followed by the raw bytes of its tensors:

    u64 header length | header | tensor 0 bytes | tensor 1 bytes | ...

The header is a `torch.save` payload of `{"obj": skeleton, "tensors": [(dtype, shape), ...]}`, where the skeleton is
the message with each plain, strided CPU tensor replaced by `{TENSOR_KEY: index}`. The trusted side reads the header
with `torch.load(weights_only=True)`, which only rebuilds builtin containers (and tensors, for any that were not sent
raw): a worker, or code inside it, cannot make the trusted process run code with a crafted pickle, and a tensor
subclass cannot cross the boundary. Each raw tensor is read straight into a fresh `torch.empty` of the declared
dtype (a real `torch.dtype`, nothing else) and shape, after checking the sizes against `MAX_MESSAGE`. A placeholder
forged by the worker can only stand for a tensor the worker could have sent anyway.

Raw tensors skip `torch.save`'s zip archive and its CRC-32 and the extra copies on both sides: a 64 MB output crossed a
pipe in 0.28 s before, and in about a sixth of that now (docs/benchmarks.md, *Protocol transfer*).
"""

from __future__ import annotations

import io
import os
import select
import struct
import time

import torch

_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 64 << 30  # all of a message, its raw tensors included
MAX_HEADER = 256 << 20  # the header alone (tensors normally travel raw, after it)
TENSOR_KEY = "__musacoder_tensor__"
# Every request carries a fresh random key under this name, and every message the worker sends during it (its reply,
# a build request) must carry the same key. Candidate native code can write to the worker's reply pipe; a message it
# forges ahead of the harness's (an `infra_error`, which carries no reward, or a timing reply of its own) does not
# know the key, and the trusted side ends the verification as `crashed` (`sandbox.Sandbox.request`).
REPLY_KEY = "reply_key"


class ChannelClosed(EOFError):
    pass


class ChannelTimeout(TimeoutError):
    """The peer did not finish a message before the deadline (e.g. it wrote a header and stopped)."""


PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a 1 MiB pipe buffer (Linux; the default 64 KiB makes a large output thousands of syscalls)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError):
        pass


def _read_into(fd: int, view: memoryview, deadline: float | None) -> None:
    got, n = 0, len(view)
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout(f"message not finished in time ({got} of {n} bytes read)")
        k = os.readv(fd, [view[got:]])
        if not k:
            raise ChannelClosed("peer closed the channel")
        got += k


def _read_exact(fd: int, n: int, deadline: float | None = None) -> memoryview:
    view = memoryview(bytearray(n))
    _read_into(fd, view, deadline)
    return view


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


# bound when this module is imported, before any candidate code: a candidate worker takes `Tensor.numpy` away from
# candidate code (`musacoder.judge.worker`), not from the protocol
_TENSOR_NUMPY = torch.Tensor.numpy
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction


def _raw_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy. Torch-function handling is off meanwhile: under a
    `TorchFunctionMode` (the musa shim's device mode) a tensor method reaches the mode as the class's current
    attribute, which in a sealed worker is the refusal, not the `Tensor.numpy` bound here."""
    if t.numel() == 0:
        return memoryview(b"")
    with _NO_TORCH_FUNCTION():
        return memoryview(_TENSOR_NUMPY(t.reshape(-1).view(torch.uint8)))


def _sendable_raw(x) -> bool:
    return type(x) is torch.Tensor and x.device.type == "cpu" and x.layout == torch.strided and not x.is_quantized


def _split(obj, tensors: list):
    """The message with each raw-sendable tensor replaced by a placeholder (collected into `tensors`)."""
    if _sendable_raw(obj):
        try:
            t = obj.detach().resolve_conj().resolve_neg().contiguous()
            _raw_bytes(t)  # a dtype numpy cannot view as bytes stays inside the header
        except (TypeError, RuntimeError):
            return obj
        tensors.append(t)
        return {TENSOR_KEY: len(tensors) - 1}
    if type(obj) is dict:
        return {k: _split(v, tensors) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_split(v, tensors) for v in obj)
    return obj


def _join(obj, tensors: list):
    if type(obj) is dict:
        if len(obj) == 1 and TENSOR_KEY in obj:
            i = obj[TENSOR_KEY]
            if type(i) is not int or not 0 <= i < len(tensors):
                raise ValueError(f"bad tensor placeholder {i!r}")
            return tensors[i]
        return {k: _join(v, tensors) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_join(v, tensors) for v in obj)
    return obj


def send(fd: int, obj) -> None:
    tensors: list[torch.Tensor] = []
    skeleton = _split(obj, tensors)
    buf = io.BytesIO()
    torch.save({"obj": skeleton, "tensors": [(str(t.dtype).removeprefix("torch."), list(t.shape)) for t in tensors]},
               buf)
    head = buf.getbuffer()
    _write_all(fd, _HEADER.pack(len(head)))
    _write_all(fd, head)
    for t in tensors:
        _write_all(fd, _raw_bytes(t))


def _empty_for(spec, budget: int) -> tuple[torch.Tensor, int]:
    """A fresh tensor for one (dtype name, shape) entry of a header, after checking it; returns it and its bytes."""
    if not (isinstance(spec, (list, tuple)) and len(spec) == 2 and isinstance(spec[0], str)
            and isinstance(spec[1], (list, tuple)) and all(type(d) is int and d >= 0 for d in spec[1])):
        raise ValueError(f"bad tensor entry {spec!r}")
    dtype = getattr(torch, spec[0], None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {spec[0]!r}")
    numel = 1
    for d in spec[1]:
        numel *= d
    nbytes = numel * dtype.itemsize
    if nbytes > budget:
        raise ValueError(f"message exceeds the limit of {MAX_MESSAGE} bytes")
    return torch.empty(list(spec[1]), dtype=dtype), nbytes


def recv(fd: int, deadline: float | None = None):
    """One message; `deadline` (a `time.monotonic()` value) bounds the wait for all of its bytes."""
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if n > MAX_HEADER:
        raise ValueError(f"message header of {n} bytes exceeds the limit of {MAX_HEADER}")
    head = torch.load(io.BytesIO(_read_exact(fd, n, deadline)), weights_only=True, map_location="cpu")
    if not (isinstance(head, dict) and isinstance(head.get("tensors"), list) and "obj" in head):
        raise ValueError("malformed message header")
    tensors, budget = [], MAX_MESSAGE - n
    for spec in head["tensors"]:
        t, nbytes = _empty_for(spec, budget)
        budget -= nbytes
        _read_into(fd, _raw_bytes(t), deadline)
        tensors.append(t)
    return _join(head["obj"], tensors)
