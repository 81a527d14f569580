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


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 24))
        if not b:
            raise ChannelClosed("peer closed the channel")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def send(fd: int, obj) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def recv(fd: int):
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes exceeds the limit")
    return torch.load(io.BytesIO(_read_exact(fd, n)), weights_only=True, map_location="cpu")
