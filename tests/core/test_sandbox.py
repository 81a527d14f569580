"""Sandbox edges: network namespace, scrubbed environment, process-group kill."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from musacoder.judge.sandbox import Sandbox, isolation_prefix, worker_environment

CONNECT = "import socket,sys; s=socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', int(sys.argv[1]))); print('ok')"


@pytest.mark.skipif(not isolation_prefix(), reason="unshare --net not permitted here")
def test_worker_prefix_has_no_network():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = str(srv.getsockname()[1])
    try:
        outside = subprocess.run([sys.executable, "-c", CONNECT, port], capture_output=True, text=True, timeout=30)
        inside = subprocess.run([*isolation_prefix(), sys.executable, "-c", CONNECT, port], capture_output=True,
                                text=True, timeout=30)
    finally:
        srv.close()
    assert outside.stdout.strip() == "ok"
    assert inside.returncode != 0


def test_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    env = worker_environment(tmp_path, tmp_path / "cache", None)
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"] == str(tmp_path)


def test_close_kills_the_whole_process_group(tmp_path):
    with Sandbox(tmp_path / "cache") as sb:
        pid = sb.proc.pid
        workdir = sb.workdir
        assert workdir.exists()
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not workdir.exists()


def test_a_worker_reaped_later_is_killed_at_once_and_gone_once_reaped(tmp_path):
    """`reap_later`: the block ends with the worker killed (nothing of it runs on), its reaping and folder removal in
    the background, and `gone` set when they are done."""
    with Sandbox(tmp_path / "cache") as sb:
        sb.reap_later = True
        pid, workdir = sb.proc.pid, sb.workdir
        assert not sb.gone.is_set()
    assert sb.proc is None and sb.to_worker is None
    assert sb.gone.wait(15)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not workdir.exists()


def test_prestarted_workers_are_fresh_per_use_and_cleared(tmp_path):
    from musacoder.judge import sandbox

    gpu = {"MUSACODER_PREWARM_DEVICE": "cuda:0"}  # only GPU verifications use workers started ahead
    with sandbox.prestarted_workers(2, linger_s=0):
        with Sandbox(tmp_path, env=gpu) as first:
            pid1 = first.proc.pid
            assert first.request({"op": "exit"}, 60)["ok"]
        idle = [w.proc.pid for ws in sandbox.PRESTART._idle.values() for w in ws]
        assert idle and pid1 not in idle  # a used worker never goes back to the pool
        with Sandbox(tmp_path, env=gpu) as second:
            assert second.proc.pid in idle  # started ahead, used once
            assert second.request({"op": "exit"}, 60)["ok"]
        waiting = [w.proc for ws in sandbox.PRESTART._idle.values() for w in ws]
    assert sandbox.PRESTART._idle == {}
    assert all(p.poll() is not None for p in waiting)  # idle workers are killed when the batch ends


def test_concurrent_takers_never_start_more_than_the_target_ahead():
    """Fourteen verifications arriving at once once started 13 idle workers each (about 90 CUDA contexts on one GPU)."""
    import threading

    from musacoder.judge.sandbox import Prestart

    class Fake:
        def __init__(self):
            self.proc = type("P", (), {"poll": staticmethod(lambda: None)})()
            self.discarded = False

        def discard(self):
            self.discarded = True

    started: list[Fake] = []
    lock = threading.Lock()

    def start():
        time.sleep(0.01)  # a start takes a while, so takers overlap
        w = Fake()
        with lock:
            started.append(w)
        return w

    pool = Prestart()
    pool.target = 14
    barrier = threading.Barrier(14)

    def taker():
        barrier.wait()
        pool.take(("k",), start)
        pool.refill(("k",), start)

    threads = [threading.Thread(target=taker) for _ in range(14)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) <= 14 + 14  # one per taker, at most `target` ahead
    assert pool.idle_count() <= 14
    pool.target = 0
    pool.clear()


def test_a_taker_gets_its_own_worker_before_any_is_started_ahead():
    """At the start of a batch the pool is empty: `take` starts the caller's worker alone (its CUDA context is not
    made to share the GPU's start-up with the workers for later ones); `refill` then tops the idle set up."""
    from musacoder.judge.sandbox import Prestart

    class Fake:
        proc = type("P", (), {"poll": staticmethod(lambda: None)})()

        def discard(self):
            pass

    starts: list[str] = []

    def start(label):
        def go():
            starts.append(label)
            return Fake()
        return go

    pool = Prestart()
    pool.target = 3
    own = pool.take(("k",), start("own"))
    assert starts == ["own"] and pool.idle_count() == 0
    pool.refill(("k",), start("ahead"))
    assert starts == ["own", "ahead", "ahead", "ahead"] and pool.idle_count() == 3
    assert pool.take(("k",), start("own")) is not own and starts.count("own") == 1  # served from the idle set

    def broken():
        raise OSError("fork failed")

    pool.refill(("k",), broken)  # a failed start ahead is nobody's error: the next take starts its own
    assert pool.idle_count() == 2 and pool._starting == 0
    pool.target = 0
    pool.clear()


