"""`RemoteVerifier` against a live server: the local verifier's interface, tasks sent by id, file or `Task`, options
carried, refusals raised as the local verifier raises them."""

from pathlib import Path

import pytest
from conftest import RELU_CPU, RELU_TASK, FakeVerifier, live_server

from musacoder.client import RemoteError, RemoteVerifier, request_body
from musacoder.config import VerifyConfig
from musacoder.service import ServiceConfig, create_app
from musacoder.tasks import load_task


@pytest.fixture
def served(task_root):
    fake = FakeVerifier()
    app = create_app(ServiceConfig(task_root=task_root, token="tok"), verifier=fake)
    with live_server(app) as url:
        yield url, fake


def test_verify_by_id_file_and_task(served):
    url, fake = served
    with RemoteVerifier(url, token="tok") as remote:
        v = remote.verify("level1/19_ReLU", "by-id", backend="cpu", overrides={"batch_size": 4})
        assert v.status == "ok" and v.task == "level1/19_ReLU" and v.feedback == "echo:by-id"
        assert fake.seen[-1]["task"].overrides == {"batch_size": 4} and fake.seen[-1]["backend"] == "cpu"
        v = remote.verify(str(RELU_TASK), RELU_CPU)  # a problem file is sent inline; a Path candidate is read
        assert v.feedback == f"echo:{RELU_CPU.read_text()}" and fake.seen[-1]["task"].source == RELU_TASK.read_text()
        task = load_task(RELU_TASK, {"batch_size": 2})
        v = remote(task, "as-callable", overrides={"dim": 3}, config=VerifyConfig(trials=2, extra_shapes=[{"dim": 5}]))
        seen = fake.seen[-1]
        assert v.feedback == "echo:as-callable" and seen["task"].overrides == {"batch_size": 2, "dim": 3}
        assert seen["config"].trials == 2 and seen["config"].extra_shapes == [{"dim": 5}]
        assert remote.health()["status"] == "ok"


def test_refusals_raise_like_the_local_verifier(served, tmp_path):
    url, _ = served
    with RemoteVerifier(url, token="tok") as remote:
        with pytest.raises(ValueError, match="unknown task"):
            remote.verify("level1/999_Nope", "x")
        with pytest.raises(ValueError, match="task id"):
            remote.verify("../secret", "x")
        with pytest.raises(ValueError, match="unknown size constant"):
            remote.verify("level1/19_ReLU", "x", overrides={"nope": 1})
        with pytest.raises(ValueError, match="set on the server"):
            remote.verify("level1/19_ReLU", "x", config=VerifyConfig(keep_workdir=True))
    with RemoteVerifier(url, token="wrong") as remote, pytest.raises(PermissionError, match="wrong bearer token"):
        remote.verify("level1/19_ReLU", "x")
    with RemoteVerifier("http://127.0.0.1:9", retries=0) as remote, pytest.raises(RemoteError, match="cannot reach"):
        remote.verify("level1/19_ReLU", "x")


def test_request_body_leaves_server_options_out():
    body = request_body(Path(RELU_TASK), "c", config=VerifyConfig(cache_dir="/somewhere/else", trials=3))
    assert body["config"] == {"trials": 3} and body["task_name"] == "relu" and "task" not in body
    assert request_body("level1/19_ReLU", "c") == {"task": "level1/19_ReLU", "candidate": "c"}


def test_a_job_the_server_forgot_is_submitted_again():
    """A server restarted between submission and verdict answers 404 for the job; the client resubmits once."""
    import httpx

    from musacoder.records import Verdict

    submitted = []

    def handler(request):
        if request.method == "POST":
            submitted.append(request.url.path)
            return httpx.Response(202, json={"job_id": f"j{len(submitted)}", "status": "queued"})
        if request.url.path == "/v1/jobs/j1":
            return httpx.Response(404, json={"detail": "unknown job 'j1'"})
        return httpx.Response(200, json={"job_id": "j2", "status": "done",
                                         "verdict": Verdict(status="ok", reward=1.0).model_dump(mode="json")})

    remote = RemoteVerifier("http://svc")
    remote._http = httpx.Client(base_url="http://svc", transport=httpx.MockTransport(handler))
    assert remote.verify("level1/19_ReLU", "x").status == "ok" and len(submitted) == 2
