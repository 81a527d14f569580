"""Where a timed CUDA region's excess over the profiler's kernel time comes from (a diagnosis, GPU only).

    python benchmarks/timer_probe.py --rounds 40 --json probe.json [--cpu-load 16]

For one memory-bound kernel (ReLU, ~0.2 ms on an H200) and one compute-bound one (fp32 GEMM, a few ms), each round
is timed three ways, with the verifier's own timed region (`musacoder.judge.timing.cuda_region`: pre-roll spin, start
event, call, an event on the calling stream, whole-device synchronise, end event):
  * `device`: start event to the end event recorded after the whole-device synchronise, less the median empty region
    (what the verifier reported before its round-trip rule);
  * `stream`: start event to the event on the calling stream (no host round trip in it; what it reports now, plus
    any device time beyond the round trip, see `RoundTrip`);
  * `profiler`: the kernel's duration as the profiler reports it, in separate rounds with the same L2 flush.
The L2 flush before each round is done three ways: writing a 256 MB buffer (`zero`, leaves dirty lines in L2 that
the kernel must write back), reading it (`read`, clean lines), or not at all (`none`). With --cpu-load N, N busy
processes run beside it (host wake-up latency under load). Prints a table (µs above the profiler's median) and writes
JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path


def _busy(stop):
    while not stop.is_set():
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--cpu-load", type=int, default=0, help="busy processes beside the timing (0: none)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import torch

    from musacoder.judge.timing import cuda_region as _cuda_region
    from musacoder.legality.runtime import analyse_events

    stop = mp.Event()
    hogs = [mp.Process(target=_busy, args=(stop,), daemon=True) for _ in range(a.cpu_load)]
    for p in hogs:
        p.start()
    dev = torch.device("cuda")
    x = torch.randn(100_000_000, device=dev)  # 400 MB in, 400 MB out
    m = torch.randn(4096, 4096, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    kernels = {"relu_0.2ms": lambda: torch.relu(x), "gemm_fp32_4096": lambda: m @ m}
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    flushes = {"zero": lambda: scratch.zero_(), "read": lambda: scratch.max(), "none": lambda: None}

    def region(fn, flush):
        flush()
        t, _ = _cuda_region(torch, fn, ())
        return t.device_ms, t.stream_ms

    def profiled(fn, flush):
        flush()
        torch.cuda.synchronize()
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            fn()
            torch.cuda.synchronize()
        return analyse_events(prof.events()).device_time_ms  # the verifier's own reading of the profiler

    rows = []
    for kname, fn in kernels.items():
        for _ in range(5):
            fn()
        for fname, flush in flushes.items():
            dev_ms, stream_ms, empty_ms, prof_ms = [], [], [], []
            for _ in range(a.rounds):
                d, s = region(fn, flush)
                dev_ms.append(d)
                stream_ms.append(s)
                empty_ms.append(_cuda_region(torch, lambda: None, ())[0].device_ms)
            for _ in range(max(5, a.rounds // 4)):
                prof_ms.append(profiled(fn, flush))
            p = statistics.median(prof_ms)
            over = statistics.median(empty_ms)
            devs = [d - over for d in dev_ms]
            rows.append({"kernel": kname, "flush": fname, "cpu_load": a.cpu_load, "profiler_ms": p, "empty_region_ms": over,
                         "device_ms": statistics.median(devs), "stream_ms": statistics.median(stream_ms),
                         "device_excess_us": 1e3 * (statistics.median(devs) - p),
                         "stream_excess_us": 1e3 * (statistics.median(stream_ms) - p),
                         "device_minus_stream_us_p10_p50_p90": [1e3 * q for q in statistics.quantiles(
                             [d - s for d, s in zip(dev_ms, stream_ms)], n=10)[::4]],
                         "device_spread_us": 1e3 * (max(devs) - min(devs))})
            time.sleep(0.05)
    stop.set()
    print("\n| kernel | flush | CPU load | profiler ms | empty region µs | device − profiler µs | stream − profiler µs | "
          "device − stream µs p10/p50/p90 |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = "/".join(f"{v:.1f}" for v in r["device_minus_stream_us_p10_p50_p90"])
        print(f"| {r['kernel']} | {r['flush']} | {r['cpu_load']} | {r['profiler_ms']:.4f} | {1e3 * r['empty_region_ms']:.1f} | "
              f"{r['device_excess_us']:+.1f} | {r['stream_excess_us']:+.1f} | {q} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
