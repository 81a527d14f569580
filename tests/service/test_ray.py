"""MooreEval on a real local Ray cluster (CPU only; `num_gpus=2` declares logical GPUs to schedule actors on).

The bundle format is tested without Ray; everything else starts one cluster for the module (about 5 s)."""

import io
import os
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from musacoder.config import VerifyConfig
from musacoder.records import Task
from musacoder.service.ray_pool import install_builds, pack_builds

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RELU_TASK = REPO / "examples" / "tasks" / "relu.py"
RELU_CPU = REPO / "examples" / "candidates" / "relu_cpu.py"
KEY = "ab" + "0" * 62


def _entry(root: Path, key: str = KEY) -> Path:
    entry = root / "ext" / key[:2] / key
    (entry / "lite").mkdir(parents=True)
    (entry / "lite" / "mc_ext.so").write_bytes(b"\x7fELF library")
    (entry / "lite" / "mc_ext.o").write_bytes(b"object file")
    (entry / "lite" / "build.ninja").write_text("rule cxx")
    (entry / "done").write_text(str(entry / "lite"))
    return entry


def test_bundle_carries_libraries_and_a_relocated_marker(tmp_path):
    _entry(tmp_path / "builder")
    bundle = pack_builds(tmp_path / "builder", [KEY, "cd" + "1" * 62])  # an unknown key is skipped
    names = sorted(tarfile.open(fileobj=io.BytesIO(bundle)).getnames())
    assert names == [f"{KEY}/done.rel", f"{KEY}/lite/mc_ext.so"]
    node = tmp_path / "node"
    assert install_builds(node, bundle) == [KEY]
    entry = node / "ext" / "ab" / KEY
    assert (entry / "done").read_text() == str((entry / "lite").resolve())
    assert (entry / "lite" / "mc_ext.so").read_bytes() == b"\x7fELF library"
    assert not (entry / "lite" / "mc_ext.o").exists()
    assert install_builds(node, bundle) == []  # present already: left alone


def test_bundle_keeps_a_cached_compile_failure_and_refuses_paths_out(tmp_path):
    entry = tmp_path / "builder" / "ext" / KEY[:2] / KEY
    entry.mkdir(parents=True)
    (entry / "error.log").write_text("Error building extension: x.cpp:1: error")
    bundle = pack_builds(tmp_path / "builder", [KEY])
    buf = io.BytesIO(bundle)
    with tarfile.open(fileobj=buf, mode="a") as tar:
        info = tarfile.TarInfo(f"{KEY}/../../evil.so")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    node = tmp_path / "node"
    assert install_builds(node, buf.getvalue()) == [KEY]
    assert (node / "ext" / KEY[:2] / KEY / "error.log").read_text().startswith("Error building extension")
    assert not list(node.rglob("evil.so"))
    # the keys pack_builds gets come from a worker's reply: one naming a folder elsewhere packs nothing
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "error.log").write_text("not a build")
    traversal = "../secret"  # CACHE/ext/../../secret: the folder beside the cache
    with tarfile.open(fileobj=io.BytesIO(pack_builds(tmp_path / "builder", [traversal]))) as tar:
        assert tar.getnames() == []


