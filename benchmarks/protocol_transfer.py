"""Seconds to move one output tensor from a worker process to the trusted process over a pipe: the protocol's raw
tensor path against the whole message as one `torch.save` payload (what the protocol did before), same run.

    python benchmarks/protocol_transfer.py --sizes-mb 1,16,64,256 --repeats 5 --json protocol.json

Each size is sent `--repeats` times per mode by a forked sender; modes alternate, and the median is reported.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from musacoder.judge import protocol


def _send_pickled(fd: int, obj) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getbuffer()
    protocol._write_all(fd, protocol._HEADER.pack(len(data)))
    protocol._write_all(fd, data)


def _recv_pickled(fd: int):
    (n,) = protocol._HEADER.unpack(protocol._read_exact(fd, protocol._HEADER.size))
    return torch.load(io.BytesIO(protocol._read_exact(fd, n)), weights_only=True, map_location="cpu")


MODES = {"torch.save payload": (_send_pickled, _recv_pickled), "raw tensors": (protocol.send, protocol.recv)}


def one(mode: str, mb: float, repeats: int) -> list[float]:
    send, recv = MODES[mode]
    x = torch.randn(int(mb * (1 << 20)) // 4)
    r, w = os.pipe()
    protocol.widen_pipe(r)
    protocol.widen_pipe(w)
    pid = os.fork()
    if pid == 0:  # the sender stands in for the worker
        os.close(r)
        for _ in range(repeats):
            send(w, {"ok": True, "outputs": {0: x}, "report": {"launches": 1}})
        os._exit(0)
    os.close(w)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = recv(r)
        out.append(time.perf_counter() - t0)
        assert got["outputs"][0].shape == x.shape
    os.waitpid(pid, 0)
    os.close(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="1,16,64,256")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="modes alternate this many times per size")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    rows = []
    for mb in [float(s) for s in a.sizes_mb.split(",")]:
        got: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(a.rounds):
            for m in MODES:
                got[m] += one(m, mb, a.repeats)
        med = {m: statistics.median(v) for m, v in got.items()}
        rows.append({"mb": mb, **{f"{m} s": round(v, 4) for m, v in med.items()},
                     "speedup": round(med["torch.save payload"] / med["raw tensors"], 2)})
        print(f"  {mb:7.1f} MB  torch.save {med['torch.save payload']:.4f} s  raw {med['raw tensors']:.4f} s", flush=True)
    print("\n| output MB | torch.save payload s | raw tensors s | speedup |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['mb']:g} | {r['torch.save payload s']:.4f} | {r['raw tensors s']:.4f} | {r['speedup']:.2f}× |")
    if a.json:
        a.json.write_text(json.dumps({"host": platform.node(), "cpus": os.cpu_count(), "torch": torch.__version__,
                                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
