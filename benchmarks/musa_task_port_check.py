"""Task-port check: every KernelBench task, ported to MUSA, gives the same reference outputs as the original.

For each task file the original and its port (`musacoder.port.kernelbench.port_source`, or the file under
--ported-dir) run in one fresh subprocess: the original on --device (cpu or cuda), then, with the musa shim
(`musacoder.port.shim.torch_shim`, `musa` → that device) installed, the port on device `musa`. Both use the same
seeds (init inputs, weights, inputs) and the same size overrides; the outputs must be bitwise equal (torch.equal);
when they are not, the max abs difference is reported. Tasks too large for this machine are shrunk like
`benchmarks/throughput.py --max-input-mb` (largest size constant halved until inputs, outputs and weights fit).

Prints a table and writes JSON:
    python benchmarks/musa_task_port_check.py --kernelbench-dir /work/shared/kernelbench --max-input-mb 64 \
        --json musa_task_port_check.json [--device cpu] [--levels 1,2,3] [--only 'level1/19_*'] [--timeout 300]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 1234


def _run_model(source: str, task_path: str, overrides: dict, device: str):
    import torch

    from musacoder.tasks import load_module, task_from_source

    task = task_from_source(source, Path(task_path).stem, path=task_path, overrides=overrides)
    torch.manual_seed(SEED)
    m = load_module(task)
    init = m.get_init_inputs()
    torch.manual_seed(SEED)
    model = m.Model(*init).to(device)
    torch.manual_seed(SEED)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in m.get_inputs()]
    with torch.no_grad():
        out = model(*inputs)
    return out


def _flatten(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    return [out]


def check_one(task_path: str, ported_source: str, overrides: dict, device: str) -> dict:
    """Run original and port in this process (call it in a fresh one: the shim is process-wide)."""
    import torch

    t0 = time.perf_counter()
    original = _flatten(_run_model(Path(task_path).read_text(), task_path, overrides, device))
    from musacoder.port.shim.torch_shim import install

    install("cpu" if device == "cpu" else "cuda")
    musa_device = "musa" if device == "cpu" else "musa:" + (device.split(":")[1] if ":" in device else "0")
    ported = _flatten(_run_model(ported_source, task_path, overrides, musa_device))
    res = {"outputs": len(original), "equal": len(original) == len(ported), "max_abs_diff": 0.0}
    for a, b in zip(original, ported):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            same = a.shape == b.shape and a.dtype == b.dtype and a.device.type == b.device.type and torch.equal(a, b)
            if not same:
                res["equal"] = False
                if a.shape == b.shape:
                    diff = (a.double() - b.double().to(a.device)).abs().max().item() if a.numel() else 0.0
                    res["max_abs_diff"] = max(res["max_abs_diff"], diff)
                res["detail"] = f"{tuple(a.shape)} {a.dtype} {a.device} vs {tuple(b.shape)} {b.dtype} {b.device}"
        elif a != b:
            res["equal"] = False
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def _child() -> None:
    spec = json.loads(sys.stdin.read())
    try:
        res = check_one(spec["task"], spec["ported"], spec["overrides"], spec["device"])
        res["status"] = "same" if res["equal"] else "different"
    except Exception as e:  # noqa: BLE001 - reported per task
        res = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
    print("@@RESULT@@" + json.dumps(res))


def run_task(task_path: Path, ported_source: str, overrides: dict, device: str, timeout: float) -> dict:
    spec = json.dumps({"task": str(task_path), "ported": ported_source, "overrides": overrides, "device": device})
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    try:
        p = subprocess.run([sys.executable, __file__, "--child"], input=spec, capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"over {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    return {"status": "error", "error": (p.stderr or p.stdout)[-500:] or f"exit {p.returncode}"}


def shrink(task_path: Path, max_mb: float) -> dict | None:
    sys.path.insert(0, str(HERE))
    from throughput import shrink_overrides  # noqa: E402 - the same rule as the throughput benchmark

    return shrink_overrides(task_path, int(max_mb * 2**20))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "")))
    ap.add_argument("--ported-dir", type=Path, help="read the ports from here (musacoder port kernelbench --out)")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--only", action="append", help="glob on levelN/name (repeatable)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--max-input-mb", type=float, default=64.0, help="shrink tasks above this (1e9: never)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per task")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    from musacoder.port.kernelbench import port_source, task_files

    files = task_files(a.kernelbench_dir, tuple(int(x) for x in a.levels.split(",")))
    if a.only:
        files = [f for f in files if any(fnmatch.fnmatch(f"{f.parent.name}/{f.stem}", g) for g in a.only)]
    if not files:
        print(f"no task files under {a.kernelbench_dir}", file=sys.stderr)
        return 2
    rows = []
    for f in files:
        key = f"{f.parent.name}/{f.stem}"
        if a.ported_dir:
            ported = (a.ported_dir / f.parent.name / f.name).read_text()
        else:
            ported, _ = port_source(f.read_text(), key)
        err = None
        try:
            over = shrink(f, a.max_input_mb) if a.max_input_mb < 1e9 else {}
        except Exception as e:  # noqa: BLE001 - a task the size rule cannot handle is reported, not fatal
            over, err = None, f"{type(e).__name__}: {e}"[:300]
        if over is None:
            row = {"task": key, "status": "skipped", "error": err or "does not run once shrunk"}
        else:
            row = {"task": key, "overrides": over, "changed_by_port": ported != f.read_text(),
                   **run_task(f, ported, over, a.device, a.timeout)}
        rows.append(row)
        print(f"{row['status']:9} {key} {row.get('overrides') or ''} {row.get('error', '')}", flush=True)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("\n| status | tasks |\n|---|---|")
    for k, v in sorted(counts.items()):
        print(f"| {k} | {v} |")
    if a.json:
        a.json.write_text(json.dumps({"device": a.device, "max_input_mb": a.max_input_mb, "counts": counts,
                                      "tasks": rows}, indent=1))
    return 0 if counts.get("same", 0) == len(rows) else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        _child()
    else:
        sys.exit(main())
