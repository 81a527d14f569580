"""The HTTP contract: verdicts, job ids, batches, bad input (each a 4xx with a clear message), tokens, body limits,
the bounded queue, deduplication, deadlines and verifier faults; after each, the server goes on serving."""

import threading
import time

import pytest
from conftest import RELU_TASK, FakeVerifier

SOURCE = RELU_TASK.read_text()
CONTRACT = {"status", "compiled", "legal", "correct", "pass_fraction", "speedup", "reward", "violations", "feedback"}


def body(candidate="c", **kw):
    return {"task_source": SOURCE, "candidate": candidate, "backend": "cpu", **kw}


def still_serving(client, verifier_echo=True):
    r = client.post("/v1/verify", json=body(f"alive-{time.monotonic()}"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "ok"


def test_verify_answers_the_verdict_contract(make_client, task_root):
    fake = FakeVerifier()
    client = make_client(fake, task_root=task_root)
    r = client.post("/v1/verify", json={"task": "level1/19_ReLU", "candidate": "x", "backend": "cpu",
                                        "set": {"batch_size": 8}})
    assert r.status_code == 200, r.text
    v = r.json()
    assert CONTRACT <= v.keys() and v["status"] == "ok" and v["task"] == "level1/19_ReLU" and v["feedback"] == "echo:x"
    assert r.headers["X-Musacoder-Deduplicated"] == "new"
    # inline source with a name, and the job endpoint
    r = client.post("/v1/verify?wait=false", json=body("y", task_name="level2/7_Thing"))
    assert r.status_code == 202 and r.json()["status"] in ("queued", "running", "done")
    job = client.get(f"/v1/jobs/{r.json()['job_id']}", params={"wait": 5}).json()
    assert job["status"] == "done" and job["verdict"]["task"] == "level2/7_Thing"
    assert client.get("/v1/health").json()["status"] == "ok"


def test_batch_keeps_request_order(make_client):
    client = make_client(FakeVerifier(delay_s=0.01), workers=4)
    r = client.post("/v1/verify/batch", json={"jobs": [body(f"b{i}") for i in range(12)]})
    assert r.status_code == 200, r.text
    assert [v["feedback"] for v in r.json()["results"]] == [f"echo:b{i}" for i in range(12)]
    r = client.post("/v1/verify/batch?wait=false", json={"jobs": [body("q1"), body("q2")]})
    assert r.status_code == 202 and len(r.json()["job_ids"]) == 2


@pytest.mark.parametrize("task_id", ["../secret", "level1/../../secret", "/etc/passwd", "level1/./19_ReLU",
                                     "..", "C:/x", "level1\\19_ReLU", "level1/19_ReLU\x00"])
def test_task_ids_that_leave_the_root_are_400(make_client, task_root, task_id):
    client = make_client(FakeVerifier(), task_root=task_root)
    r = client.post("/v1/verify", json={"task": task_id, "candidate": "x"})
    assert r.status_code == 400, r.text
    assert "task id" in r.json()["detail"] or "outside the task root" in r.json()["detail"]


def test_symlink_out_of_the_root_is_400(make_client, task_root):
    (task_root / "level1" / "evil.py").symlink_to(task_root.parent / "secret.py")
    client = make_client(FakeVerifier(), task_root=task_root)
    r = client.post("/v1/verify", json={"task": "level1/evil", "candidate": "x"})
    assert r.status_code == 400 and "outside the task root" in r.json()["detail"]


def test_unknown_task_job_and_size_are_4xx(make_client, task_root):
    client = make_client(FakeVerifier(), task_root=task_root)
    r = client.post("/v1/verify", json={"task": "level1/999_Nope", "candidate": "x"})
    assert r.status_code == 404 and "unknown task 'level1/999_Nope'" in r.json()["detail"]
    r = client.get("/v1/jobs/doesnotexist")
    assert r.status_code == 404 and "unknown job" in r.json()["detail"]
    r = client.post("/v1/verify", json={"task": "level1/19_ReLU", "candidate": "x", "set": {"nope": 3}})
    assert r.status_code == 400 and "unknown size constant" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(config={"cache_dir": "/tmp/x"}))
    assert r.status_code == 400 and "set by the server" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(config={"trials": 0}))
    assert r.status_code == 422 and "trials" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(task_source="print('not a task')"))
    assert r.status_code == 400 and "KernelBench-format" in r.json()["detail"]
    still_serving(client)


def test_no_task_root_says_send_the_source(make_client):
    client = make_client(FakeVerifier())
    r = client.post("/v1/verify", json={"task": "level1/19_ReLU", "candidate": "x"})
    assert r.status_code == 400 and "task_source" in r.json()["detail"]


def test_malformed_bodies_are_4xx_and_the_server_goes_on(make_client):
    client = make_client(FakeVerifier())
    r = client.post("/v1/verify", content=b'{"candidate": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(colour="blue"))
    assert r.status_code == 422 and "unknown field 'colour'" in r.json()["detail"]
    r = client.post("/v1/verify", json={"candidate": "x"})
    assert r.status_code == 422 and "exactly one of" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(backend="rocm"))
    assert r.status_code == 422 and "backend" in r.json()["detail"]
    r = client.post("/v1/verify", json=[1, 2])
    assert r.status_code == 422
    r = client.post("/v1/verify/batch", json={"jobs": []})
    assert r.status_code == 422
    still_serving(client)


