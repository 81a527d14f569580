"""The build broker (musacoder.build.broker): the trusted side builds what a worker asks for, under a key it computes
itself, and installs only regular files of the builder's own folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from musacoder.build import broker
from musacoder.build.cache import build_key, entry_dir

REPO = Path(__file__).resolve().parents[2]
KWARGS = {"cpp_sources": "int f() { return 1; }", "cuda_sources": None, "functions": ["f"]}


def fake_builder(reply: dict, files: dict[str, str] | None = None, links: dict[str, str] | None = None,
                 hard_links: dict[str, str] | None = None):
    """A builder that 'builds' by writing `files` (and `links`, `hard_links`) into a stage folder and answers
    `reply`."""
    calls = []

    def run(msg, timeout_s, installer):
        calls.append(msg)
        if reply.get("ok"):
            stage = Path(os.environ["BROKER_TEST_STAGE"])
            for rel, text in (files or {}).items():
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                (stage / rel).write_text(text)
            for rel, target in (links or {}).items():
                os.symlink(target, stage / rel)
            for rel, target in (hard_links or {}).items():
                os.link(target, stage / rel)
            installer(stage, reply)
        return reply

    run.calls = calls
    return run


@pytest.fixture
def stage(tmp_path, monkeypatch):
    s = tmp_path / "stage"
    s.mkdir()
    monkeypatch.setenv("BROKER_TEST_STAGE", str(s))
    return s


def test_the_key_is_the_trusted_sides_and_the_entry_holds_only_the_builders_own_files(tmp_path, stage):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    cache = tmp_path / "cache"
    builder = fake_builder({"ok": True, "rel": "lite", "fast": "lite"},
                           files={"lite/mc_ext.so": "binary", "lite/build.ninja": "rules"},
                           links={"lite/leak": str(secret)}, hard_links={"lite/copy.so": str(secret)})
    answer = broker.serve({"name": "anything", "kwargs": KWARGS, "backend": "cpu", "key": "f" * 64}, cache, builder,
                          time.monotonic() + 60)
    key = build_key(KWARGS, "cpu")
    assert answer == {"key": key, "ok": True, "cached": False, "fast": "lite"}
    assert builder.calls[0].key == key  # what the request named as its key is ignored
    entry = entry_dir(cache, key)
    assert sorted(p.name for p in entry.rglob("*")) == ["build.ninja", "done", "lite", "mc_ext.so"]  # no link
    assert (entry / "done").read_text() == str(entry / "lite")
    assert not (entry / "lite" / "mc_ext.so").stat().st_mode & 0o022
    assert not list(entry.parent.glob(".*-*"))  # no staging folder left beside it
    # a second request is answered from the cache, without a builder
    again = fake_builder({"ok": False})
    assert broker.serve({"kwargs": KWARGS, "backend": "cpu"}, cache, again, time.monotonic() + 60)["cached"]
    assert not again.calls


def test_a_compiler_failure_is_kept_and_a_cut_build_is_not(tmp_path, stage):
    cache = tmp_path / "cache"
    cut = fake_builder({"ok": False, "log": "the build did not finish"})
    assert broker.serve({"kwargs": KWARGS, "backend": "cpu"}, cache, cut, time.monotonic() + 60)["ok"] is False
    assert not entry_dir(cache, build_key(KWARGS, "cpu")).exists()
    failing = fake_builder({"ok": False, "log": "Error building extension 'x': error: expected ';'",
                            "deterministic": True})
    answer = broker.serve({"kwargs": KWARGS, "backend": "cpu"}, cache, failing, time.monotonic() + 60)
    assert answer["ok"] is False and "expected ';'" in answer["log"]
    remembered = broker.serve({"kwargs": KWARGS, "backend": "cpu"}, cache, fake_builder({"ok": True}),
                              time.monotonic() + 60)
    assert remembered == {"key": answer["key"], "ok": False, "cached": True, "log": answer["log"]}


def test_a_builder_naming_a_folder_outside_its_own_is_refused(tmp_path, stage):
    builder = fake_builder({"ok": True, "rel": "../.."}, files={"x.so": "binary"})
    with pytest.raises(broker.BuildRequestError, match="outside its own"):
        broker.serve({"kwargs": KWARGS, "backend": "cpu"}, tmp_path / "cache", builder, time.monotonic() + 60)
    assert not entry_dir(tmp_path / "cache", build_key(KWARGS, "cpu")).exists()


@pytest.mark.parametrize("request_", [None, "x", {"kwargs": "x", "backend": "cpu"}, {"kwargs": {}, "backend": "cpu"},
                                      {"kwargs": KWARGS, "backend": 3}])
def test_malformed_requests_are_refused(tmp_path, request_):
    with pytest.raises(broker.BuildRequestError):
        broker.serve(request_, tmp_path / "cache", fake_builder({"ok": True}), time.monotonic() + 60)


def test_no_build_starts_past_the_deadline(tmp_path, stage):
    """A build asked for at the deadline is the request's timeout (the sandbox raises `WorkerTimeout` for it), not a
    compile error; a build already in the cache is still answered."""
    builder = fake_builder({"ok": True})
    with pytest.raises(broker.BuildDeadline):
        broker.serve({"kwargs": KWARGS, "backend": "cpu"}, tmp_path / "cache", builder, time.monotonic())
    assert not builder.calls
    broker.serve({"kwargs": KWARGS, "backend": "cpu"}, tmp_path / "cache", builder, time.monotonic() + 60)
    answer = broker.serve({"kwargs": KWARGS, "backend": "cpu"}, tmp_path / "cache", builder, time.monotonic())
    assert answer["ok"] is True and answer["cached"] is True


def test_a_verification_builds_through_the_broker_and_the_worker_only_reads_the_cache(tmp_path):
    """End to end on the cpu backend: the candidate's `load_inline` is built by a separate builder and installed by
    the trusted side (entries of the verifier's user, writable by no one else); the next verification loads it."""
    from musacoder.config import VerifyConfig
    from musacoder.judge.pipeline import verify
    from musacoder.tasks import load_task

    task = load_task(REPO / "examples" / "tasks" / "relu.py")
    code = (REPO / "examples" / "candidates" / "relu_cpu.py").read_text()
    cfg = VerifyConfig(trials=1, time_candidate=False, cache_dir=tmp_path / "cache")
    first = verify(task, code, backend="cpu", config=cfg)
    assert first.status == "ok" and first.build_cached is False, first.error
    entries = [e for e in (tmp_path / "cache" / "ext").glob("*/*") if e.is_dir()]
    assert len(entries) == 1 and (entries[0] / "done").is_file()
    for p in [entries[0], *entries[0].rglob("*")]:
        st = p.lstat()
        assert st.st_uid == os.getuid() and not st.st_mode & 0o022 and not p.is_symlink(), p
    second = verify(task, code, backend="cpu", config=cfg)
    assert second.status == "ok" and second.build_cached is True
