"""The sandbox against CUDA candidates whose host code attacks the machine (tests/gpu/escapes/, written by
tests/adversarial/make_escapes.py; the static rules let every one through but for its token pasting, waived here). Whatever layers this host permits, each
ends with a verdict, the verifier survives, no file appears outside the worker's folder and nothing the candidate
started outlives its verdict; then a normal candidate is verified correctly. Skipped without a CUDA GPU."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
import torch

from musacoder import VerifyConfig, verify
from musacoder.judge import isolation

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent
REPO = HERE.parents[1]
RELU = REPO / "examples" / "tasks" / "relu.py"
_KIT_SPEC = importlib.util.spec_from_file_location("make_escapes", HERE.parent / "adversarial" / "make_escapes.py")
_KIT = importlib.util.module_from_spec(_KIT_SPEC)
_KIT_SPEC.loader.exec_module(_KIT)
CASES = list(_KIT.ATTACKS)  # the generator's attacks: every file it writes to tests/gpu/escapes/
HOST_FILES = [Path(p) for p in _KIT.HOST_FILES]
CFG = VerifyConfig(timeout_s=40.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)


def _token_pasting_waived(monkeypatch) -> None:
    """The source rules as they are but for the token-pasting rule, which the escape kit trips by design (it spells
    every call the other rules look for with `##`)."""
    import musacoder.legality.static as static_rules
    from musacoder.legality.static import check_static

    def rules(*args, **kwargs):
        got = check_static(*args, **kwargs)
        got.violations = [x for x in got.violations if "token pasting" not in x]
        return got

    monkeypatch.setattr(static_rules, "check_static", rules)


def leftovers() -> list[str]:
    """Live processes that belonged to a worker whose folder is gone (its verdict given): a worker runs in its own
    folder under `workers_base()`, and whatever it forks without changing directory stays there."""
    base = str(isolation.workers_base())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            links = os.stat(f"/proc/{pid}/cwd").st_nlink  # the folder itself, across mount namespaces: 0 once removed
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cwd.startswith(base) and state != "Z" and links == 0:
            found.append(f"{pid} (in {cwd})")
    return found


@pytest.fixture(scope="module")
def entered_layers() -> list[str]:
    """The layers a GPU worker on this host actually entered: a verdict's `sandbox` field for a normal candidate (the
    probe's prediction is not enough to let a fork bomb run)."""
    v = verify(RELU, (REPO / "examples" / "candidates" / "relu_cuda.py").read_text(), backend="cuda",
               config=CFG.model_copy(update={"timeout_s": 60.0}))
    assert v.status == "ok", (v.feedback, v.error)
    return list(v.sandbox or [])


def process_bound(entered: list[str]) -> bool:
    """Whether this host bounds a GPU worker's process count while it runs: a PID namespace (killed whole), a pids
    cgroup, or a uid other than 0 (for which the kernel enforces RLIMIT_NPROC: the verifier's own, or the `uid` layer,
    which GPU workers enter with MUSACODER_WORKER_UID=1), judged by the layers a worker entered."""
    return bool({"pid", "pids-cgroup", "uid"} & set(entered)) or os.getuid() != 0


@pytest.mark.parametrize("name", CASES)
def test_cuda_escape_is_contained(name, monkeypatch, entered_layers):
    if name == "fork_bomb" and not process_bound(entered_layers):
        # A known gap (docs/threats.md): forks of a process holding a CUDA context, unbounded for uid 0 until the
        # deadline, exhausted such a host (the H200 machine stopped answering during this suite).
        pytest.skip(f"this host bounds a worker's processes by nothing but its deadline: {entered_layers}")
    monkeypatch.setenv("MUSACODER_FSIZE_LIMIT", str(64 << 20))  # the huge file ends at 64 MiB, not at 4 GiB
    for p in HOST_FILES:
        p.unlink(missing_ok=True)
    with _KIT.secret_for(name, isolation.workers_base()) as planted:
        _token_pasting_waived(monkeypatch)
        v = verify(RELU, (HERE / "escapes" / f"{name}.py").read_text(), backend="cuda", config=CFG)
    assert v.status  # some verdict, and this process (the verifier) is still here to read it
    if planted:  # it crashes itself when it reads another worker's file or a verifier process's memory
        assert v.status == "ok", (v.status, v.error, v.sandbox)
    os.kill(os.getpid(), 0)
    time.sleep(1.5)  # the daemon writes every second, were it alive and able to
    assert not [str(p) for p in HOST_FILES if p.exists()], v.sandbox
    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leftovers(), (v.sandbox, leftovers())


def test_a_normal_cuda_candidate_is_verified_after_the_escapes():
    cfg = CFG.model_copy(update={"timeout_s": 60.0})
    v = verify(RELU, (REPO / "examples" / "candidates" / "relu_cuda.py").read_text(), backend="cuda", config=cfg)
    assert v.status == "ok", (v.feedback, v.error)
    if "uid" in v.sandbox:  # the escape kit, built once and loaded by workers of other uids, is sealed, as is this
        assert not _KIT.unsealed_builds(cfg.cache_dir)
