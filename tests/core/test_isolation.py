"""The worker's isolation layers (musacoder.judge.isolation): what a worker cannot see, write, trace or signal, and
that nothing it starts outlives it. Fast tests run Python probes in a worker (the `load` request runs any code);
the slow ones verify native escape candidates (tests/adversarial/escapes/) that get past the static rules."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest

from musacoder.config import VerifyConfig
from musacoder.build import permissions
from musacoder.judge import isolation
from musacoder.judge.isolation import checks, enter, filters, host, prefix
from musacoder.judge.pipeline import verify
from musacoder.judge.sandbox import Sandbox, WorkerDied
from musacoder.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
ESCAPES = REPO / "tests" / "adversarial" / "escapes"
RELU = REPO / "examples" / "tasks" / "relu.py"
LAYERS = isolation.layers()


def needs(*layers):
    missing = [layer for layer in layers if layer not in LAYERS]
    return pytest.mark.skipif(bool(missing), reason=f"this host does not permit {missing}: {isolation.doctor()}")


def _run(sb: Sandbox, code: str, cache: Path) -> dict:
    """Run `code` in the worker (as a candidate without ModelNew) and return what it left in probe.json."""
    reply = sb.request({"op": "load", "code": code, "backend": "cpu", "device": "cpu", "cache_dir": str(cache),
                        "task_source": None}, 60)
    assert reply["kind"] == "runtime_error", reply  # no ModelNew: the probe ran to its end
    return json.loads((sb.workdir / "probe.json").read_text())


def _parent(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _nested_pid_namespaces() -> dict[str, list[str]]:
    """The PID namespaces, other than ours, that some process of this test run is in, with those processes' command
    lines. A process is this run's when it descends from this process (fork servers, workers, their compilers and
    whatever they fork), or when it was orphaned (its parent is init) and its command line names this checkout or its
    Python: what a worker left behind. Other runs on the same host, with the same Python or not, are not counted."""
    ours = os.readlink("/proc/self/ns/pid")
    me, mine = os.getpid(), (str(REPO), sys.executable)
    found: dict[str, list[str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ns == ours or not any(m in cmd for m in mine):
            continue
        chain, p = [], int(pid)
        while p > 1 and p != me and len(chain) < 64:
            chain.append(p)
            p = _parent(str(p))
        if p == me or len(chain) <= 1:  # a descendant, or an orphan (its parent is init)
            found.setdefault(ns, []).append(f"{pid}: {cmd[:80]}")
    return found


def test_doctor_names_every_layer_and_layers_are_known():
    text = isolation.doctor()
    for layer in isolation.ALL_LAYERS:
        assert layer in text
    assert set(LAYERS) <= set(isolation.ALL_LAYERS)


def test_complement_cubes_cover_everything_but_the_allowed_targets():
    """The seccomp rule for kill without a PID namespace: (mask, value) cubes matching every 32-bit pid but 0, the
    worker and its group, checked on the boundaries and a sample."""
    me = 4242
    allowed = {0, me, (-me) & 0xFFFFFFFF}
    cubes = filters.complement_cubes({0, me, -me})
    assert len(cubes) <= 3 * 32

    def denied(x):
        return any(x & m == v for m, v in cubes)

    for x in [*allowed, 1, me - 1, me + 1, 0xFFFFFFFF, (-1) & 0xFFFFFFFF, (-me - 1) & 0xFFFFFFFF, 1 << 31,
              *range(0, 1 << 32, 999_983)]:
        assert denied(x) == (x not in allowed), x


@needs("pid")
def test_worker_cannot_see_or_signal_the_verifier(tmp_path):
    me = os.getpid()
    probe = ("import json, os\n"
             f"v = {me}\n"
             "try:\n    os.kill(v, 0); signalled = True\nexcept OSError:\n    signalled = False\n"
             "json.dump({'pid': os.getpid(), 'visible': os.path.exists(f'/proc/{v}'), 'signalled': signalled,\n"
             "           'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        assert "pid" in sb.layers
        got = _run(sb, probe, tmp_path / "cache")
    assert got["pid"] == 1 and not got["visible"] and not got["signalled"]
    assert got["procs"] == [1]  # only itself


@needs("mount-ro", "tmpfs")
def test_worker_writes_only_its_folder_and_reads_the_build_cache(tmp_path):
    """The build cache is read-only to workers (the build broker writes it), anywhere in it."""
    token = uuid.uuid4().hex
    (tmp_path / "cache" / "ext" / "ab").mkdir(parents=True)
    (tmp_path / "cache" / "readme").write_text("cached")
    targets = {"home": str(Path.home() / f"musacoder-{token}"), "repo": str(REPO / f"musacoder-{token}"),
               "host_tmp": f"/tmp/musacoder-{token}", "own": "own.txt", "cache": str(tmp_path / "cache" / token),
               "cache_entry": str(tmp_path / "cache" / "ext" / "ab" / ("ab" + "0" * 62))}
    probe = ("import json\n"
             f"targets = {targets!r}\n"
             "wrote = {}\n"
             "for k, p in targets.items():\n"
             "    try:\n        open(p, 'w').write('x'); wrote[k] = True\n"
             "    except OSError:\n        wrote[k] = False\n"
             "json.dump(wrote, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        assert {"mount-ro", "tmpfs"} <= set(sb.layers)
        got = _run(sb, probe, tmp_path / "cache")
        assert (sb.workdir / "own.txt").exists()
    # /tmp and home folders are private: writes there land in the worker's own tmpfs; Landlock, where active, refuses
    # writes to the covered home folders as well. A checkout made under /tmp is bound back read-only into the private
    # /tmp, under folders the verifier makes there: a worker of its own uid cannot add to them, one of uid 0 can (into
    # its tmpfs). Either way nothing reaches the host's checkout (checked below).
    repo_written = str(REPO.resolve()).startswith(("/tmp/", "/var/tmp/")) and "uid" not in sb.layers
    home = str(Path.home())
    home_hidden = any(home == h or home.startswith(h + "/") for h in isolation.HIDDEN_FOLDERS)
    home_written = home_hidden and "landlock" not in sb.layers
    assert got == {"home": home_written, "repo": repo_written, "host_tmp": True, "own": True, "cache": False,
                   "cache_entry": False}
    assert not list((tmp_path / "cache").glob(token)) and not list((tmp_path / "cache" / "ext" / "ab").iterdir())
    for key in ("home", "repo", "host_tmp"):
        assert not Path(targets[key]).exists()


@needs("seccomp", "caps")
def test_worker_cannot_trace_read_memory_mount_or_make_namespaces(tmp_path):
    probe = ("import ctypes, json, os, subprocess\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "child = subprocess.Popen(['sleep', '30'])\n"
             "def err(ret):\n    return 0 if ret == 0 else ctypes.get_errno()\n"
             "buf = ctypes.create_string_buffer(8)\n"
             "class IOV(ctypes.Structure):\n    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
             "local = IOV(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
             "remote = IOV(0x400000, 8)\n"
             "got = {'ptrace': err(libc.ptrace(16, child.pid, 0, 0)),\n"
             "       'vm_readv': -1 if libc.process_vm_readv(child.pid, ctypes.byref(local), 1, ctypes.byref(remote),"
             " 1, 0) >= 0 else ctypes.get_errno(),\n"
             "       'mount': err(libc.mount(b'none', b'/mnt', b'tmpfs', 0, None)),\n"
             "       'unshare': err(libc.unshare(0x10000000)),\n"
             "       'raw_socket': -1 if libc.socket(2, 3, 1) >= 0 else ctypes.get_errno(),\n"
             "       'status': open('/proc/self/status').read()}\n"
             "child.kill(); child.wait()\n"
             "json.dump(got, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        got = _run(sb, probe, tmp_path / "cache")
    for call in ("ptrace", "vm_readv", "mount", "unshare", "raw_socket"):
        assert got[call] == 1, (call, got[call])  # EPERM
    assert "CapEff:\t0000000000000000" in got["status"] and "NoNewPrivs:\t1" in got["status"]


@needs("rlimits")
def test_the_oom_killer_takes_the_worker_first(tmp_path):
    probe = ("import json, subprocess\n"
             "score = open('/proc/self/oom_score_adj').read().strip()\n"
             "child = subprocess.run(['cat', '/proc/self/oom_score_adj'], capture_output=True, text=True).stdout\n"
             "try:\n    open('/proc/self/oom_score_adj', 'w').write('0')\n    lowered = True\n"
             "except OSError:\n    lowered = False\n"
             "json.dump({'score': score, 'child': child.strip(), 'lowered': lowered,\n"
             "           'after': open('/proc/self/oom_score_adj').read().strip()}, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        got = _run(sb, probe, tmp_path / "cache")
    assert got["score"] == "1000" and got["child"] == "1000"  # its children inherit it
    if os.getuid() == 0:  # written with the privilege to set the floor: the worker cannot lower it again
        assert not got["lowered"] and got["after"] == "1000"
    assert open("/proc/self/oom_score_adj").read().strip() != "1000"  # the verifier keeps its own


def _only_layers(monkeypatch, worker_layers):
    """Workers enter `worker_layers` alone (and the prefix's namespaces), as on a host that permits only those."""
    real = isolation.probe()
    monkeypatch.setattr(host, "probe", lambda: {**real, "worker_layers": list(worker_layers)})


@pytest.mark.skipif(isolation.landlock_abi() < 1, reason="this kernel has no Landlock")
def test_landlock_alone_confines_writes_to_the_workers_folder(tmp_path, monkeypatch):
    """Without a mount namespace (a host whose GPU driver fails inside `mount-ro`), Landlock still keeps every file
    outside the worker's folder unwritable (the build cache too: the build broker writes it), and with ABI 6+ the
    verifier unsignalable."""
    _only_layers(monkeypatch, ["landlock", "caps"])
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "existing.txt"
    victim.write_text("keep")
    probe = ("import json, os, signal\n"
             "got = {}\n"
             "def attempt(key, fn):\n"
             "    try:\n        fn(); got[key] = True\n"
             "    except OSError:\n        got[key] = False\n"
             f"attempt('new', lambda: open({str(outside / 'new.txt')!r}, 'w').write('x'))\n"
             f"attempt('append', lambda: open({str(victim)!r}, 'a').write('x'))\n"
             f"attempt('remove', lambda: os.unlink({str(victim)!r}))\n"
             f"attempt('rename', lambda: os.rename({str(victim)!r}, 'stolen.txt'))\n"
             f"attempt('mkdir', lambda: os.mkdir({str(outside / 'd')!r}))\n"
             "attempt('own', lambda: open('own.txt', 'w').write('x'))\n"
             f"attempt('cache', lambda: open({str(tmp_path / 'cache' / 'c.txt')!r}, 'w').write('x'))\n"
             "attempt('null', lambda: open('/dev/null', 'w').write('x'))\n"
             f"attempt('signal', lambda: os.kill({os.getpid()}, 0))\n"
             "json.dump(got, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        assert "landlock" in sb.layers and "mount-ro" not in sb.layers
        got = _run(sb, probe, tmp_path / "cache")
    assert got.pop("signal") is (isolation.landlock_abi() < 6)  # a scoped domain cannot signal outside itself
    assert got == {"new": False, "append": False, "remove": False, "rename": False, "mkdir": False, "own": True,
                   "cache": False, "null": True}
    assert victim.read_text() == "keep" and sorted(p.name for p in outside.iterdir()) == ["existing.txt"]


def test_what_a_worker_leaves_behind_is_killed_without_pid_namespaces_or_cgroups(tmp_path, monkeypatch):
    """A `setsid` daemon (and a double fork) outlives its parent; where the host permits neither a PID namespace nor
    a pids cgroup, the fork server adopts it as the workers' subreaper and kills it."""
    from musacoder.judge.forkserver import FORK_SERVERS

    _only_layers(monkeypatch, [x for x in isolation.probe()["worker_layers"] if x not in ("pid", "pids-cgroup")])
    if not FORK_SERVERS.enabled():
        pytest.skip("the fork server is off")
    marker = f"{300 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10 ** 6}"  # the daemon's `sleep` argument
    probe = ("import json, subprocess\n"
             f"subprocess.Popen(['sh', '-c', 'sleep {marker} &'], start_new_session=True).wait()\n"
             "json.dump({}, open('probe.json', 'w'))\n")

    def alive() -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if cmd[:2] == [b"sleep", marker.encode()] and state != "Z":
                found.append(int(pid))
        return found

    from musacoder.judge.forkserver import ForkedProcess

    FORK_SERVERS.clear()  # a server started by another test makes PID namespaces for its workers
    try:
        with Sandbox(tmp_path / "cache") as sb:
            assert "pid" not in sb.layers and isinstance(sb.proc, ForkedProcess)
            assert os.readlink(f"/proc/{sb.proc.pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
            _run(sb, probe, tmp_path / "cache")
            deadline = time.monotonic() + 5
            while alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive()  # killed while the worker still runs: its parent (the `sh`) had ended
        assert not alive()
    finally:
        FORK_SERVERS.clear()


@needs("uid")
def test_worker_runs_as_a_uid_of_its_own_with_a_process_limit(tmp_path, monkeypatch):
    """As root, each worker becomes a uid of its own (no groups), so the kernel applies RLIMIT_NPROC to it (a fork
    bomb stops at the limit without a pids cgroup), and files only the verifier's user may read stay closed."""
    from musacoder.judge.forkserver import FORK_SERVERS

    monkeypatch.setenv("MUSACODER_UID_NPROC_LIMIT", "48")  # read by the fork server at import
    FORK_SERVERS.clear()
    cache = tmp_path / "cache"
    probe = ("import errno, json, os, resource, time\n"
             "got = {'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups(),\n"
             "       'umask': os.umask(0),\n"
             "       'nproc': resource.getrlimit(resource.RLIMIT_NPROC)[0]}\n"
             "try:\n"
             f"    open({str(cache / 'secret.txt')!r}).read(); got['secret'] = True\n"
             "except OSError:\n    got['secret'] = False\n"
             "kids, refused = [], 0\n"
             "for _ in range(200):\n"
             "    try:\n        pid = os.fork()\n"
             "    except OSError as e:\n        refused = e.errno; break\n"
             "    if pid == 0:\n        time.sleep(30); os._exit(0)\n"
             "    kids.append(pid)\n"
             "got['forked'], got['refused'] = len(kids), refused\n"
             "for k in kids:\n    os.kill(k, 9); os.waitpid(k, 0)\n"
             "json.dump(got, open('probe.json', 'w'))\n")
    try:
        with Sandbox(cache) as sb:
            assert "uid" in sb.layers
            secret = cache / "secret.txt"  # after the cache was opened to workers: the verifier's own, mode 0600
            secret.write_text("key")
            secret.chmod(0o600)
            got = _run(sb, probe, cache)
            uid = isolation.worker_uid(str(sb.workdir))
            assert (sb.workdir / "probe.json").stat().st_uid == uid
    finally:
        FORK_SERVERS.clear()
    assert got["uid"] == got["euid"] == got["gid"] == uid != 0 and got["groups"] == []
    assert got["nproc"] == 48 and got["secret"] is False and got["umask"] == 0
    assert got["refused"] == errno.EAGAIN and 0 < got["forked"] < 48  # its threads count against the limit too


@needs("uid")
def test_without_the_mount_layers_the_uid_layer_steps_aside_rather_than_break_the_worker(tmp_path, monkeypatch):
    """Outside a mount namespace the workers' base folder is the verifier's own (0700): a worker uid could not reach
    its folder by its full path (TMPDIR, HOME), so the worker keeps its uid and says why."""
    _only_layers(monkeypatch, ["uid", "caps"])
    if os.stat(isolation.workers_base()).st_mode & 0o1:
        pytest.skip("the workers' base folder is open to others on this host")
    with Sandbox(tmp_path / "cache") as sb:
        assert "uid" not in sb.layers
        skipped = isolation.read_report(sb.workdir)["skipped"]
        assert str(isolation.workers_base()) in skipped["uid"]
        probe = "import json, os\njson.dump({'uid': os.getuid(), 'umask': os.umask(0)}, open('probe.json', 'w'))\n"
        # it keeps uid 0, and still makes what it builds in the shared cache open to the workers that changed uid
        assert _run(sb, probe, tmp_path / "cache") == {"uid": os.getuid(), "umask": 0}


def test_the_uid_layer_is_left_out_where_a_needed_folder_is_closed_to_others():
    import tempfile

    closed = Path(tempfile.mkdtemp(dir="/var/tmp"))  # pytest's own folders are closed to others already
    try:
        (closed / "pkg").mkdir()
        closed.chmod(0o700)
        assert enter._unreachable(str(closed / "pkg"), 0o5) == str(closed)
        (closed / "pkg").chmod(0o755)
        closed.chmod(0o755)
        assert enter._unreachable(str(closed / "pkg"), 0o5) is None
        assert enter._unreachable(str(closed / "pkg"), 0o3) == str(closed / "pkg")  # not writable by others
    finally:
        shutil.rmtree(closed)
    assert isolation.worker_uid("/x/cand-a") != isolation.worker_uid("/x/cand-b")
    assert isolation.UID_BASE <= isolation.worker_uid("/x/cand-a") < isolation.UID_BASE + isolation.UID_SPAN


@needs("pid")
def test_each_worker_gets_the_pid_namespace_it_asks_for_from_a_shared_fork_server(tmp_path, monkeypatch):
    """The fork server decides per worker, from the layers in that worker's environment, whether it forks it into a
    PID namespace of its own: a server first used by a worker without the `pid` layer still gives the next worker that
    asks for it one (and then one without it none again)."""
    from musacoder.judge.forkserver import FORK_SERVERS

    if not FORK_SERVERS.enabled():
        pytest.skip("the fork server is off (MUSACODER_FORK_SERVER=0): each worker's prefix makes its PID namespace")
    FORK_SERVERS.clear()
    real = isolation.probe()
    try:
        for layers, expect in ((["caps"], False), (real["worker_layers"], True), (["caps"], False)):
            monkeypatch.setattr(host, "probe", lambda layers=layers: {**real, "worker_layers": list(layers)})
            with Sandbox(tmp_path / "cache") as sb:
                own = os.readlink(f"/proc/{sb.proc.pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
                assert own is expect and ("pid" in sb.layers) is expect, sb.layers
    finally:
        FORK_SERVERS.clear()


@needs("pid")
def test_worker_cannot_signal_a_sibling(tmp_path):
    with Sandbox(tmp_path / "cache") as victim, Sandbox(tmp_path / "cache") as attacker:
        probe = ("import json, os\n"
                 f"try:\n    os.kill({victim.proc.pid}, 9); done = True\nexcept OSError:\n    done = False\n"
                 "json.dump({'done': done}, open('probe.json', 'w'))\n")
        assert _run(attacker, probe, tmp_path / "cache") == {"done": False}
        assert victim.request({"op": "exit"}, 60)["ok"]


@needs("pid", "pids-cgroup")
def test_setsid_daemon_and_fork_bomb_do_not_outlive_the_worker(tmp_path):
    before = _nested_pid_namespaces()
    probe = ("import json, os, subprocess\n"
             "subprocess.Popen(['sh', '-c', 'sleep 300 &'], start_new_session=True)\n"  # a daemon in a new session
             "subprocess.Popen(['sh', '-c', 'b() { b | b & }; b'], start_new_session=True)\n"  # a fork bomb
             "json.dump({}, open('probe.json', 'w'))\n")
    with Sandbox(tmp_path / "cache") as sb:
        ns = os.readlink(f"/proc/{sb.proc.pid}/ns/pid")
        _run(sb, probe, tmp_path / "cache")
        time.sleep(1.0)
        cgroup = Path(sb._cgroups[0])
        assert int((cgroup / "pids.current").read_text()) <= isolation.PIDS_LIMIT
    time.sleep(0.2)
    assert ns not in _nested_pid_namespaces()
    left = _nested_pid_namespaces()
    assert set(left) <= set(before), left
    assert not cgroup.exists()  # removed, so it was empty


def test_sandbox_off_enters_no_layer(tmp_path, monkeypatch):
    monkeypatch.setenv("MUSACODER_SANDBOX", "0")
    monkeypatch.setenv("MUSACODER_FORK_SERVER", "0")
    with Sandbox(tmp_path / "cache", isolate_network=False) as sb:
        assert sb.layers == []
        assert sb.request({"op": "exit"}, 60)["ok"]


def test_plain_workers_get_the_same_layers(tmp_path, monkeypatch):
    """`MUSACODER_FORK_SERVER=0`: the `python -m` worker enters the layers through its prefix and itself."""
    monkeypatch.setenv("MUSACODER_FORK_SERVER", "0")
    with Sandbox(tmp_path / "cache") as sb:
        assert sorted(sb.layers) == sorted(LAYERS)
        assert sb.request({"op": "exit"}, 60)["ok"]


# --------------------------------------------------------------------------------------------------------------------
# Native escape candidates (they share one cached build)
_KIT_SPEC = importlib.util.spec_from_file_location("make_escapes", REPO / "tests" / "adversarial" / "make_escapes.py")
_KIT = importlib.util.module_from_spec(_KIT_SPEC)
_KIT_SPEC.loader.exec_module(_KIT)
ESCAPE_CASES = list(_KIT.ATTACKS)
HOST_FILES = [Path(p) for p in _KIT.HOST_FILES]


def token_pasting_waived(monkeypatch) -> None:
    """Verdicts in this test as if the source rules allowed token pasting, which the escape kit uses to spell every
    call they look for (the rules reject `##` itself since the sixth red-team round): the other rules stay on."""
    import musacoder.legality.static as static_rules
    from musacoder.legality.static import check_static

    def rules(*args, **kwargs):
        got = check_static(*args, **kwargs)
        got.violations = [x for x in got.violations if "token pasting" not in x]
        return got

    monkeypatch.setattr(static_rules, "check_static", rules)


def test_every_escape_candidate_gets_past_the_static_rules_but_token_pasting():
    """Otherwise its test would show the static rules at work, not the sandbox: the kit hides every call the rules
    look for, and only its use of `##` is seen (waived in the tests that run it)."""
    from musacoder.legality.static import check_static

    for folder, backend in ((ESCAPES, "cpu"), (REPO / "tests" / "gpu" / "escapes", "cuda")):
        names = sorted(p.stem for p in folder.glob("*.py"))
        assert names == sorted(ESCAPE_CASES), (folder, names)  # the generator's output, all of it
        for name in names:
            rep = check_static((folder / f"{name}.py").read_text(), backend)
            assert len(rep.violations) == 1 and "token pasting" in rep.violations[0], (backend, name, rep.violations)


@pytest.mark.slow
@needs("pid", "mount-ro", "tmpfs", "seccomp", "pids-cgroup")
@pytest.mark.parametrize("name", ESCAPE_CASES)
def test_escape_candidate_is_contained(name, monkeypatch):
    from musacoder import VerifyConfig, verify

    token_pasting_waived(monkeypatch)
    monkeypatch.setenv("MUSACODER_FSIZE_LIMIT", str(64 << 20))  # the huge file ends at 64 MiB, not at 4 GiB
    for p in HOST_FILES:
        p.unlink(missing_ok=True)
    before = _nested_pid_namespaces()
    cfg = VerifyConfig(timeout_s=25.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)
    with _KIT.secret_for(name, isolation.workers_base()) as planted:
        v = verify(RELU, (ESCAPES / f"{name}.py").read_text(), backend="cpu", config=cfg)
    assert v.status  # some verdict, and this process (the verifier) is still here to read it
    if planted:  # it crashes itself when it reads another worker's file or a verifier process's memory
        assert v.status == "ok", (v.status, v.error, v.sandbox)
    time.sleep(1.5)  # the daemon writes every second, were it alive and able to
    assert not any(p.exists() for p in HOST_FILES)
    # the worker was killed before the verdict; it is reaped in the background (a fork bomb's thousand processes
    # take seconds to go), and nothing of it survives that
    deadline = time.monotonic() + 60
    while set(left := _nested_pid_namespaces()) - set(before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert set(left) <= set(before), left
    os.kill(os.getpid(), 0)


@pytest.mark.slow
def test_pool_verifies_a_normal_candidate_after_the_escapes():
    from musacoder import VerifyConfig, verify

    cfg = VerifyConfig(timeout_s=60.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)
    v = verify(RELU, (REPO / "examples" / "candidates" / "relu_cpu.py").read_text(), backend="cpu", config=cfg)
    assert v.status == "ok", v.feedback
    if "uid" in v.sandbox:  # every finished build in the cache (the escape kit's, this one's) is sealed
        assert not _KIT.unsealed_builds(cfg.cache_dir)


def test_strict_mode_names_what_is_missing():
    assert isolation.missing(["net", "pid"], ["net", "pid", "seccomp"]) == ["seccomp"]
    assert "pids-cgroup" not in isolation.STRICT_LAYERS and set(isolation.STRICT_LAYERS) < set(isolation.ALL_LAYERS)


def test_probe_keeps_the_hosts_import_path(tmp_path, monkeypatch):
    """Packages installed with `pip --target /tmp/site` lie behind the worker's private /tmp: the probe must see them
    as a worker does, or every layer reads as missing on such a host."""
    monkeypatch.setenv("PYTHONPATH", "/tmp/site:/opt/other")
    path = isolation.probe_env(tmp_path)["PYTHONPATH"].split(os.pathsep)
    assert path[1:] == ["/tmp/site", "/opt/other"]
    assert (Path(path[0]) / "musacoder" / "judge" / "isolation" / "__init__.py").is_file()


def test_layers_the_gpu_does_not_survive_are_left_out_and_reported(monkeypatch):
    """On a host whose GPU driver fails inside some layer (gVisor's GPU proxy and a fresh /dev or /proc, say), the
    probe keeps every other layer and says which it left out and why, instead of leaving every worker without a GPU
    (each verification an infra_error) or the whole sandbox off."""
    breaks = {"dev"}
    calls = []

    def fake_probe_once(layers, gpu):
        calls.append(tuple(layers))
        result = ("cuInit returned CUDA error 304" if breaks & set(layers) else "ok") if gpu else None
        return {"layers": list(layers), "skipped": {}}, result, ""

    with host.probing_with(checks.ProbeProcesses(enter_layers=fake_probe_once, gpu_under=lambda prefix: "ok",
                                                 has_gpu=lambda: True)):
        p = isolation.probe()
        assert p["worker_layers"] == [x for x in isolation.WORKER_LAYERS if x != "dev"]
        assert "GPU does not work inside it" in p["skipped"]["dev"] and "304" in p["skipped"]["dev"]
        assert p["gpu"] == "ok"
    # a host where the GPU fails even outside the layers: nothing is left out on its account
    with host.probing_with(checks.ProbeProcesses(
            enter_layers=lambda layers, gpu: ({"layers": list(layers), "skipped": {}},
                                              "cuInit returned CUDA error 100" if gpu else None, ""),
            gpu_under=lambda prefix: "ok", has_gpu=lambda: True)):
        p = isolation.probe()
        assert p["worker_layers"] == list(isolation.WORKER_LAYERS) and "even outside" in p["gpu"]


def test_gpu_selfcheck_reports_a_missing_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = isolation.gpu_selfcheck()
    assert got == "ok" or got.startswith(("libcuda", "cu", "no device"))
    assert json.loads((tmp_path / isolation.GPU_REPORT).read_text()) == got


def test_namespaces_the_gpu_does_not_survive_are_dropped_from_the_prefix(monkeypatch):
    """gVisor's GPU proxy refused the driver (CUDA error 304) in a process under `unshare --net --ipc --pid`: there
    the verifier must keep the namespaces the GPU survives, say which it dropped, and never start workers that
    cannot use the GPU."""
    if not prefix._unshare_prefix(("--net",)):
        pytest.skip("unshare is not permitted on this host")
    stand_in = checks.ProbeProcesses(
        gpu_under=lambda prefix: "cuInit returned CUDA error 304" if "--ipc" in prefix else "ok",
        enter_layers=lambda layers, gpu: ({"layers": list(layers), "skipped": {}}, "ok" if gpu else None, ""),
        has_gpu=lambda: True)
    with host.probing_with(stand_in):
        assert "--net" in isolation.server_prefix() and "--ipc" not in isolation.server_prefix()
        assert "--pid" in isolation.worker_prefix() and "--ipc" not in isolation.worker_prefix()
        p = isolation.probe()
        assert p["prefix_layers"] == ["net"]
        assert "GPU does not work inside it" in p["skipped"]["ipc"] and "304" in p["skipped"]["ipc"]


@needs("tmpfs")
def test_worker_cannot_read_users_folders_or_password_hashes(tmp_path, monkeypatch):
    """A candidate reads keys, tokens and other runs' files from home folders, or /etc/shadow (readable by its owner,
    uid 0, without any capability): it sees the folders empty and the files empty, while Python, this package and
    the build cache still work."""
    secret_dir = REPO / ".cache" / f"secret-{uuid.uuid4().hex}"
    secret_dir.mkdir(parents=True)
    (secret_dir / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("MUSACODER_SANDBOX_HIDE_EXTRA", str(secret_dir))
    assert {"/root", "/home"} & set(isolation.HIDDEN_FOLDERS) == {"/root", "/home"}
    probe = ("import json, os\n"
             f"d = {str(secret_dir)!r}\n"
             "seen = {'listing': sorted(os.listdir(d)) if os.path.isdir(d) else None}\n"
             "for f in ('/etc/shadow', '/etc/gshadow'):\n"
             "    try:\n        seen[f] = open(f).read()\n"
             "    except OSError as e:\n        seen[f] = 'error'\n"
             "json.dump(seen, open('probe.json', 'w'))\n")
    try:
        with Sandbox(tmp_path / "cache") as sb:
            got = _run(sb, probe, tmp_path / "cache")
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
    # an empty tmpfs covers the folder; where it lies under /tmp (a checkout made there) the private /tmp already hides
    # it, and the worker does not see it at all
    under_tmp = str(secret_dir.resolve()).startswith(("/tmp/", "/var/tmp/"))
    assert got["listing"] == (None if under_tmp else [])
    for f in ("/etc/shadow", "/etc/gshadow"):
        assert got[f] in ("", "error"), f


def test_probe_runs_independent_gpu_checks_side_by_side_and_once_per_process(monkeypatch):
    """Each GPU check is a process creating a CUDA context; on a host that refuses some layers the probe needs a dozen.
    Run one after another they held every verification of a batch back by seconds, so the checks that do not depend
    on each other overlap, and threads that ask at once share one probe."""
    import threading
    import time

    lock, running, most, calls = threading.Lock(), [0], [0], []

    def slow_probe_once(layers, gpu):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            calls.append(tuple(layers))
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return {"layers": list(layers), "skipped": {}}, ("error 304" if "dev" in layers else "ok") if gpu else None, ""

    with host.probing_with(checks.ProbeProcesses(enter_layers=slow_probe_once, gpu_under=lambda prefix: "ok",
                                                 has_gpu=lambda: True)):
        isolation.server_prefix(), isolation.worker_prefix()  # the prefix checks outside the timed part
        results = []
        threads = [threading.Thread(target=lambda: results.append(isolation.probe())) for _ in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        assert all(r is results[0] for r in results) and "dev" not in results[0]["worker_layers"]
        n = len(calls)  # the whole set, the bare process, the set less each layer
        assert n == len(isolation.WORKER_LAYERS) + 2, calls
        assert most[0] >= len(isolation.WORKER_LAYERS) and wall < 0.2 * n / 2, (most[0], wall, n)


def test_probe_keeps_a_layer_that_fails_the_gpu_only_without_another(monkeypatch):
    """A layer may break the driver only without another (mount-ro leaves the host's /dev/shm read-only unless dev gives
    the worker its own, say): checked alone it looks guilty, inside the whole set it is fine. The probe leaves out only the layer at fault."""
    def fake_probe_once(layers, gpu):
        s = set(layers)
        ok = "seccomp" not in s and ("mount-ro" not in s or "dev" in s)
        return {"layers": list(layers), "skipped": {}}, ("ok" if ok else "cuInit returned CUDA error 304") if gpu \
            else None, ""

    with host.probing_with(checks.ProbeProcesses(enter_layers=fake_probe_once, gpu_under=lambda prefix: "ok",
                                                 has_gpu=lambda: True)):
        p = isolation.probe()
        assert p["worker_layers"] == [x for x in isolation.WORKER_LAYERS if x != "seccomp"], p
        assert "mount-ro" not in p["skipped"] and "GPU does not work" in p["skipped"]["seccomp"]



def test_gpu_checks_are_remembered_across_processes_only_where_the_verifier_alone_can_write(tmp_path, monkeypatch):
    """Each GPU check creates a CUDA context; every verifier process paid a dozen before its first worker. Their
    answers are kept in the workers' base folder for the same host key: reused by the next process, asked again
    when the key or the age says so, never reused from a file someone else could have written (a worker that planted
    entries could switch layers off), and a check that did not run is not kept."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(checks, "PROBE_MEMO_S", 3600.0)
    checks._host_key.cache_clear()
    checks.look_afresh(False)  # reading the memo, whatever an earlier `doctor` in this process asked
    calls = []
    answer = ["ok"]

    def fake_now(layers, gpu):
        calls.append(tuple(layers))
        return {"layers": list(layers), "skipped": {}, "cgroup": "/sys/fs/cgroup/x"}, answer[0], ""

    stand_in = host.probing_with(checks.ProbeProcesses(enter_layers=fake_now, remember=True))
    stand_in.__enter__()
    try:
        first = host.probe_layers(["dev", "caps"], gpu=True)
        assert first == ({"layers": ["dev", "caps"], "skipped": {}}, "ok", "") and len(calls) == 1
        assert host.probe_layers(["dev", "caps"], gpu=True) == first and len(calls) == 1  # remembered
        memo = checks._memo_file()
        assert memo.parent == isolation.workers_base() and "cgroup" not in memo.read_text()
        assert oct(memo.stat().st_mode & 0o777) == "0o600"
        host.probe_layers(["dev"], gpu=True)
        assert len(calls) == 2  # another set of layers is another check

        monkeypatch.setenv("MUSACODER_SANDBOX_HIDE_EXTRA", "/elsewhere")  # another environment: another key
        checks._host_key.cache_clear()
        host.probe_layers(["dev", "caps"], gpu=True)
        assert len(calls) == 3
        monkeypatch.delenv("MUSACODER_SANDBOX_HIDE_EXTRA")
        checks._host_key.cache_clear()
        assert checks._memo_file() == memo

        memo.chmod(0o622)  # writable by others: not trusted
        host.probe_layers(["dev", "caps"], gpu=True)
        assert len(calls) == 4 and oct(memo.stat().st_mode & 0o777) == "0o600"  # and written afresh
        if os.getuid() == 0:
            os.chown(memo, 12345, 12345)  # owned by someone else
            host.probe_layers(["dev", "caps"], gpu=True)
            assert len(calls) == 5
        n = len(calls)

        monkeypatch.setattr(checks, "PROBE_MEMO_S", 0.0)  # never remembered
        host.probe_layers(["dev", "caps"], gpu=True)
        assert len(calls) == n + 1
        monkeypatch.setattr(checks, "PROBE_MEMO_S", 3600.0)
        checks.look_afresh()  # doctor: asks again, and records the new answer
        answer[0] = "cuInit returned CUDA error 304"
        assert host.probe_layers(["dev", "caps"], gpu=True)[1] == answer[0] and len(calls) == n + 2
        checks.look_afresh(False)
        assert host.probe_layers(["dev", "caps"], gpu=True)[1] == answer[0] and len(calls) == n + 2

        answer[0] = "the check did not run: timed out"  # not an answer of the check's own: not kept
        host.probe_layers(["pid"], gpu=True)
        host.probe_layers(["pid"], gpu=True)
        assert calls[-2:] == [("pid",), ("pid",)]
        data = json.loads(memo.read_text())  # an old entry is asked again
        for entry in data.values():
            entry["t"] -= 7200
        memo.write_text(json.dumps(data))
        host.probe_layers(["dev"], gpu=True)
        assert calls[-1] == ("dev",)
        assert host.probe_layers(["dev", "caps"], gpu=False) is not None and calls[-1] == ("dev", "caps")
    finally:
        checks.look_afresh(False)
        stand_in.__exit__(None, None, None)
        checks._host_key.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["write_host_tmp", "raw_syscall_write", _KIT.READ_ATTACK])
def test_the_harmless_escapes_do_escape_without_the_sandbox(name, monkeypatch):
    """The control: with every layer off (`MUSACODER_SANDBOX=0`) these attacks succeed (a host file written, another
    worker's file read), so their contained verdicts above show the sandbox at work, not an attack that never ran."""
    from musacoder import VerifyConfig, verify

    token_pasting_waived(monkeypatch)
    monkeypatch.setenv("MUSACODER_SANDBOX", "0")
    for p in HOST_FILES:
        p.unlink(missing_ok=True)
    try:
        with _KIT.secret_for(name, isolation.workers_base()) as planted:
            v = verify(RELU, (ESCAPES / f"{name}.py").read_text(), backend="cpu",
                       config=VerifyConfig(timeout_s=25.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1))
        written = [p for p in HOST_FILES if p.exists()]
    finally:
        for p in HOST_FILES:
            p.unlink(missing_ok=True)
    if planted:
        assert v.status == "crashed", (v.status, v.error)
    else:
        assert written and v.status == "ok", (written, v.status)


@needs("uid")
def test_under_the_broker_no_worker_uid_can_add_or_change_a_cache_entry(tmp_path, monkeypatch):
    """With the `uid` layer but no read-only mounts or Landlock (the H200 host), the cache's folders keep every
    worker out: none can plant an entry under a key (a later verification of those sources would load it), nor
    change one the broker installed."""
    _only_layers(monkeypatch, ["tmpfs", "uid", "caps"])
    import tempfile

    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs /dev/shm for a cache folder outside the private tmpfs mounts")
    # outside /tmp and /var/tmp (which the worker gets as private tmpfs, the cache bound back read-only): only the
    # cache's own folder modes keep workers out, as on a host where the cache lies elsewhere
    base = Path(tempfile.mkdtemp(prefix="musacoder-test-", dir="/dev/shm"))
    base.chmod(0o755)
    try:
        _no_worker_uid_changes_the_cache(base / "cache")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _no_worker_uid_changes_the_cache(cache: Path) -> None:
    entry = cache / "ext" / "ab" / ("ab" + "0" * 62)
    (entry / "lite").mkdir(parents=True)
    (entry / "lite" / "mc_ext.so").write_text("binary")
    (entry / "done").write_text(str(entry / "lite"))
    attacker = ("import json, os\n"
                f"e = {str(entry)!r}\n"
                "def tried(f):\n    try:\n        f(); return True\n    except OSError:\n        return False\n"
                "got = {'uid': os.getuid(),\n"
                "       'overwrite': tried(lambda: open(e + '/lite/mc_ext.so', 'w').write('evil')),\n"
                "       'done': tried(lambda: open(e + '/done', 'w').write('/elsewhere')),\n"
                "       'rename': tried(lambda: os.rename(e, e + '.old')),\n"
                "       'plant': tried(lambda: os.makedirs(os.path.dirname(e) + '/' + 'ab' + 'c' * 62)),\n"
                "       'new_prefix': tried(lambda: os.makedirs(os.path.dirname(os.path.dirname(e)) + '/zz')),\n"
                "       'root': tried(lambda: open(os.path.dirname(os.path.dirname(os.path.dirname(e))) + '/x', 'w'))}\n"
                "json.dump(got, open('probe.json', 'w'))\n")
    with Sandbox(cache) as sb:
        assert "uid" in sb.layers and "mount-ro" not in sb.layers, sb.layers
        got = _run(sb, attacker, cache)
    assert got.pop("uid") != 0
    assert got == {"overwrite": False, "done": False, "rename": False, "plant": False, "new_prefix": False,
                   "root": False}
    assert (entry / "lite" / "mc_ext.so").read_text() == "binary"


@needs("uid")
def test_a_finished_build_is_sealed_against_other_worker_uids(tmp_path, monkeypatch):
    """Without the build broker (`MUSACODER_BUILD_BROKER=0`), workers running as uids of their own build into one
    shared cache. What one built must not be changed by another (a policy sampling a group of candidates could
    otherwise sabotage its siblings' builds, or plant a binary that a later verification of the same sources loads):
    finished entries are sealed by the trusted side, while new entries, and unfinished ones a killed worker left,
    stay open to every worker."""
    monkeypatch.setenv("MUSACODER_BUILD_BROKER", "0")
    cache = tmp_path / "cache"
    key, unfinished = "ab" + "0" * 62, "ab" + "1" * 62
    entry, other = cache / "ext" / "ab" / key, cache / "ext" / "ab" / unfinished
    host_file = tmp_path / "host.txt"
    host_file.write_text("host")
    host_file.chmod(0o600)
    builder = ("import json, os\n"
               f"e, o = {str(entry)!r}, {str(other)!r}\n"
               "os.makedirs(e + '/fast', exist_ok=True); os.makedirs(o, exist_ok=True)\n"
               "open(e + '/fast/mc_ext.so', 'w').write('binary'); os.chmod(e + '/fast/mc_ext.so', 0o777)\n"
               "open(e + '/done', 'w').write(e + '/fast')\n"
               f"os.symlink({str(host_file)!r}, e + '/link')\n"
               "open(o + '/partial.o', 'w').write('half')\n"
               "json.dump({'uid': os.getuid()}, open('probe.json', 'w'))\n")
    attacker = ("import json, os\n"
                f"e, o = {str(entry)!r}, {str(other)!r}\n"
                "def tried(f):\n    try:\n        f(); return True\n    except OSError:\n        return False\n"
                "got = {'uid': os.getuid(),\n"
                "       'overwrite': tried(lambda: open(e + '/fast/mc_ext.so', 'w').write('evil')),\n"
                "       'add': tried(lambda: open(e + '/fast/extra.so', 'w').write('evil')),\n"
                "       'done': tried(lambda: open(e + '/done', 'w').write('/elsewhere')),\n"
                "       'rename': tried(lambda: os.rename(e, e + '.old')),\n"
                "       'remove': tried(lambda: os.unlink(e + '/done')),\n"
                "       'chmod': tried(lambda: os.chmod(e, 0o777)),\n"
                "       'resume': tried(lambda: open(o + '/partial.o', 'a').write('rest')),\n"
                "       'new': tried(lambda: os.makedirs(os.path.dirname(e) + '/' + 'c' * 64))}\n"
                "json.dump(got, open('probe.json', 'w'))\n")
    with Sandbox(cache) as sb:
        assert "uid" in sb.layers
        first = _run(sb, builder, cache)
        layers = sb.layers
    # only the uid that made an entry gets it sealed by naming it, and only a well-formed key
    assert isolation.seal_builds(cache, [key], layers, first["uid"] + 1) == []
    assert isolation.seal_builds(cache, [key, unfinished, "../../" + "0" * 58, None], layers,
                                 first["uid"]) == [str(entry)]
    assert all(p.stat().st_uid == os.getuid() and not p.stat().st_mode & 0o022 and not p.stat().st_mode & 0o6000
               for p in [entry, *entry.rglob("*")] if not p.is_symlink())
    assert host_file.stat().st_mode & 0o777 == 0o600  # the link's target is left alone
    with Sandbox(cache) as sb:
        got = _run(sb, attacker, cache)
    assert got["uid"] != first["uid"] and got["uid"] != 0
    assert got == {"uid": got["uid"], "overwrite": False, "add": False, "done": False, "rename": False,
                   "remove": False, "chmod": False, "resume": True, "new": True}
    assert (entry / "fast" / "mc_ext.so").read_text() == "binary"


@pytest.mark.skipif(os.getuid() != 0, reason="sealing gives entries to the verifier's user: root only")
@pytest.mark.parametrize("brokered", [True, False])
def test_opening_a_cache_to_worker_uids_seals_what_was_built_before(tmp_path, monkeypatch, brokered):
    """A cache filled before sealing existed (or by workers of another verifier) has finished entries every worker
    uid may change: opening it for `uid` workers seals them. Under the build broker its folders become 0755 (only the
    trusted side adds entries); without it 1777 (workers add entries) with Triton's cache open to all."""
    monkeypatch.setenv("MUSACODER_BUILD_BROKER", "1" if brokered else "0")
    cache = tmp_path / "cache"
    old = cache / "ext" / "cd" / ("cd" + "2" * 62)
    (old / "fast").mkdir(parents=True)
    (old / "fast" / "mc_ext.so").write_text("binary")
    (old / "done").write_text(str(old / "fast"))
    for p in (old, old / "fast", old / "fast" / "mc_ext.so", old / "done"):
        os.chown(p, 12345, 12345)
        p.chmod(0o777)
    permissions._open_cache.cache_clear()
    try:
        isolation.open_cache(cache)
    finally:
        permissions._open_cache.cache_clear()
    for folder in (cache, cache / "ext", cache / "ext" / "00", cache / "ext" / "ff"):
        assert folder.stat().st_mode & 0o7777 == (0o755 if brokered else 0o1777), folder
    for p in (old, old / "fast", old / "fast" / "mc_ext.so", old / "done"):
        st = p.stat()
        assert st.st_uid == 0 and not st.st_mode & 0o022, (p, oct(st.st_mode))
    assert (cache / "triton").exists() is not brokered
    if not brokered:
        assert (cache / "triton").stat().st_mode & 0o777 == 0o777


@pytest.mark.slow
def test_a_build_of_a_fallback_header_variant_is_loaded_from_the_cache(monkeypatch):
    """The escape kit does not compile with the light headers (the first try) but with the next variant, whose library
    torch names `<name>_v1`: a second verification of it must load the cached library (a cache that looked for the
    plain name rebuilt it for every verification, 45 s each, once finished entries became read-only)."""
    from musacoder import VerifyConfig, verify

    token_pasting_waived(monkeypatch)
    cfg = VerifyConfig(timeout_s=60.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)
    code = (ESCAPES / "write_host_tmp.py").read_text()
    try:
        first = verify(RELU, code, backend="cpu", config=cfg)
        again = verify(RELU, code, backend="cpu", config=cfg)
    finally:
        for p in HOST_FILES:
            p.unlink(missing_ok=True)
    assert first.status == again.status == "ok", (first.error, again.error)
    assert again.build_cached is True and again.build_s < 5, again.build_s


@needs("memory-cgroup")
def test_a_worker_over_its_memory_limit_is_killed_by_the_kernel_and_the_verdict_says_so(tmp_path, monkeypatch):
    """The memory cgroup caps the worker's host memory: a candidate that touches 2 GiB under a 768 MB cap is killed
    by the kernel (not the host, not the verifier), the verdict names the limit (`crashed`, the candidate's doing, on
    a task whose data is small beside the cap), its cgroups are removed, and the next candidate is verified as
    usual."""
    monkeypatch.setenv("MUSACODER_WORKER_MEMORY_MB", "768")
    hog = tmp_path / "hog.py"
    relu = (REPO / "examples" / "candidates" / "relu_cpu.py").read_text()
    hog.write_text("HOLD = b'x' * 2**31  # 2 GiB, every page written\n" + relu)  # otherwise a legal native kernel
    with Sandbox(tmp_path / "cache") as sb:
        assert "memory-cgroup" in sb.layers, sb.layers
        groups = list(sb._cgroups)
        assert any((Path(g) / name).exists() for g in groups for name in ("memory.max", "memory.limit_in_bytes"))
        with pytest.raises(WorkerDied) as died:
            sb.request({"op": "load", "code": hog.read_text(), "backend": "cpu", "device": "cpu",
                        "cache_dir": str(tmp_path / "cache"), "task_source": None}, 120)
        assert "host memory limit of 768 MB" in died.value.log_tail
    assert not any(Path(g).exists() for g in groups)
    v = verify(load_task(RELU), hog.read_text(), backend="cpu",
               config=VerifyConfig(trials=1, time_candidate=False))
    assert v.status == "crashed" and "host memory limit of 768 MB" in (v.error or ""), (v.status, v.error)
    # a task whose own data needs half the cap or more: a kill there may be the harness's, so it is not blamed on
    # the candidate
    big = verify(load_task(RELU), hog.read_text(), backend="cpu", overrides={"batch_size": 8192},
                 config=VerifyConfig(trials=1, time_candidate=False))
    assert big.status == "infra_error" and "raise MUSACODER_WORKER_MEMORY_MB" in (big.error or ""), big.error
    ok = verify(load_task(RELU), relu, backend="cpu", config=VerifyConfig(trials=1, time_candidate=False))
    assert ok.status == "ok", ok.error