def test_a_worker_that_cannot_start_is_an_infrastructure_error_not_a_crash(tmp_path):
    """A worker that dies before it is ready (here: an address-space limit too small to import torch) is never
    blamed on the candidate: one retry, then `infra_error`."""
    from musacoder import verify
    from musacoder.config import VerifyConfig
    from musacoder.judge.sandbox import WorkerStartFailed

    with pytest.raises(WorkerStartFailed):
        with Sandbox(tmp_path / "cache", memory_limit_gb=0.05):
            pass
    task = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py"
    cand = Path(__file__).resolve().parents[2] / "examples" / "candidates" / "relu_cpu.py"
    v = verify(str(task), cand.read_text(), backend="cpu",
               config=VerifyConfig(cache_dir=tmp_path / "cache", memory_limit_gb=0.05))
    assert v.status == "infra_error" and not v.stages.get("build") == "ok"
    assert "not your fault" in v.feedback
    assert sum("failed to start" in f for f in v.flags) == 2  # tried twice


def _load(sb: Sandbox, code: str, cache: Path) -> dict:
    return sb.request({"op": "load", "code": code, "backend": "cpu", "device": "cpu", "cache_dir": str(cache),
                       "task_source": None}, 60)


def test_forked_workers_are_fresh_processes_with_their_own_session_folder_and_descriptors(tmp_path):
    """A worker forked by the fork server gets what a `python -m` worker gets: its own session, its folder as cwd,
    HOME and TMPDIR, only the protocol pipes and its log open, the network namespace of the isolation prefix; and
    nothing a candidate changed in one worker is seen by the next."""
    from musacoder.judge.forkserver import FORK_SERVERS, ForkedProcess

    probe = ("import json, os, tempfile, torch\n"
             "json.dump({'home': os.environ.get('HOME'), 'tmp': tempfile.gettempdir(), 'cwd': os.getcwd(),\n"
             "           'threads': torch.get_num_threads(), 'add_patched': getattr(torch.add, 'patched', False),\n"
             "           'cuda_refused': torch.cuda._is_in_bad_fork(),\n"
             "           'fds': sorted(int(f) for f in os.listdir('/proc/self/fd'))}, open('probe.json', 'w'))\n"
             "torch.set_num_threads(1)\n"
             "def add(*a, **k): pass\n"
             "add.patched = True\n"
             "torch.add = add\n")
    seen = []
    for _ in range(2):
        with Sandbox(tmp_path / "cache") as sb:
            assert isinstance(sb.proc, ForkedProcess)
            assert _load(sb, probe, tmp_path / "cache")["kind"] == "runtime_error"  # no ModelNew; the probe ran
            got = json.loads((sb.workdir / "probe.json").read_text())
            stat = Path(f"/proc/{sb.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[3]) == sb.proc.pid and int(stat[2]) == sb.proc.pid  # own session and process group
            if isolation_prefix():
                assert os.readlink(f"/proc/{sb.proc.pid}/ns/net") != os.readlink("/proc/self/ns/net")
            seen.append(got)
            assert got["home"] == got["tmp"] == got["cwd"] == str(sb.workdir)
            assert not got["cuda_refused"]  # torch would refuse CUDA had the server asked the driver anything
            assert set(got["fds"]) <= {0, 1, 2, 3, 4, 5}  # stdin, log ×2, the two pipes (and listdir's own)
    assert not seen[1]["add_patched"] and seen[1]["threads"] == seen[0]["threads"]
    assert any(s is not None for s in FORK_SERVERS._servers.values())


def test_workers_start_the_plain_way_when_the_fork_server_is_gone_or_off(tmp_path, monkeypatch):
    import signal as sig

    from musacoder.judge.forkserver import FORK_SERVERS, ForkedProcess

    with Sandbox(tmp_path / "cache") as sb:
        assert isinstance(sb.proc, ForkedProcess)
        server = sb.proc.server
    os.killpg(server.proc.pid, sig.SIGKILL)  # the server dies; a worker it forked earlier is unaffected
    server.proc.wait(10)
    deadline = time.monotonic() + 10
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    with Sandbox(tmp_path / "cache") as sb:  # a new server is started for the configuration
        assert isinstance(sb.proc, ForkedProcess) and sb.proc.server is not server
        assert sb.request({"op": "exit"}, 60)["ok"]
    monkeypatch.setenv("MUSACODER_FORK_SERVER", "0")
    with Sandbox(tmp_path / "cache") as sb:
        assert isinstance(sb.proc, subprocess.Popen)
        assert sb.request({"op": "exit"}, 60)["ok"]
    FORK_SERVERS.clear()


def test_a_worker_killed_from_outside_is_reported_with_its_signal(tmp_path):
    import signal as sig

    from musacoder.judge.sandbox import WorkerDied

    with Sandbox(tmp_path / "cache") as sb:
        os.kill(sb.proc.pid, sig.SIGKILL)
        with pytest.raises(WorkerDied) as e:
            sb.request({"op": "take_outputs"}, 30)
        assert e.value.returncode == -sig.SIGKILL


def test_fork_servers_are_bounded_and_a_busy_one_is_kept(tmp_path, monkeypatch):
    """Each server holds ~0.5 GB of imports: a new configuration closes the least recently used idle one."""
    from musacoder.judge import forkserver

    reg = forkserver._Registry(max_servers=1)
    monkeypatch.setattr(forkserver, "FORK_SERVERS", reg)
    with Sandbox(tmp_path, env={"MUSACODER_T": "a"}) as a:
        first = a.proc.server
        with Sandbox(tmp_path, env={"MUSACODER_T": "b"}) as b:  # the first is busy: both run
            assert first.alive and b.proc.server.alive and b.proc.server is not first
    with Sandbox(tmp_path, env={"MUSACODER_T": "c"}):  # now idle: the least recently used goes
        assert not first.alive
    reg.clear()


def test_workers_of_every_gpu_share_one_fork_server(tmp_path):
    """The GPU and the memory limit are read after the fork: eight GPUs need one server, not eight."""
    from musacoder.judge.forkserver import FORK_SERVERS

    servers = set()
    for env in ({"MUSACODER_PREWARM_DEVICE": "cuda:0"}, {"MUSACODER_PREWARM_DEVICE": "cuda:1"},
                {"MUSACODER_PREWARM_DEVICE": "cuda:1", "MUSACODER_AS_LIMIT": str(64 << 30)}):
        with Sandbox(tmp_path / "cache", env=env) as sb:
            servers.add(sb.proc.server)
    assert len(servers) == 1
    assert FORK_SERVERS.key({"MUSACODER_PREWARM_DEVICE": "cuda:0", "CUDA_HOME": "/a"}, True) == \
        FORK_SERVERS.key({"CUDA_HOME": "/a"}, True) != FORK_SERVERS.key({"CUDA_HOME": "/b"}, True)


def test_the_fork_server_refuses_to_start_where_its_children_could_not_use_cuda():
    """Counting GPUs before a fork makes torch refuse CUDA in the child; the server's probe catches that."""
    code = ("import torch, sys\n"
            "from musacoder.judge import forkserver\n"
            "if sys.argv[1] == 'poisoned': torch.cuda.is_available()\n"
            "try:\n    forkserver._preload()\nexcept RuntimeError as e:\n    print('refused:', e)\nelse:\n    print('ok')\n")
    out = {how: subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, timeout=120).stdout
           for how in ("clean", "poisoned")}
    assert out["clean"].strip() == "ok"
    assert out["poisoned"].startswith("refused:") and "forked" in out["poisoned"]


