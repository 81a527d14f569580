"""Length-prefixed messages between the trusted process and a candidate worker.

Messages are `torch.save` payloads. The trusted side always reads with `torch.load(weights_only=True)`, which only
rebuilds plain tensors and builtin containers: a worker (or code inside it) cannot make the trusted process run code
by sending a crafted pickle, and a tensor subclass cannot cross the boundary.
"""

from __future__ import annotations

import io
import os
import struct

import torch

_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 64 << 30


class ChannelClosed(EOFError):
    pass


PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a 1 MiB pipe buffer (Linux; the default 64 KiB makes a large output thousands of syscalls)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError):
        pass


def _read_exact(fd: int, n: int) -> memoryview:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if not k:
            raise ChannelClosed("peer closed the channel")
        got += k
    return view


def _write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, obj) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getbuffer()
    _write_all(fd, _HEADER.pack(len(data)))
    _write_all(fd, data)


def recv(fd: int):
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes exceeds the limit")
    return torch.load(io.BytesIO(_read_exact(fd, n)), weights_only=True, map_location="cpu")
