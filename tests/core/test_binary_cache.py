"""Judgements of the binary and machine-code rules kept by library content (`musacoder.legality.judgements.judgement_key`,
`recall_judgement`, `keep_judgement`; `musacoder.judge.stages.binary._judge`): reused only for the same bytes, rules
and options, and never when someone other than this user could have written them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from musacoder.judge.stages import binary as stage
from musacoder.legality import binary, judgements

CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler to make an object file")

FORBIDDEN = """
namespace at { namespace native { namespace cpublas { void gemm(int); } } }
void kernel(float* x) { at::native::cpublas::gemm(3); x[0] = 1.0f; }
"""


def _object(tmp_path: Path, source: str, name: str = "k") -> Path:
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    obj = tmp_path / f"{name}.o"
    subprocess.run([CXX, "-c", "-O1", "-fPIC", str(src), "-o", str(obj)], check=True)
    return obj


def _library(tmp_path: Path, source: str, name: str = "k") -> Path:
    """A shared library made of one object, as an extension's build folder holds both (`name.o` beside `name.so`)."""
    obj = _object(tmp_path, source, name)
    lib = tmp_path / f"{name}.so"
    subprocess.run([CXX, "-shared", str(obj), "-o", str(lib)], check=True)
    return lib


def _cfg(cache: Path, vendor: bool = False):
    return SimpleNamespace(cache_dir=cache, allow_vendor_libs=vendor)


def _key(lib: Path, vendor: bool = False) -> str:
    return judgements.judgement_key(lib.read_bytes(), lib.name, vendor, stage._tools(lib))


def _plant_clean(cache: Path, lib: Path) -> Path:
    """A judgement saying `lib` is clean, kept under its key as the trusted side would keep it."""
    key = _key(lib)
    judgements.keep_judgement(cache, key, {"violations": [], "clock_reads": []})
    path = cache / judgements.JUDGEMENTS / f"{key}.json"
    assert path.is_file()
    return path


def test_a_library_is_judged_once_then_recalled(tmp_path):
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    first, _ = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True)
    assert any("at::native::cpublas::gemm" in m for m in first), first
    kept = judgements.recall_judgement(cache, _key(lib))
    assert kept is not None and kept["violations"] == first
    folder = cache / judgements.JUDGEMENTS
    assert folder.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o077 == 0 for p in folder.iterdir())
    again, _ = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True)
    assert again == first


def test_a_kept_judgement_is_what_is_used(tmp_path):
    """The cache is really read: a kept judgement under the library's key decides (here one the trusted side kept)."""
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    _plant_clean(cache, lib)
    got, clock = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True)
    assert got == [] and clock == []


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_judgement_others_may_write_is_not_trusted(tmp_path, where):
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    path = _plant_clean(cache, lib)
    os.chmod(path if where == "file" else path.parent, 0o666 if where == "file" else 0o777)
    assert judgements.recall_judgement(cache, _key(lib)) is None
    got, _ = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True)
    assert any("cpublas" in m for m in got), got


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another uid needs root")
@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_judgement_of_another_uid_is_not_trusted(tmp_path, where):
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    path = _plant_clean(cache, lib)
    os.chown(path if where == "file" else path.parent, 54321, 54321)
    assert judgements.recall_judgement(cache, _key(lib)) is None
    got, _ = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True)
    assert any("cpublas" in m for m in got), got


def test_where_workers_could_write_the_cache_nothing_kept_is_read(tmp_path):
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    _plant_clean(cache, lib)
    got, _ = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=False)
    assert any("cpublas" in m for m in got), got
    assert stage._workers_cannot_write(SimpleNamespace(layers=["uid", "mount-ro"]))
    assert not stage._workers_cannot_write(SimpleNamespace(layers=["net", "pid", "seccomp"]))