def test_a_bundle_whose_marker_leaves_its_entry_is_not_installed(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in ((f"{KEY}/done.rel", b"../.."), (f"{KEY}/lite/mc_ext.so", b"\x7fELF")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    node = tmp_path / "node"
    assert install_builds(node, buf.getvalue()) == []
    assert not (node / "ext" / KEY[:2] / KEY).exists()
    assert not [p for p in (node / "ext" / KEY[:2]).iterdir() if p.name.startswith(".")]  # no staging left behind


def test_serve_ray_without_ray_exits_2(monkeypatch):
    import typer

    from musacoder.service.cli import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # more than one command: `serve` is named on the command line
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    r = CliRunner().invoke(app, ["serve", "--ray", "auto"])
    assert r.exit_code == 2, r.output
    assert "`--ray` needs Ray: pip install 'musacoder[ray]'" in r.output


# ---- a real local cluster ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]' (or .[dev])")
    if ray.is_initialized():
        ray.shutdown()
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, namespace="musacoder-test",
             runtime_env={"env_vars": env}, log_to_driver=False)
    yield ray
    ray.shutdown()


def _task() -> Task:
    from musacoder.tasks import load_task

    return load_task(RELU_TASK)


@pytest.mark.slow
def test_jobs_spread_over_gpu_actors_and_a_lost_actor_is_retried(ray_cluster, make_client, task_root):
    """Over HTTP: a batch spreads over the two GPU actors; a job whose actor is killed mid-run is answered by the
    other one; a job that kills every actor it runs on is infra_error once its attempts are spent."""
    from musacoder.service.ray_pool import RayPoolConfig, RayVerifier

    # max_restarts=0: a killed actor stays dead (restarts cost seconds each here; they are Ray's, not ours)
    pool = RayVerifier(RayPoolConfig(jobs_per_actor=1, max_attempts=2, max_restarts=0,
                                     verifier="ray_fakes:slow_verify"))
    with pool:
        assert [i["gpu_ids"] for i in pool._info] in ([[0], [1]], [[1], [0]])  # one logical GPU each
        from fastapi.testclient import TestClient

        from musacoder.service import ServiceConfig
        from musacoder.service.app import create_app

        app = create_app(ServiceConfig(task_root=task_root, workers=4), verifier=pool, pool_context=lambda: pool,
                         pool_stats=pool.stats)
        with TestClient(app) as client:
            jobs = [{"task": "level1/19_ReLU", "candidate": f"sleep:1 #{i}", "backend": "cpu"} for i in range(4)]
            r = client.post("/v1/verify/batch", json={"jobs": jobs})
            assert r.status_code == 200, r.text
            assert [v["status"] for v in r.json()["results"]] == ["ok"] * 4
            assert len({v["feedback"] for v in r.json()["results"]}) == 2  # two actor processes answered
            assert client.get("/v1/health").json()["pool"]["per_actor"] == {"0": 2, "1": 2}

            # kill the actor running a job: the job is retried on the other actor and still verdicted
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("r", client.post(
                "/v1/verify", json={"task": "level1/19_ReLU", "candidate": "sleep:3", "backend": "cpu"})))
            t.start()
            end = time.monotonic() + 10
            while sum(pool.running_on()) == 0:
                assert time.monotonic() < end
                time.sleep(0.05)
            rank = pool.running_on().index(1)
            time.sleep(0.5)
            ray_cluster.kill(pool.actor(rank), no_restart=False)
            t.join(30)
            v = got["r"].json()
            assert got["r"].status_code == 200 and v["status"] == "ok", v
            stats = pool.stats()
            assert stats["retries"] == 1 and stats["exhausted"] == 0
            assert stats["per_actor"][str(1 - rank)] == 3

        # the verifier raising is not a lost actor: no retry, the error reaches the job queue (an infra_error there)
        with pytest.raises(ValueError, match="unknown backend 'bad'"):
            pool(_task(), "bad", backend="cpu", config=VerifyConfig())
        assert pool.stats()["retries"] == 1

        # a job that kills every actor it reaches: infra_error (the service's fault, no reward) after 2 attempts
        lost = pool(_task(), "die", backend="cpu", config=VerifyConfig())
        assert lost.status == "infra_error" and lost.reward is None and "actor_lost" in lost.flags
        assert "in 2 attempt(s)" in lost.error and pool.stats()["exhausted"] == 1


@pytest.mark.slow
def test_builds_run_on_cpu_tasks_and_the_cache_is_shared_between_nodes(ray_cluster, tmp_path):
    """The real verifier: the example C++ ReLU is built once by a CPU build task; both actors (each with its own
    node cache) import the shipped library instead of building."""
    from musacoder.service.ray_pool import RayPoolConfig, RayVerifier

    pool = RayVerifier(RayPoolConfig(jobs_per_actor=1, actor_cache_dir=str(tmp_path / "node{actor}"),
                                     builder_cache_dir=str(tmp_path / "builder")))
    light = VerifyConfig(trials=1, structured_trials=0, time_candidate=False)
    with pool:
        code = RELU_CPU.read_text()
        v0 = pool(_task(), code, backend="cpu", config=light)
        v1 = pool(_task(), code, backend="cpu", config=light.model_copy(update={"trials": 2}))
        stats = pool.stats()
    for v in (v0, v1):
        assert v.status == "ok" and v.reward == 1.0, v.error or v.feedback
        assert v.build_cached, "the actor built although a bundle was shipped"
    assert stats["builds"] == 1 and stats["artifact_reuse"] == 1 and stats["artifact_misses"] == 0
    assert stats["per_actor"] == {"0": 1, "1": 1}
    assert list((tmp_path / "builder" / "ext").glob("*/*/done"))
    for node in ("node0", "node1"):
        libs = list((tmp_path / node / "ext").rglob("*.so"))
        assert libs and not list((tmp_path / node / "ext").rglob("*.o")), node  # installed, never compiled here


@pytest.mark.slow
def test_serve_ray_wires_the_pool_behind_the_api(ray_cluster, task_root, monkeypatch):
    """`serve --ray auto` joins the running cluster, starts the actors and serves them: the app it would run is
    taken from uvicorn.run and driven with a TestClient; the real verifier answers (extract_error: no build)."""
    import typer
    import uvicorn
    from fastapi.testclient import TestClient

    from musacoder.service.cli import register

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    r = CliRunner().invoke(app, ["serve", "--task-root", str(task_root), "--ray", "auto", "--ray-actors", "1",
                                 "--ray-jobs-per-actor", "3"])
    assert r.exit_code == 0, r.output
    with TestClient(served["app"]) as client:
        health = client.get("/v1/health").json()
        assert health["workers"] == 6 and health["pool"]["actors"] == 1  # 2 × the actors' slots
        v = client.post("/v1/verify", json={"task": "level1/19_ReLU", "candidate": "no code here", "backend": "cpu"})
        assert v.status_code == 200 and v.json()["status"] == "extract_error", v.text
        assert client.get("/v1/health").json()["pool"]["per_actor"] == {"0": 1}
