"""The host link as the verifier uses it: how fast a GPU tensor goes to host memory and back, pageable and page-locked.

    python benchmarks/host_link.py --sizes-gib 0.5,2,6 --repeats 3 --json host_link.json      # needs a GPU

The task cache keeps a trial's reference case in host memory (page-locked chunks where it is compared on a GPU,
`inputs.to_host`; pageable before) and copies it back to the comparison GPU for each later candidate;
`correctness.worth_keeping` keeps a case only where computing it again takes longer than its bytes take over the
link at `correctness.HOST_LINK_BYTES_S`. The worker keeps large timed outputs in page-locked memory
(`worker.timing_ops._to_host`). Per size this measures, each the median of --repeats:

- `d2h pageable fresh`: into a new pageable tensor (its pages fault in during the copy), as the cache kept a case;
- `d2h pageable reused`: into a pageable tensor written before;
- `d2h pinned fresh`: a new page-locked tensor and the copy into it (torch's host allocator emptied first, so the
  page locking is paid), as the worker's first kept output;
- `d2h pinned reused`: into a page-locked tensor written before;
- `h2d pageable`, `h2d pinned`: back to the GPU;
- `d2h pinned chunks fresh`, `h2d pinned chunks`: the same in page-locked 64 MiB chunks (`inputs.to_host`, torch's
  host allocator emptied first), as the task cache keeps a case on a GPU host and a worker a large kept output.

Prints a table (seconds, GiB/s) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _timed(fn, sync) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def measure(size_gib: float, repeats: int, device: str = "cuda:0") -> list[dict]:
    import torch

    from musacoder.judge.inputs import to_host

    n = int(size_gib * 2**30) // 4
    sync = torch.cuda.synchronize
    gpu = torch.rand(n, device=device)
    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds)

    pageable = torch.empty(n)
    pageable.fill_(0.0)  # its pages in
    pinned = torch.empty(n, pin_memory=True)
    for _ in range(repeats):
        fresh: list = []
        add("d2h pageable fresh", _timed(lambda: fresh.append(gpu.to("cpu")), sync))
        del fresh
        add("d2h pageable reused", _timed(lambda: pageable.copy_(gpu), sync))
        if hasattr(torch._C, "_host_emptyCache"):
            torch._C._host_emptyCache()
        got: list = []
        add("d2h pinned fresh", _timed(lambda: got.append(torch.empty(n, pin_memory=True).copy_(gpu)), sync))
        del got
        add("d2h pinned reused", _timed(lambda: pinned.copy_(gpu), sync))
        if hasattr(torch._C, "_host_emptyCache"):
            torch._C._host_emptyCache()
        kept: list = []
        add("d2h pinned chunks fresh", _timed(lambda: kept.append(to_host(gpu, pinned=True)), sync))
        add("h2d pinned chunks", _timed(lambda: kept[0].to_device(device), sync))
        del kept
        add("h2d pageable", _timed(lambda: gpu.copy_(pageable), sync))
        add("h2d pinned", _timed(lambda: gpu.copy_(pinned), sync))
    nbytes = n * 4
    del gpu, pageable, pinned
    if hasattr(torch._C, "_host_emptyCache"):
        torch._C._host_emptyCache()
    return [{"op": op, "gib": round(nbytes / 2**30, 3), "seconds": round(statistics.median(xs), 4),
             "gib_s": round(nbytes / 2**30 / statistics.median(xs), 2), "all_s": [round(x, 4) for x in xs]}
            for op, xs in rows.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-gib", default="0.5,2,6", help="tensor sizes in GiB, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("host_link.py measures a GPU's host link: no CUDA GPU is visible here")
    sizes = [float(s) for s in a.sizes_gib.split(",") if s.strip()]
    out = []
    for s in sizes:
        out += measure(s, a.repeats, a.device)
    print(f"| op | GiB | seconds (median of {a.repeats}) | GiB/s |")
    print("|---|---|---|---|")
    for r in out:
        print(f"| {r['op']} | {r['gib']} | {r['seconds']} | {r['gib_s']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(a.device), "torch": torch.__version__, "rows": out}, f,
                      indent=1)


if __name__ == "__main__":
    main()
