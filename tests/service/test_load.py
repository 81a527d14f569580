"""Load on a live server (uvicorn on a free port, fake verifier): many jobs in flight from concurrent clients, none
lost or duplicated; the latency distribution is printed (`pytest -s`)."""

import asyncio
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
from conftest import RELU_TASK, FakeVerifier, live_server

from musacoder.client import RemoteVerifier
from musacoder.judge.batch import VerifyJob
from musacoder.records import Task
from musacoder.service import ServiceConfig, create_app
from musacoder.tasks import load_task

SOURCE = RELU_TASK.read_text()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def test_128_jobs_in_flight_from_concurrent_clients():
    # the workers hold their first jobs until 64 are in the server, so that many are in flight however slowly the
    # clients' requests arrive on a busy machine (10 s at most)
    gate = threading.Event()
    fake = FakeVerifier(delay_s=0.02, gate=gate)
    app = create_app(ServiceConfig(workers=8, max_queue=256), verifier=fake)
    n_clients, per_client = 4, 32

    async def client(url, c):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            async def one(i):
                cand = f"client{c}-job{i}"
                t0 = asyncio.get_running_loop().time()
                r = await http.post("/v1/verify", json={"task_source": SOURCE, "candidate": cand, "backend": "cpu"})
                return cand, r, asyncio.get_running_loop().time() - t0
            return await asyncio.gather(*(one(i) for i in range(per_client)))

    async def all_clients(url):
        return [x for xs in await asyncio.gather(*(client(url, c) for c in range(n_clients))) for x in xs]

    with live_server(app) as url:
        seen_in_flight = []
        stop = threading.Event()

        def watch():  # the most jobs the server held at once (queued + running)
            while not stop.is_set():
                seen_in_flight.append(app.state.jobs.depth + app.state.jobs.running)
                if seen_in_flight[-1] >= 64:
                    gate.set()
                stop.wait(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        results = asyncio.run(all_clients(url))
        stop.set()
        watcher.join()
        metrics = httpx.get(f"{url}/v1/metrics").text

    total = n_clients * per_client
    assert len(results) == total
    for cand, r, _ in results:
        assert r.status_code == 200, r.text
        assert r.json()["feedback"] == f"echo:{cand}"  # each client got its own verdict
    assert sorted(fake.calls) == sorted(c for c, _, _ in results)  # every job verified exactly once
    assert max(seen_in_flight) >= 64
    assert f'musacoder_verdicts_total{{status="ok"}} {total}' in metrics
    lat = [t for _, _, t in results]
    print(f"\n{total} jobs from {n_clients} clients, 8 workers, fake verifier 20 ms (held until 64 were in): "
          f"max in flight {max(seen_in_flight)}, latency p50 {percentile(lat, 50) * 1e3:.0f} ms, "
          f"p99 {percentile(lat, 99) * 1e3:.0f} ms, mean {statistics.fmean(lat) * 1e3:.0f} ms")


def test_remote_verify_many_from_threads_with_a_small_queue():
    """Clients outnumber the queue: 429s are waited out (Retry-After), faults stay per job."""
    fake = FakeVerifier(delay_s=0.05)
    app = create_app(ServiceConfig(workers=4, max_queue=8), verifier=fake)
    task = load_task(RELU_TASK)
    with live_server(app) as url:
        def one_client(c):
            jobs = [VerifyJob(f"{c}-{i}", task, ("raise " if i == 5 else "") + f"rc{c}-{i}", "cpu")
                    for i in range(24)]
            with RemoteVerifier(url, poll_s=5) as remote:
                return list(remote.verify_many(jobs, workers=24))

        with ThreadPoolExecutor(4) as pool:
            out = [x for xs in pool.map(one_client, range(4)) for x in xs]
        rejected = app.state.metrics.count(app.state.metrics.rejected, "queue_full")
    assert len(out) == 96 and len({job.id for job, _ in out}) == 96
    for job, v in out:
        if job.candidate.startswith("raise"):
            assert v.status == "infra_error" and v.reward is None
        else:
            assert v.status == "ok" and v.feedback == f"echo:{job.candidate}" and v.task == task.key, v.error
    assert len(fake.calls) == 96
    assert rejected > 0  # the queue did fill, and every job still got its verdict
    assert isinstance(task, Task)