def test_a_changed_library_options_or_rules_miss(tmp_path, monkeypatch):
    lib = _object(tmp_path, FORBIDDEN)
    other = _object(tmp_path, FORBIDDEN.replace("1.0f", "2.0f"), "k2")
    data = lib.read_bytes()
    key = judgements.judgement_key(data, lib.name, False)
    assert judgements.judgement_key(other.read_bytes(), lib.name, False) != key  # other bytes
    assert judgements.judgement_key(data, lib.name, True) != key  # the vendor-library option
    assert judgements.judgement_key(data, "other.so", False) != key  # its name (the messages carry it)
    assert judgements.judgement_key(data, lib.name, False, "objdump-2") != key  # the tools
    # the rule set: a copy of musacoder.legality with one line changed is another digest
    rules = tmp_path / "legality"
    shutil.copytree(Path(binary.__file__).parent, rules, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(judgements, "_LEGALITY", rules)
    judgements.rules_digest.cache_clear()
    try:
        assert judgements.judgement_key(data, lib.name, False) == key  # the same sources: the same key
        policy = rules / "policy.py"
        policy.write_text(policy.read_text() + "\n# a rule changed\n")
        judgements.rules_digest.cache_clear()
        assert judgements.judgement_key(data, lib.name, False) != key
    finally:
        judgements.rules_digest.cache_clear()


def test_a_malformed_kept_judgement_is_ignored(tmp_path):
    lib, cache = _object(tmp_path, FORBIDDEN), tmp_path / "cache"
    path = _plant_clean(cache, lib)
    path.write_text('{"violations": "none"}')
    assert judgements.recall_judgement(cache, _key(lib)) is None
    path.write_text("not json")
    assert judgements.recall_judgement(cache, _key(lib)) is None


def test_each_part_of_a_judgement_is_timed(tmp_path):
    """What the verdict's `stage_s` reports as `binary.*`: reading and recalling, the binary rule, the CPU code; a
    recalled judgement pays only the first."""
    lib, cache = _library(tmp_path, FORBIDDEN), tmp_path / "cache"
    seconds: dict[str, float] = {}
    stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True, seconds=seconds)
    assert {"recall", "rule", "cpu_code"} <= set(seconds) and all(s >= 0 for s in seconds.values())
    again: dict[str, float] = {}
    stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True, seconds=again)
    assert set(again) == {"recall", "wait"}


def test_verifications_judging_one_library_at_once_read_it_once(tmp_path, monkeypatch):
    """The candidates of one task in a batch load the same library at the same moment: one reads its machine code,
    the others wait for it and recall the judgement it kept."""
    import threading

    from musacoder.legality import machine_code

    lib, cache, reads = _library(tmp_path, FORBIDDEN), tmp_path / "cache", []
    real = machine_code.library_clock_reads

    def counted(*a, **k):
        reads.append(1)
        return real(*a, **k)

    monkeypatch.setattr(machine_code, "library_clock_reads", counted)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(
        stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=True))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 4 and all(g == got[0] for g in got) and len(reads) == 1


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump")
def test_an_object_is_judged_for_its_imports_and_its_machine_code_read_in_its_library(tmp_path, monkeypatch):
    """An extension's build folder holds the objects it was linked from beside its library. The machine-code rule
    reads what the dynamic loader maps, the library, where the clock read compiled in the object is found; the object
    itself is not disassembled (objdump took 13 s over the 9,000 sections of a torch extension's main.o, 0.1 s over
    its library). The binary rule still judges the object's imports."""
    from musacoder.legality import machine_code

    lib = _library(tmp_path, FORBIDDEN + "unsigned long long stamp() { return __builtin_ia32_rdtsc(); }\n")
    obj, cache, reads = lib.with_suffix(".o"), tmp_path / "cache", []
    real = machine_code.library_clock_reads

    def counted(path, *a, **k):
        reads.append(Path(path).name)
        return real(path, *a, **k)

    monkeypatch.setattr(machine_code, "library_clock_reads", counted)
    assert binary.is_relocatable(obj.read_bytes()) and not binary.is_relocatable(lib.read_bytes())
    violations, clock = stage._judge(obj, _cfg(cache), glue=None, baselines=[], remember=True)
    assert any("cpublas" in m for m in violations) and clock == [] and reads == []
    violations, clock = stage._judge(lib, _cfg(cache), glue=None, baselines=[], remember=False)
    assert any("cpublas" in m for m in violations) and reads == ["k.so"]
    assert any("stamp()" in m and "rdtsc" in m for m in clock), clock
