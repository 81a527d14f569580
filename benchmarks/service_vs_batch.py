"""The HTTP service against `verify-batch` on the same manifest: same verdicts, and what the service adds per verdict.

    python benchmarks/service_vs_batch.py --backend cpu --copies 3 --workers 2 --json service.json
    python benchmarks/service_vs_batch.py --backend cuda --kernelbench-dir .kb --candidates benchmarks/candidates/cuda \
        --limit 0 --max-input-mb 64 --workers 14 --json service.json

The manifest is `benchmarks/sandbox_overhead.py`'s (cpu: copies of the CPU examples, each copy made distinct by a
comment so the service's result cache cannot answer it; cuda: the golden candidates, at sizes shrunk to
`--max-input-mb`, 1e9 for the task files' own). One `verify-batch` run fills the build cache (not counted); then, on
that cache, one `verify-batch` run in a fresh process and one pass through `musacoder serve --cache-size 0` (started
and healthy before the clock starts; its start is reported apart) with `RemoteVerifier.verify_many` keeping
`--workers` jobs in flight, the server running `--workers` at once. Reported: verdicts whose status differs (the
issue's goal: none), verdicts/min of each, and the service's overhead per verdict, (service wall − batch wall) / n;
the batch's wall includes its process start, the service's does not.

`--work DIR --phases batch` then `--work DIR --phases service` splits the run in two (e.g. two calls on one machine
that keeps DIR and its build cache between them): the first fills the cache and times `verify-batch`, writing
`DIR/batch.json`; the second reads it and times the service.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


def distinct_cpu_manifest(copies: int, work: Path) -> list[dict]:
    """The CPU examples, `copies` of each, every copy a different text (a trailing comment)."""
    from sandbox_overhead import cpu_manifest

    rows = []
    for r in cpu_manifest(copies):
        text = Path(r["candidate"]).read_text() + f"\n# copy {r['id']}\n"
        p = work / "candidates" / (r["id"].replace("#", "_") + ".py")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        rows.append({**r, "candidate": str(p)})
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_service(rows: list[dict], workers: int, cache: Path, log: Path, timeout_s: float) -> dict:
    """Start `musacoder serve`, wait until healthy, verify every row through the client, stop it."""
    from sandbox_overhead import musacoder_env

    from musacoder.client import RemoteVerifier
    from musacoder.judge.batch import VerifyJob
    from musacoder.tasks import load_task

    port = free_port()
    env = musacoder_env(cache)
    t_start = time.monotonic()
    with log.open("w") as f:
        server = subprocess.Popen([sys.executable, "-m", "musacoder.cli", "serve", "--port", str(port), "--workers",
                                   str(workers), "--cache-size", "0", "--max-queue", str(max(256, 2 * len(rows))),
                                   "--max-body-mb", "16"], env=env, stdout=f, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        with RemoteVerifier(url, timeout_s=timeout_s, poll_s=5.0) as client:
            while True:
                try:
                    client.health()
                    break
                except Exception:  # noqa: BLE001 - not listening yet
                    if server.poll() is not None or time.monotonic() - t_start > 120:
                        raise SystemExit(f"the service did not start (exit {server.poll()}); log {log}:\n"
                                         + log.read_text()[-2000:])
                    time.sleep(0.2)
            start_s = time.monotonic() - t_start
            jobs = [VerifyJob(r["id"], load_task(Path(r["task"]), r.get("set") or None),
                              Path(r["candidate"]).read_text(), r["backend"]) for r in rows]
            t0 = time.monotonic()
            verdicts = {job.id: v for job, v in client.verify_many(jobs, workers=workers)}
            secs = time.monotonic() - t0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return {"seconds": secs, "start_s": start_s, "verdicts": {k: v.model_dump(mode="json", include={
        "status", "speedup", "wall_s", "error", "build_cached"}) for k, v in verdicts.items()}}


def main() -> None:
    from sandbox_overhead import cuda_manifest, run_batch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--copies", type=int, default=3, help="cpu: copies of each example candidate")
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=REPO / "benchmarks" / "candidates" / "cuda")
    ap.add_argument("--limit", type=int, default=0, help="cuda: first N golden candidates (0: all)")
    ap.add_argument("--max-input-mb", type=float, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="per verdict, through the service")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=None, help="working folder kept between phases (default: a new one)")
    ap.add_argument("--phases", default="batch,service", help="batch, service or both (comma-separated)")
    a = ap.parse_args()
    # stopped by `timeout` (SIGTERM): unwind, so the server and a running verify-batch are stopped, not left behind
    # holding the GPU and host memory for the next step
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    phases = {x.strip() for x in a.phases.split(",") if x.strip()}
    if not phases or phases - {"batch", "service"}:
        raise SystemExit(f"--phases: expected batch, service or both, got {a.phases!r}")
    work = a.work or Path(tempfile.mkdtemp(prefix="service-vs-batch-"))
    work.mkdir(parents=True, exist_ok=True)
    manifest, out, cache, saved = work / "manifest.jsonl", work / "verdicts.jsonl", work / "cache", work / "batch.json"
    if "batch" in phases:
        rows = distinct_cpu_manifest(a.copies, work) if a.backend == "cpu" else cuda_manifest(
            a.kernelbench_dir, a.candidates, a.limit, a.max_input_mb)
        if not rows:
            raise SystemExit("no candidates to verify (check --kernelbench-dir and --candidates)")
        manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"{len(rows)} verifications, backend {a.backend}, {a.workers} workers; filling the build cache ...",
              flush=True)
        run_batch(manifest, out, a.workers, cache, sandbox=True, timing=False)  # fills the build cache
        batch = run_batch(manifest, out, a.workers, cache, sandbox=True)
        batch_rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines()) if r}
        saved.write_text(json.dumps({"batch": batch, "rows": batch_rows}))
    else:
        if not saved.exists():
            raise SystemExit(f"{saved} is missing: run --phases batch with the same --work first")
        rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        earlier = json.loads(saved.read_text())
        batch, batch_rows = earlier["batch"], earlier["rows"]
    print(f"  verify-batch: {batch['verdicts_per_min']:.1f} verdicts/min ({batch['seconds']:.1f} s, "
          f"{batch['statuses']})", flush=True)
    if "service" not in phases:
        print(f"batch phase saved in {saved}; run --phases service --work {work} next")
        return
    svc = run_service(rows, a.workers, cache, work / "serve.log", a.timeout_s)
    n = len(rows)
    differ = {i: (batch_rows.get(i, {}).get("status"), v["status"]) for i, v in svc["verdicts"].items()
              if batch_rows.get(i, {}).get("status") != v["status"]}
    svc_statuses: dict[str, int] = {}
    for v in svc["verdicts"].values():
        svc_statuses[v["status"]] = svc_statuses.get(v["status"], 0) + 1
    per_min = 60 * n / svc["seconds"]
    overhead = (svc["seconds"] - batch["seconds"]) / n
    print(f"  service:      {per_min:.1f} verdicts/min ({svc['seconds']:.1f} s, {svc_statuses}; started and healthy "
          f"in {svc['start_s']:.1f} s)")
    print("\n| path | verdicts | wall s | verdicts/min | statuses |")
    print("|---|---|---|---|---|")
    print(f"| verify-batch (fresh process) | {batch['verdicts']} | {batch['seconds']:.1f} | "
          f"{batch['verdicts_per_min']:.1f} | {batch['statuses']} |")
    print(f"| musacoder serve + RemoteVerifier | {len(svc['verdicts'])} | {svc['seconds']:.1f} | {per_min:.1f} | "
          f"{svc_statuses} |")
    print(f"\nstatuses that differ: {len(differ)} {differ if differ else ''}")
    print(f"service overhead per verdict: {overhead:+.3f} s (negative: the batch's process start costs more)")
    if a.json:
        a.json.write_text(json.dumps({"backend": a.backend, "workers": a.workers, "verifications": n,
                                      "batch": batch, "service": svc, "differ": differ,
                                      "overhead_s_per_verdict": overhead}, indent=1))
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
