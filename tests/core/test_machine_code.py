"""The machine-code rule (`musacoder.legality.machine_code`): code that reads a clock, found in what was compiled
(GPU SASS and PTX read by cuobjdump, CPU code by objdump, a Triton kernel's PTX), however the source spelled it; and
the source rules on the same names in Python strings and Triton's `globaltimer`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

import shutil

from musacoder.legality.machine_code import (ToolMissing, find_cuobjdump, has_device_code, library_clock_reads,
                                             ptx_clock_reads)
from musacoder.legality.static import check_static

NVCC = next((p for p in (os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),)
             if os.access(p, os.X_OK)), None)
CUOBJDUMP = find_cuobjdump()
CXX = shutil.which("g++") or shutil.which("c++")
OBJDUMP = shutil.which("objdump")

KERNELS = r'''
#define GT "%%global" "timer"
__global__ void stamped(float* o, const float* i, unsigned long long* t) {
    unsigned long long g;
    asm volatile("mov.u64 %0, " GT ";" : "=l"(g));  // the name never appears whole in the source
    o[threadIdx.x] = i[threadIdx.x] * 2.f;
    t[0] = g;
}
__global__ void cycles(long long* t) { t[0] = clock64(); }
__global__ void relu(float* o, const float* i, int n) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) o[k] = i[k] > 0.f ? i[k] : 0.f;
}
'''


@pytest.mark.skipif(NVCC is None or CUOBJDUMP is None, reason="needs nvcc and cuobjdump (CUDA toolkit or Triton's)")
def test_clock_reads_are_found_in_the_compiled_code_whatever_the_source_called_them(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(KERNELS)
    obj = tmp_path / "k.o"
    subprocess.run([NVCC, "-c", str(cu), "-o", str(obj), "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90",
                    "-gencode", "arch=compute_90,code=compute_90"], check=True, capture_output=True, timeout=300)
    assert has_device_code(obj)
    got = library_clock_reads(obj)
    assert len(got) == 2, got
    assert any("_Z7stampedPfPKfPy" in m and "SR_GLOBALTIMERLO" in m for m in got), got
    assert any("_Z6cyclesPx" in m and "SR_CLOCKLO" in m for m in got), got
    assert not any("relu" in m for m in got)


@pytest.mark.skipif(CXX is None or OBJDUMP is None, reason="needs a C++ compiler and objdump")
def test_cpu_clock_reads_are_found_in_the_compiled_code(tmp_path):
    src = tmp_path / "h.cpp"
    src.write_text('''
#include <x86intrin.h>
#define SPLIT "rdt" "sc"
unsigned long long stamp() { return __rdtsc(); }
unsigned long long hidden() { unsigned lo, hi; asm volatile(SPLIT : "=a"(lo), "=d"(hi)); return lo; }
float relu(float x) { return x > 0.f ? x : 0.f; }
''')
    obj = tmp_path / "h.o"
    subprocess.run([CXX, "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True, timeout=120)
    assert not has_device_code(obj)
    got = library_clock_reads(obj)
    assert len(got) == 2 and all("reads the CPU's clock (rdtsc)" in m for m in got), got
    assert any("function stamp()" in m for m in got) and any("function hidden()" in m for m in got), got


@pytest.mark.skipif(CXX is None or OBJDUMP is None, reason="needs a C++ compiler and objdump")
def test_the_gpu_event_timer_is_a_clock_except_in_the_guard_every_extension_carries(tmp_path):
    """Every CUDA extension imports cudaEventElapsedTime: CUDAGuard.h emits the device guard's `elapsedTime` (with
    its vtable), which calls it. That caller is allowed; a call from the candidate's own code, or to that method, is
    a clock read."""
    src = tmp_path / "e.cpp"
    src.write_text('''
extern "C" int cudaEventElapsedTime(float*, void*, void*);
namespace c10 { namespace cuda { namespace impl {
struct CUDAGuardImpl {
    __attribute__((noinline)) double elapsedTime(void* a, void* b, signed char) const {
        float ms = 0; cudaEventElapsedTime(&ms, a, b); return ms;
    }
};
}}}
float gap(void* a, void* b) { float ms = 0; cudaEventElapsedTime(&ms, a, b); return ms; }
double through_guard(void* a, void* b) { return c10::cuda::impl::CUDAGuardImpl().elapsedTime(a, b, 0); }
double unused_guard(const c10::cuda::impl::CUDAGuardImpl& g) { return g.elapsedTime(nullptr, nullptr, 0); }
''')
    obj = tmp_path / "e.o"
    subprocess.run([CXX, "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True, timeout=120)
    got = library_clock_reads(obj)
    named = {m.split(" in ")[0] for m in got}
    assert named == {"the function gap(void*, void*)", "the function through_guard(void*, void*)",
                     "the function unused_guard(c10::cuda::impl::CUDAGuardImpl const&)"}, got


@pytest.mark.skipif(OBJDUMP is None, reason="needs objdump")
def test_what_cannot_be_read_is_the_verifiers_not_the_candidates(tmp_path, monkeypatch):
    import musacoder.legality.machine_code as mc

    lib = tmp_path / "bad.so"
    lib.write_bytes(b"\x7fELF" + b"\0" * 100 + b".nv_fatbin")
    with pytest.raises(OSError):  # objdump fails on it: an error for the verifier to flag, never a verdict
        library_clock_reads(lib)
    monkeypatch.setattr(mc, "find_cuobjdump", lambda: None)
    monkeypatch.setattr(mc.shutil, "which", lambda name: None)
    with pytest.raises(ToolMissing, match="no objdump .* or cuobjdump"):
        library_clock_reads(lib)


def test_ptx_clock_registers_are_named_with_their_kernel():
    ptx = """
