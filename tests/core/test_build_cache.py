"""The cached builder's contract, with a stand-in for torch's load_inline (no compiler needed)."""

import os
import types

import pytest

from musacoder.build.cache import (BuildError, BuildRecord, build_key, fast_attempts,
                                   make_cached_load_inline)


def fake_loader(calls, fail_on=None):
    def real(name, build_directory, verbose, **kw):
        calls.append({"name": name, "dir": build_directory, **kw})
        if fail_on and fail_on(kw):
            raise RuntimeError("Error building extension 'x': main.cpp:1: error: boom")
        m = types.ModuleType(name)
        m.__file__ = f"{build_directory}/{name}.so"
        m.f = lambda x: x + 1
        return m

    return real


def test_candidate_build_options_do_not_clash(tmp_path):
    calls = []
    load = make_cached_load_inline(fake_loader(calls), tmp_path, "cpu", BuildRecord())
    mod = load("n", "int f(int x);", functions=["f"], verbose=True, build_directory="/somewhere/else")
    assert mod.f(1) == 2
    assert all(str(tmp_path) in c["dir"] for c in calls)


def test_lighter_headers_first_then_exact_build(tmp_path):
    calls = []
    rec = BuildRecord()
    load = make_cached_load_inline(fake_loader(calls, fail_on=lambda kw: kw.get("no_implicit_headers")), tmp_path,
                                   "cpu", rec)
    load("n", "#include <torch/extension.h>\nint f(int x);", functions=["f"])
    assert [c.get("no_implicit_headers", False) for c in calls] == [True, True, False]  # lite, slim, as written
    assert any("lite_include" in p for p in calls[0]["extra_include_paths"])
    assert "torch/extension.h" not in calls[1]["cpp_sources"][1] and rec.fast_build is None
    assert calls[2]["cpp_sources"] == "#include <torch/extension.h>\nint f(int x);"  # exactly as written


def test_failed_build_is_cached_with_its_log(tmp_path):
    calls = []
    load = make_cached_load_inline(fake_loader(calls, fail_on=lambda kw: True), tmp_path, "cpu", BuildRecord())
    for _ in range(2):
        with pytest.raises(BuildError):
            load("n", "int f(int x);", functions=["f"])
    assert len(calls) == 3  # lite, slim and exact the first time, nothing the second time


def test_wrapped_functions_count_calls(tmp_path):
    rec = BuildRecord()
    load = make_cached_load_inline(fake_loader([]), tmp_path, "cpu", rec)
    mod = load("n", "int f(int x);", functions=["f"])
    mod.f(1)
    mod.f(2)
    assert rec.calls == {"f": 2}


def test_key_ignores_name_and_build_dir_but_not_flags():
    base = {"cpp_sources": "a", "functions": ["f"]}
    assert build_key({**base, "name": "x", "verbose": True}, "cpu") == build_key({**base, "name": "y"}, "cpu")
    assert build_key({**base, "extra_cflags": ["-O3"]}, "cpu") != build_key(base, "cpu")
    assert build_key(base, "cpu") != build_key(base, "cuda")
    assert fast_attempts({**base, "no_implicit_headers": True}) == []


def test_a_cached_library_is_found_under_the_name_torch_gave_it(tmp_path):
    """torch names each further variant built under one name in a process `<name>_v<N>`: a build the light headers
    did not compile is `<name>_v1.so`, and the cache must import that, not rebuild it."""
    from musacoder.build.cache import library_name

    (tmp_path / "mc_ext_ab_v1.so").write_bytes(b"")
    (tmp_path / "mc_ext_abc.so").write_bytes(b"")  # another name that merely starts alike
    assert library_name(tmp_path, "mc_ext_ab") == "mc_ext_ab_v1"
    assert library_name(tmp_path, "mc_ext_abc") == "mc_ext_abc"
    assert library_name(tmp_path / "nothing", "mc_ext_ab") == "mc_ext_ab"


def test_a_cached_fallback_variant_is_imported_not_rebuilt(tmp_path, monkeypatch):
    """The light headers fail, the next variant builds as `<name>_v1` (torch's versioner): a later process finds the
    entry done and imports that library by its real name instead of building again."""
    import torch.utils.cpp_extension as cpp_ext

    calls = []

    def real(name, build_directory, verbose, **kw):  # the first variant fails; torch renames each further one
        calls.append(build_directory)
        if len(calls) == 1:
            raise RuntimeError("Error building extension: lite headers lack something")
        lib = f"{name}_v{len(calls) - 1}"
        open(f"{build_directory}/{lib}.so", "wb").close()
        m = types.ModuleType(lib)
        m.__file__ = f"{build_directory}/{lib}.so"
        m.f = lambda x: x + 1
        return m

    imported = []

    def fake_import(name, path, is_python_module):
        import os

        assert os.path.exists(os.path.join(path, f"{name}.so")), (name, path)
        imported.append(name)
        m = types.ModuleType(name)
        m.f = lambda x: x + 1
        return m

    monkeypatch.setattr(cpp_ext, "_import_module_from_library", fake_import)
    make_cached_load_inline(real, tmp_path, "cpu", BuildRecord())("n", "int f(int x);", functions=["f"])
    assert len(calls) == 2
    rec = BuildRecord()
    mod = make_cached_load_inline(real, tmp_path, "cpu", rec)("n", "int f(int x);", functions=["f"])
    assert mod.f(1) == 2 and len(calls) == 2  # no build the second time
    assert imported and imported[-1].endswith("_v1") and rec.builds[-1]["cached"] is True


def test_batons_a_killed_build_left_in_variant_folders_are_cleared(tmp_path):
    """torch's `load_inline` waits, without end, for a `lock` file in its build folder to go: one left in a header
    variant's folder by a worker killed mid-build must not hold every later build of that key until its timeout."""
    calls = []
    load = make_cached_load_inline(fake_loader(calls, fail_on=lambda kw: True), tmp_path / "a", "cpu", BuildRecord())
    with pytest.raises(BuildError):
        load("n", "int f(int x);", functions=["f"])
    entry = next(p for p in (tmp_path / "a" / "ext").glob("*/*") if p.is_dir())
    (entry / "error.log").unlink()  # as if the build had been killed instead of failing
    for label in ("lite", "slim"):
        (entry / label / "lock").write_text("")
    seen = []

    def real(name, build_directory, verbose, **kw):
        seen.append(os.path.exists(os.path.join(build_directory, "lock")))
        m = types.ModuleType(name)
        m.__file__ = f"{build_directory}/{name}.so"
        m.f = lambda x: x + 1
        return m

    make_cached_load_inline(real, tmp_path / "a", "cpu", BuildRecord())("n", "int f(int x);", functions=["f"])
    assert seen == [False]