def test_a_stopped_fork_server_is_replaced_not_waited_for(tmp_path, monkeypatch):
    """A candidate can signal its server (same user): a stopped server costs one fork timeout, then a new one serves."""
    import signal as sig

    from musacoder.judge import forkserver

    with Sandbox(tmp_path / "cache") as sb:
        server = sb.proc.server
    os.kill(server.proc.pid, sig.SIGSTOP)
    spawn = forkserver.ForkServer.spawn
    monkeypatch.setattr(forkserver.ForkServer, "spawn", lambda self, fds, cwd, env, timeout_s=60.0:
                        spawn(self, fds, cwd, env, timeout_s=1.0))
    with Sandbox(tmp_path / "cache") as sb:  # started the plain way after the timeout
        assert not isinstance(sb.proc, forkserver.ForkedProcess)
    assert not server.alive
    with Sandbox(tmp_path / "cache") as sb:
        assert isinstance(sb.proc, forkserver.ForkedProcess) and sb.proc.server is not server


def test_a_candidate_is_timed_to_its_stream_end_and_charged_for_work_left_on_other_streams(monkeypatch):
    """CUDA times run to the end of the calling stream's work. After each timed round a GPU spin as long as the
    candidate's median stream time is timed the same way: its device-minus-stream gap is the host's round trip, and a
    candidate is charged for device time beyond that round trip's 75th percentile (work on other streams)."""
    from musacoder.judge import timing

    spins: list[int] = []
    trips = iter([0.020, 0.030, 0.025, 0.400])  # one very slow round trip (a busy host)

    def region(torch, fn, args):
        assert fn == "spin"
        spins.append(args[0])
        ms = args[0] / 2e6  # the GPU spins at 2 GHz
        return timing.Region(device_ms=ms + next(trips), stream_ms=ms), None

    monkeypatch.setattr(timing, "cuda_region", region)
    monkeypatch.setattr(timing, "cuda_sleep", lambda torch: "spin")
    trip = timing.RoundTrip(torch=object())
    assert trip.ms() is None
    legit = [timing.Region(0.225, 0.200), timing.Region(0.240, 0.200), timing.Region(0.221, 0.201)]
    for _ in range(4):
        trip.sample([r.stream_ms for r in legit])
    assert spins[0] == int(0.200 * timing.RoundTrip.CYCLES_PER_MS)  # as long as the candidate's median stream time
    assert spins[1] == int(0.200 * 2e6)  # then at the spin's measured rate
    assert trip.ms() == timing.RoundTrip.MAX_MS  # the 75th percentile (0.4 ms here) is capped
    trip.gaps = [0.020, 0.030, 0.025, 0.022]
    assert trip.ms() == 0.030
    # a legitimate candidate: every gap within the round trip, so its time is its stream time
    assert trip.charge(legit[:1] + legit[2:]) == [0.200, 0.201]
    # a round trip longer than R: only the excess is charged
    assert trip.charge([timing.Region(0.240, 0.200)]) == [pytest.approx(0.210)]
    # its work on a side stream: the calling stream ends at once, the device 0.2 ms later; charged all but R
    assert trip.charge([timing.Region(0.225, 0.001)]) == [pytest.approx(0.195)]
    assert trip.charge([timing.Region(0.0, 0.0)]) == [timing.MIN_TIMED_MS]
    side = timing.RoundTrip(torch=object())
    trips = iter([0.02])
    side.sample([0.001, 0.001, 0.002])  # a side-stream candidate's stream time is short, and so is its spin
    assert spins[-1] == int(0.001 * timing.RoundTrip.CYCLES_PER_MS)
    cpu = timing.RoundTrip(torch=None)  # host clock: nothing measured or charged
    cpu.sample([0.3])
    assert cpu.gaps == [] and cpu.ms() is None and cpu.charge([timing.Region(0.3, 0.3)]) == [0.3]