def test_body_limit_is_413(make_client):
    client = make_client(FakeVerifier(), max_body_bytes=4096)
    r = client.post("/v1/verify", json=body("x" * 10_000))
    assert r.status_code == 413 and "4096 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: counted while reading
        for _ in range(10):
            yield b"x" * 1000

    r = client.post("/v1/verify", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    still_serving(client)


def test_token_is_required_when_set(make_client):
    client = make_client(FakeVerifier(), token="s3cret")
    r = client.post("/v1/verify", json=body())
    assert r.status_code == 401 and "missing bearer token" in r.json()["detail"]
    r = client.post("/v1/verify", json=body(), headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and "wrong bearer token" in r.json()["detail"]
    assert client.get("/v1/metrics").status_code == 401
    assert client.get("/v1/health").status_code == 200  # liveness stays open
    r = client.post("/v1/verify", json=body(), headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_full_queue_is_429_with_retry_after(make_client):
    gate = threading.Event()
    fake = FakeVerifier(gate=gate)
    client = make_client(fake, workers=1, max_queue=2)
    ids = [client.post("/v1/verify?wait=false", json=body(f"q{i}")).json()["job_id"] for i in range(3)]
    end = time.monotonic() + 5
    while len(fake.calls) < 1 and time.monotonic() < end:  # one running, two waiting
        time.sleep(0.01)
    r = client.post("/v1/verify?wait=false", json=body("one-too-many"))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 and "queue is full" in r.json()["detail"]
    r = client.post("/v1/verify/batch?wait=false", json={"jobs": [body(f"big{i}") for i in range(3)]})
    assert r.status_code == 400 and "smaller batches" in r.json()["detail"]
    # an identical job joins the queued one instead of taking a place
    r = client.post("/v1/verify?wait=false", json=body("q2"))
    assert r.status_code == 202 and r.json()["job_id"] == ids[2] and r.json()["deduplicated"] == "in_flight"
    gate.set()
    for i, job_id in enumerate(ids):
        assert client.get(f"/v1/jobs/{job_id}", params={"wait": 5}).json()["verdict"]["feedback"] == f"echo:q{i}"
    assert 'musacoder_requests_rejected_total{reason="queue_full"} 1' in client.get("/v1/metrics").text


def test_identical_jobs_share_one_verification(make_client):
    gate = threading.Event()
    fake = FakeVerifier(gate=gate)
    client = make_client(fake, workers=2)
    first = [client.post("/v1/verify?wait=false", json=body("same")).json() for _ in range(5)]
    assert len({j["job_id"] for j in first}) == 1
    assert [j["deduplicated"] for j in first] == ["new"] + ["in_flight"] * 4
    gate.set()
    assert client.get(f"/v1/jobs/{first[0]['job_id']}", params={"wait": 5}).json()["status"] == "done"
    r = client.post("/v1/verify", json=body("same"))
    assert r.headers["X-Musacoder-Deduplicated"] == "cached" and r.json()["feedback"] == "echo:same"
    assert fake.calls == ["same"]
    # any difference in sizes, backend, config or task is another job
    client.post("/v1/verify", json=body("same", set={"batch_size": 8}))
    client.post("/v1/verify", json=body("same", backend="cuda"))
    client.post("/v1/verify", json=body("same", config={"trials": 2}))
    client.post("/v1/verify", json=body("same", task_name="other"))
    assert len(fake.calls) == 5


def test_verifier_fault_is_infra_error_and_not_cached(make_client):
    fake = FakeVerifier()
    client = make_client(fake)
    for _ in range(2):
        v = client.post("/v1/verify", json=body("raise please")).json()
        assert v["status"] == "infra_error" and v["reward"] is None and "fake verifier broke" in v["error"]
    assert len(fake.calls) == 2  # a verifier fault is retried, never served from the cache
    still_serving(client)


def test_deadline_is_infra_error_and_the_server_goes_on(make_client):
    fake = FakeVerifier(delay_s=1.0)
    client = make_client(fake, workers=1, job_deadline_s=0.3)
    t0 = time.monotonic()
    running = client.post("/v1/verify?wait=false", json=body("slow-1")).json()["job_id"]
    queued = client.post("/v1/verify", json=body("slow-2")).json()
    assert queued["status"] == "infra_error" and queued["reward"] is None and "deadline" in queued["flags"]
    assert time.monotonic() - t0 < 0.9  # answered at the deadline, not when the verifier finished
    v = client.get(f"/v1/jobs/{running}", params={"wait": 2}).json()["verdict"]
    assert v["status"] == "infra_error" and "deadline" in v["error"]
    text = client.get("/v1/metrics").text
    assert 'musacoder_deadline_exceeded_total{phase="running"} 1' in text
    assert 'musacoder_deadline_exceeded_total{phase="queued"} 1' in text


def test_metrics_are_prometheus_text(make_client):
    client = make_client(FakeVerifier(), workers=3)
    client.post("/v1/verify", json=body("m1"))
    client.post("/v1/verify", json=body("raise m2"))
    r = client.get("/v1/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    for line in ("musacoder_queue_depth 0", "musacoder_workers 3", 'musacoder_verdicts_total{status="ok"} 1',
                 'musacoder_verdicts_total{status="infra_error"} 1', 'musacoder_stage_seconds_count{stage="build"} 1',
                 'musacoder_jobs_submitted_total{outcome="new"} 2'):
        assert line in text, line
    assert 'musacoder_device_busy_seconds_total{device="cpu"}' in text
    assert 'musacoder_job_seconds_bucket{phase="total",le="+Inf"} 2' in text
    for line in text.splitlines():  # every sample line is `name{labels} number`
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1].replace("+Inf", "inf"))


def test_openapi_schema_is_served(make_client):
    client = make_client(FakeVerifier())
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/verify", "/v1/verify/batch", "/v1/jobs/{job_id}", "/v1/health", "/v1/metrics"} <= paths.keys()
    assert client.get("/docs").status_code == 200
