"""The parallel nvcc driver: same object as nvcc, dependency file for ninja, nvcc's errors, steps aside when unsure."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from musacoder.build import nvcc_parallel
from musacoder.build.cache import cuda_home

HOME = cuda_home()
pytestmark = pytest.mark.skipif(HOME is None, reason="needs nvcc (CUDA toolkit)")
DRIVER = Path(nvcc_parallel.__file__)
ARCH = "-gencode=arch=compute_90,code=sm_90"
GOOD = """
#include <cuda_runtime.h>
__global__ void scale_kernel(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
void launch(float* x, float a, int n) { scale_kernel<<<(n + 255) / 256, 256>>>(x, a, n); }
"""


def _run(args, tmp_path, **env):
    e = dict(os.environ, MUSACODER_REAL_NVCC=str(Path(HOME, "bin", "nvcc")), TMPDIR=str(tmp_path), **env)
    return subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, env=e, timeout=300)


def _symbols(obj: Path) -> str:
    return subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout


def test_parallel_compile_gives_an_object_with_the_kernel_and_a_depfile(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(GOOD)
    plan = nvcc_parallel.make_plan(["-c", str(src), "-o", str(tmp_path / "k.o"), ARCH], str(Path(HOME, "bin", "nvcc")))
    assert plan is not None and len(plan.device_chain) == 4 and len(plan.host_chain) == 2
    r = _run(["-MD", "-MF", str(tmp_path / "k.d"), "-c", str(src), "-o", str(tmp_path / "k.o"), ARCH], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "scale_kernel" in _symbols(tmp_path / "k.o")
    dep = (tmp_path / "k.d").read_text()
    assert dep.startswith(f"{tmp_path / 'k.o'}:") and "cuda_runtime.h" in dep
    assert not [p for p in os.listdir(tmp_path) if p.startswith("mcnv_")]  # its temporary files are removed
    # the same source through plain nvcc defines the same kernel symbols
    plain = subprocess.run([str(Path(HOME, "bin", "nvcc")), "-c", str(src), "-o", str(tmp_path / "p.o"), ARCH],
                           capture_output=True, text=True)
    assert plain.returncode == 0
    kernels = lambda s: sorted(ln.split()[-1] for ln in s.splitlines() if "scale_kernel" in ln)  # noqa: E731
    assert kernels(_symbols(tmp_path / "k.o")) == kernels(_symbols(tmp_path / "p.o"))


def test_compile_errors_are_reported_once_with_a_nonzero_exit(tmp_path):
    src = tmp_path / "bad.cu"
    src.write_text("__global__ void k(float* x) { x[0] = undefined_name; }\n")
    r = _run(["-c", str(src), "-o", str(tmp_path / "bad.o"), ARCH], tmp_path)
    assert r.returncode != 0
    assert r.stderr.count('identifier "undefined_name" is undefined') == 1
    assert not (tmp_path / "bad.o").exists()


def test_steps_aside_for_several_architectures_or_relocatable_code(tmp_path):
    nvcc = str(Path(HOME, "bin", "nvcc"))
    src = tmp_path / "k.cu"
    src.write_text(GOOD)
    two = ["-c", str(src), "-o", str(tmp_path / "k.o"), ARCH, "-gencode=arch=compute_80,code=sm_80"]
    assert nvcc_parallel.make_plan(two, nvcc) is None
    assert nvcc_parallel.make_plan(["-rdc=true", "-c", str(src), "-o", str(tmp_path / "k.o"), ARCH], nvcc) is None
    r = _run(two, tmp_path)  # handed to nvcc unchanged, which builds it
    assert r.returncode == 0, r.stderr
    assert "scale_kernel" in _symbols(tmp_path / "k.o")


def test_toolchain_env_uses_the_driver_unless_the_user_chose_an_nvcc(monkeypatch):
    from musacoder.build.cache import toolchain_env

    monkeypatch.delenv("PYTORCH_NVCC", raising=False)
    monkeypatch.delenv("MUSACODER_PARALLEL_NVCC", raising=False)
    assert "nvcc_parallel.py" in toolchain_env("cpu")["PYTORCH_NVCC"]
    monkeypatch.setenv("PYTORCH_NVCC", "ccache nvcc")
    assert "PYTORCH_NVCC" not in toolchain_env("cpu")
    monkeypatch.delenv("PYTORCH_NVCC")
    monkeypatch.setenv("MUSACODER_PARALLEL_NVCC", "0")
    assert "PYTORCH_NVCC" not in toolchain_env("cpu")
