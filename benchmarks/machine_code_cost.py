"""What the machine-code rule (`musacoder.legality.machine_code.library_clock_reads`) costs per library, alone and
beside busy Python threads, as in a verifier whose other verifications run their stages in threads of the same
process (`verify-batch`, the service).

    python benchmarks/machine_code_cost.py --libraries DIR [--busy 0,4] [--limit 3] [--repeats 1] [--json F]

Reads up to --limit built extensions (`mc_ext_*.so`) under DIR (a build cache: `$MUSACODER_CACHE_DIR`, or
`~/.cache/musacoder`), each with its CPU code and, where it has one, its GPU code, with the rule's results cache
cleared before each read. `--busy N` runs N threads of pure-Python work meanwhile (each holds the interpreter's lock
for its switch interval at a time). Prints seconds per library (median over the libraries) and the split between
CPU and GPU code, and writes the rows to --json. To compare two versions of the rule, run the same command with
PYTHONPATH pointing at each tree's `src`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path


def _busy(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x += i * i


def _read(lib: Path) -> tuple[float, dict]:
    from musacoder.legality import machine_code as mc

    for f in ("_host_clock_reads", "_library_clock_reads"):
        getattr(mc, f).cache_clear()
    seconds: dict = {}
    t0 = time.perf_counter()
    try:
        mc.library_clock_reads(lib, seconds=seconds)
    except TypeError:  # a version of the rule without the split
        mc.library_clock_reads(lib)
    return time.perf_counter() - t0, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--libraries", type=Path, default=Path.home() / ".cache" / "musacoder")
    ap.add_argument("--busy", default="0,4", help="comma list of busy-thread counts")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1, help="read each library this many times")
    ap.add_argument("--json", type=Path, default=Path("machine_code_cost.json"))
    args = ap.parse_args()
    libs = sorted(args.libraries.rglob("mc_ext_*.so"))[: args.limit] * max(1, args.repeats)
    if not libs:
        print(f"no built extension (mc_ext_*.so) under {args.libraries}: build one first (musacoder verify)",
              file=sys.stderr)
        return 2
    rows = []
    print(f"{'busy threads':>12} {'library':28} {'s':>7} {'cpu_code':>9} {'gpu_code':>9}")
    for n in [int(b) for b in args.busy.split(",")]:
        stop = threading.Event()
        threads = [threading.Thread(target=_busy, args=(stop,), daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        try:
            for lib in libs:
                s, parts = _read(lib)
                rows.append({"busy": n, "library": lib.name, "bytes": lib.stat().st_size, "s": round(s, 3),
                             **{k: round(x, 3) for k, x in parts.items()}})
                print(f"{n:>12} {lib.name[:28]:28} {s:7.2f} {parts.get('cpu_code', float('nan')):9.2f} "
                      f"{parts.get('gpu_code', float('nan')):9.2f}", flush=True)
        finally:
            stop.set()
            for t in threads:
                t.join()
    for n in sorted({r["busy"] for r in rows}):
        print(f"busy {n}: median {statistics.median(r['s'] for r in rows if r['busy'] == n):.2f} s per library")
    args.json.write_text(json.dumps({"libraries": [str(p) for p in libs], "rows": rows}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