.visible .entry stamped(
	.param .u64 stamped_param_0
)
{
	mov.u64 	%rd1, %globaltimer;
	mov.u32 	%r1, %tid.x;
}
.visible .entry plain()
{
	mov.u32 	%r2, %ctaid.x;   // %clock in a comment is not a read
}
.entry counted()
{
	mov.u64 	%rd2, %clock64;
}
"""
    assert ptx_clock_reads(ptx) == [("stamped", "%globaltimer"), ("counted", "%clock64")]


_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    {extra}
    tl.store(o_ptr + offs, tl.maximum(x, 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 1024),)](x, o, x.numel(), BLOCK=1024)
        return o
'''


@pytest.mark.parametrize("extra", [
    "t = tl.extra.cuda.globaltimer()",
    "t = tl.inline_asm_elementwise('mov.u64 $0, %global' 'timer;', '=l', [], dtype=tl.uint64, is_pure=False, pack=1)",
    "t = tl.inline_asm_elementwise('mov.u32 $0, %clock;', '=r', [], dtype=tl.uint32, is_pure=False, pack=1)",
])
def test_a_triton_kernel_naming_a_gpu_clock_is_rejected(extra):
    got = check_static(_TRITON.replace("{extra}", extra), "triton").violations
    assert any("reads the GPU's clock" in v for v in got), got


def test_a_plain_triton_kernel_passes():
    assert check_static(_TRITON.replace("{extra}", "pass"), "triton").violations == []


def test_the_worker_notes_a_compiled_triton_kernel_that_reads_a_clock_once():
    """The worker hands each kernel Triton compiles to `_read_triton_kernel` (a GPU run shows it in
    `tests/gpu`); here, kernels as Triton's `CompiledKernel` carries them: a hash and the PTX it compiled."""
    from musacoder.judge.worker import Worker

    w = Worker()
    timed = SimpleNamespace(hash="a1", asm={"ptx": ".visible .entry k()\n{\n\tmov.u64 %rd1, %globaltimer;\n}\n"})
    plain = SimpleNamespace(hash="b2", asm={"ptx": ".visible .entry relu()\n{\n\tmov.u32 %r1, %tid.x;\n}\n"})
    for kernel in (timed, plain, timed, SimpleNamespace()):
        w._read_triton_kernel("k", kernel)
    assert len(w.device_clocks) == 1 and "Triton kernel k reads the GPU's clock (%globaltimer)" in w.device_clocks.pop()
    assert w._kernels_read == {"a1", "b2"}


@pytest.mark.parametrize("line,phrase", [
    ("CK = triton.compile(None)", "triton.compile is not allowed"),  # its kernels would launch past the launch hook
    ("import triton.testing", "triton.testing"),  # do_bench: a clock
    ("from triton.compiler import ASTSource", "triton.compiler"),
    ("DEBUG = triton.knobs.runtime.debug", "triton.knobs"),  # process-wide settings, launch hooks among them
    ("LOAD = triton.runtime.driver.active.utils.load_binary", "loads GPU code at run time"),  # a cubin from bytes
])
def test_tritons_compiler_timers_and_settings_are_off_limits(line, phrase):
    code = _TRITON.replace("{extra}", "pass").replace("class ModelNew", line + "\n\n\nclass ModelNew")
    got = check_static(code, "triton").violations
    assert any(phrase in v for v in got), got


@pytest.mark.skipif(OBJDUMP is None, reason="needs objdump")
def test_a_library_too_large_to_read_in_time_is_the_candidates(tmp_path, monkeypatch):
    """A library made so large that the tools time out on it does not pass unread."""
    import musacoder.legality.machine_code as mc

    src = tmp_path / "big.o"
    src.write_bytes(Path(OBJDUMP).read_bytes())  # any ELF file: objdump reads it
    monkeypatch.setattr(mc, "READ_TIMEOUT_S", 0.001)
    got = library_clock_reads(src)
    assert len(got) == 1 and "could not be read for clock reads within 0.001 s" in got[0], got


def test_the_workers_triton_hooks_are_watched():
    """The hooks that count Triton launches and read each compiled kernel's PTX are part of what the worker checks
    by identity as each candidate call returns: code that restored Triton's own `CompiledKernel.__init__` (so a clock
    kernel compiled next went unread) is seen."""
    pytest.importorskip("triton", reason="triton is not installed: pip install -e '.[triton]' (or .[dev])")
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    from musacoder.judge.worker import Worker

    saved = CompiledKernel.__init__, JITFunction.run
    try:
        w = Worker()
        w.record, w.triton_launches = SimpleNamespace(profiling=False), {}
        w._install_triton_hook()
        w._arm_watch()
        assert not w.check_harness()
        CompiledKernel.__init__ = saved[0]
        assert w.check_harness() and "triton.compiler.compiler.CompiledKernel.__init__" in w._harness_moved
    finally:
        CompiledKernel.__init__, JITFunction.run = saved


def test_doctor_says_which_tools_read_the_machine_code(monkeypatch):
    import musacoder.legality.machine_code as mc

    assert mc.tools_report().startswith("machine-code rule (clock reads in built extensions): ")
    monkeypatch.setattr(mc, "find_cuobjdump", lambda: None)
    monkeypatch.setattr(mc.shutil, "which", lambda name: None)
    assert "CPU code NOT read (no objdump" in mc.tools_report() and "GPU code NOT read" in mc.tools_report()