def test_idle_workers_linger_for_the_next_batch_then_are_killed():
    """Between two batches (an RL run's steps) the idle workers are kept for the next one; after the linger they
    are killed, unless a batch is running again by then."""
    from musacoder.judge.sandbox import Prestart

    class Fake:
        proc = type("P", (), {"poll": staticmethod(lambda: None)})()

        def __init__(self):
            self.discarded = False

        def discard(self):
            self.discarded = True

    pool = Prestart()
    pool.target = 2
    pool.refill(("k",), Fake)
    kept = [w for ws in pool._idle.values() for w in ws]
    pool.target = 0
    pool.release(0.3)  # the first batch ended
    assert pool.idle_count() == 2
    pool.target = 2  # the next batch began within the linger: its first verification finds a ready worker
    got = pool.take(("k",), Fake)
    assert got in kept
    time.sleep(0.5)
    assert pool.idle_count() == 1  # the expired linger did not clear a running batch's workers
    pool.target = 0
    pool.release(0.2)
    assert pool.idle_count() == 1
    time.sleep(0.5)
    assert pool.idle_count() == 0 and all(w.discarded for w in kept if w is not got)
    pool.target = 2
    pool.refill(("k",), Fake)
    pool.target = 0
    pool.release(0)  # no linger: killed at once
    assert pool.idle_count() == 0


