"""One verdict whatever way the candidate's worker was started: forked by the fork server, as a plain
`python -m musacoder.judge.worker` (`MUSACODER_FORK_SERVER=0`, also what a verification gets when the fork server
fails to start, and the retry after a failed start), and inside the Ray pool's verifier actor (`VerifierActor`,
called in this process: the service's local pool runs `musacoder.judge.pipeline.verify` in threads, which the fork
server path is). Status, legality, violations and pass fraction must be identical on every path.

A plain worker once judged an honest kernel illegal ("forward changed global state: … torch.manual_seed …",
"environment variables changed: TORCHINDUCTOR_CACHE_DIR"): the profiler's first start imported `torch._inductor` after
the harness guard's snapshot, where the fork server had imported it before forking. Candidates that build C++ are
slow (one build each, shared by the paths); the Triton-interpreter ones are not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from musacoder import VerifyConfig, verify
from musacoder.judge.forkserver import FORK_SERVERS
from musacoder.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RELU = EXAMPLES / "tasks" / "relu.py"
LINEAR_GELU = EXAMPLES / "tasks" / "linear_gelu.py"
ADVERSARIAL = REPO / "tests" / "adversarial" / "candidates"
LEGAL = REPO / "tests" / "false_reject" / "candidates" / "legal"

CFG = VerifyConfig(timeout_s=120.0, repeats=3, max_repeats=5, time_budget_s=0.5, warmup=1, rechecks=1,
                   clean_reference=False)

# (task, candidate, backend): candidates that need no build (Triton's interpreter on the CPU)
NO_BUILD = [
    (RELU, EXAMPLES / "candidates" / "relu_triton.py", "triton"),
    (RELU, LEGAL / "triton_wrapper_function.py", "triton"),
]
# C++ candidates: the CPU examples, honest test candidates and the adversarial ones whose verdict the worker decides
# (the static rules do not reject them first)
BUILDS = [
    (RELU, EXAMPLES / "candidates" / "relu_cpu.py", "cpu"),
    (LINEAR_GELU, EXAMPLES / "candidates" / "linear_gelu_cpu.py", "cpu"),
    (RELU, LEGAL / "cpu_ext_on_self.py", "cpu"),
    (RELU, ADVERSARIAL / "legit_relu.py", "cpu"),
    (RELU, ADVERSARIAL / "environment_at_import.py", "cpu"),
    (RELU, ADVERSARIAL / "input_mutation.py", "cpu"),
    (RELU, ADVERSARIAL / "output_in_own_tuple_type.py", "cpu"),
    (RELU, ADVERSARIAL / "crash.py", "cpu"),
]


def _seen(v) -> tuple:
    return v.status, v.legal, sorted(v.violations), v.pass_fraction


def _plain(task, code, backend, monkeypatch):
    monkeypatch.setenv("MUSACODER_FORK_SERVER", "0")
    try:
        return verify(task, code, backend=backend, config=CFG)
    finally:
        monkeypatch.setenv("MUSACODER_FORK_SERVER", "1")


def _ray_actor(task, code, backend, tmp_path):
    """The Ray pool's actor as its remote method runs it (no bundle from a build task: it builds itself)."""
    pytest.importorskip("ray")
    from musacoder.service.ray_pool import VerifierActor

    actor = VerifierActor(0, str(CFG.cache_dir), jobs=1)
    try:
        return actor.verify(load_task(task), code, backend, None, CFG, [])
    finally:
        actor._prestart.__exit__(None, None, None)


def _compare(task, path, backend, monkeypatch, tmp_path):
    code = path.read_text()
    monkeypatch.setenv("MUSACODER_FORK_SERVER", "1")
    forked = verify(task, code, backend=backend, config=CFG)
    assert not FORK_SERVERS.errors, FORK_SERVERS.errors  # the fork server really served this verification
    plain = _plain(task, code, backend, monkeypatch)
    actor = _ray_actor(task, code, backend, tmp_path)
    assert _seen(forked) == _seen(plain) == _seen(actor), (path.name, _seen(forked), _seen(plain), _seen(actor))
    return forked


@pytest.mark.parametrize("task,path,backend", NO_BUILD, ids=[p.stem for _, p, _ in NO_BUILD])
def test_a_triton_candidate_gets_one_verdict_on_every_worker_path(task, path, backend, monkeypatch, tmp_path):
    pytest.importorskip("triton")
    v = _compare(task, path, backend, monkeypatch, tmp_path)
    assert v.status == "ok", (v.status, v.violations, v.error)


@pytest.mark.slow
@pytest.mark.parametrize("task,path,backend", BUILDS, ids=[p.stem for _, p, _ in BUILDS])
def test_a_cpp_candidate_gets_one_verdict_on_every_worker_path(task, path, backend, monkeypatch, tmp_path):
    _compare(task, path, backend, monkeypatch, tmp_path)


def test_the_harness_set_up_leaves_nothing_for_the_guard_to_see(tmp_path):
    """In a fresh interpreter, as a plain worker starts: after `setup.prepare`, the harness's own first profiled call
    and seeding change nothing the harness guard compares (the profiler's first start no longer imports anything
    that patches torch or sets a variable)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch
        from musacoder.judge.worker import setup
        from musacoder.judge.worker.guard import HarnessGuard

        setup.prepare()
        guard = HarnessGuard(torch)
        guard.snapshot()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            torch.manual_seed(3)
            torch.ones(8).relu()
        print("changes:", guard.changes())
    """)
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env.update(PYTHONPATH=str(REPO / "src"), TMPDIR=str(tmp_path))
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "changes: []" in got.stdout, got.stdout