def _descendants(root: int) -> dict[int, str]:
    """Every live descendant of `root`: pid -> its start time (field 22 of /proc/PID/stat), so a reused pid is told
    apart from the process that had it."""
    parent, start = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            parent[int(pid)], start[int(pid)] = int(fields[1]), fields[19]
    found, frontier = {}, [root]
    while frontier:
        p = frontier.pop()
        for child, par in parent.items():
            if par == p and child not in found:
                found[child] = start[child]
                frontier.append(child)
    return found


def _alive(pid: int, started: str) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and fields[19] == started


def test_a_killed_verifier_leaves_no_worker_processes_or_folders(tmp_path):
    """SIGKILL (or SIGTERM, which skips atexit) of the verifier mid-build: its fork server sees the trusted side gone
    and kills every worker with what it started (the compiler here), then removes their folders and its own; an RL
    job killed by its scheduler must not leave processes or folders behind on the host."""
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, TMPDIR=str(tmp_path), MUSACODER_CACHE_DIR=str(tmp_path / "cache"))  # a cold build: slow
    proc = subprocess.Popen([sys.executable, "-m", "musacoder.cli", "verify", "--task",
                             str(repo / "examples" / "tasks" / "relu.py"), "--candidate",
                             str(repo / "examples" / "candidates" / "relu_cpu.py"), "--backend", "cpu", "--json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = tmp_path / f"musacoder-{os.getuid()}"
    ours = ("cand-", "forkserver-")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until a worker runs in its folder
            if base.is_dir() and any(p.name.startswith("cand-") for p in base.iterdir()) and \
                    len(_descendants(proc.pid)) >= 2:
                break
            assert proc.poll() is None, "the verifier ended before the test could kill it"
            time.sleep(0.2)
        time.sleep(3)  # the worker is building (a cold C++ build takes far longer)
        assert proc.poll() is None
        left = _descendants(proc.pid)
        assert len(left) >= 2, left
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (any(_alive(p, s) for p, s in left.items()) or
                                           any(p.name.startswith(ours) for p in base.iterdir())):
        time.sleep(0.2)
    assert not [p for p, s in left.items() if _alive(p, s)], "processes outlived the killed verifier"
    assert not [p.name for p in base.iterdir() if p.name.startswith(ours)], "folders outlived the killed verifier"


def test_a_timed_cuda_region_reads_the_clock_through_functions_bound_before_candidate_code(monkeypatch):
    """After the candidate's call returns, `cuda_region` records, synchronises and reads its events through the C
    methods `capture` bound before candidate code was imported. A patch of `torch.cuda.Event`'s Python methods or of
    `torch.cuda.synchronize` (one that would undo itself before the worker checks what the harness runs, say) does
    not reach the figures. A stand-in for torch's CUDA classes runs it here, without a GPU."""
    import contextlib
    from types import SimpleNamespace

    from musacoder.judge import timing

    clock = iter(range(100))
    calls = []

    class EventBase:  # torch._C._CudaEventBase: the GPU timestamps
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self, stream):
            calls.append(("record", stream))
            self.t = float(next(clock))

        def synchronize(self):
            calls.append(("event_sync",))

        def elapsed_time(self, end):
            return end.t - self.t

    class Event(EventBase):  # torch.cuda.Event: Python methods over the C ones
        def record(self, stream=None):
            super().record(stream or "current")

    cuda = SimpleNamespace(Event=Event, _sleep=lambda cycles: calls.append(("spin", cycles)),
                           synchronize=lambda: calls.append(("sync",)), current_stream=lambda: "current")
    fake = SimpleNamespace(cuda=cuda, no_grad=contextlib.nullcontext,
                           _C=SimpleNamespace(_CudaEventBase=EventBase, _cuda_synchronize=lambda: calls.append(("sync",))))
    for name in ("_EVENT", "_SLEEP", "_CUDA"):
        monkeypatch.setattr(timing, name, getattr(timing, name))
    timing.capture(fake)

    def forward():  # the candidate: returns, having replaced what the harness calls next
        Event.elapsed_time = lambda self, end: 1e-6
        Event.synchronize = lambda self: None
        cuda.synchronize = lambda: None
        return "out"

    region, out = timing.cuda_region(fake, forward, ())
    assert out == "out" and region == timing.Region(device_ms=2.0, stream_ms=1.0)
    assert [c[0] for c in calls] == ["sync", "spin", "record", "record", "sync", "record", "event_sync"]


def test_a_worker_imports_nothing_from_its_own_folder(tmp_path):
    """The worker's folder is where its candidate's native code can write; `python -m` puts the starting folder first
    on the import path. A worker started there must not find a module planted in it before the real one (the
    verifier's own later imports would run it)."""
    (tmp_path / "statistics.py").write_text("raise SystemExit('planted module imported')\n")
    code = ("import os, sys\nfrom musacoder.judge.worker.setup import drop_writable_import_paths\n"
            "drop_writable_import_paths()\nsys.modules.pop('statistics', None)\nimport statistics\n"
            "print(statistics.__file__)\n")
    got = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    assert got.returncode == 0, got.stderr
    assert "planted" not in got.stdout + got.stderr and str(tmp_path) not in got.stdout


def _instant_region(torch, fn, args, family="cuda"):
    return None, fn(*args)


def test_a_harness_function_whose_code_was_swapped_is_seen():
    """The worker compares the verifier's own functions by identity as each candidate call returns; a function kept
    in place with its code (or its defaults) swapped is seen too."""
    from musacoder.judge import timing
    from musacoder.judge.worker import Worker

    w = Worker()
    w._arm_watch()
    assert not w.check_harness()
    saved = timing.cuda_region.__code__, timing.Timer.timed.__defaults__
    try:
        timing.cuda_region.__code__ = _instant_region.__code__
        assert w.check_harness() and "musacoder.judge.timing.cuda_region (its code or defaults)" in w._harness_moved
        timing.cuda_region.__code__ = saved[0]
        w._harness_moved.clear()
        timing.Timer.timed.__defaults__ = (lambda: 0,)  # the host clock bound as a default argument
        assert w.check_harness() and w._harness_moved == {"musacoder.judge.timing.Timer.timed (its code or defaults)"}
    finally:
        timing.cuda_region.__code__, timing.Timer.timed.__defaults__ = saved
