"""The CUDA → MUSA mapping table: every name the port rewrites, with the MUSA documentation or source it rests on.

One table drives three things: the translators (`musacoder.port.cpp`, `musacoder.port.python`), the shim header that
maps the MUSA names back to CUDA for the compile check (`render_shim_header`, checked in as
`shim/musa_to_cuda.h`), and the table in `docs/musa.md` (`render_markdown`).

Every entry cites a key of `SOURCES`: a file of torch_musa (MooreThreads/torch_musa, commit `TORCH_MUSA_COMMIT`)
where the MUSA name is declared or where torch_musa's own porting rules give the correspondence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TORCH_MUSA_COMMIT = "8b583b3f2fd0d9d3d9e74b9ec588a25d8bed1a30"

SOURCES: dict[str, str] = {
    "general.json": "torch_musa/utils/mapping/general.json — torch_musa's CUDA→MUSA name table for its porting tools "
                    "(runtime, muBLAS, types and macros)",
    "include.json": "torch_musa/utils/mapping/include.json — torch_musa's CUDA→MUSA header table",
    "extra.json": "torch_musa/utils/mapping/extra.json — torch_musa's extra rules for ATen/c10 CUDA names",
    "guide-ext": "torch_musa developer guide, docs/markdown/source/06_third_party_lib_extension.md — the porting rules "
                 "for C++ extensions (headers, `.is_cuda()`, `CUDA` dispatch key, `__NVCC__`)",
    "MUSAGuard.h": "torch_musa/csrc/core/MUSAGuard.h — `c10::musa::MUSAGuard`, `OptionalMUSAGuard`, "
                   "`MUSAStreamGuard`",
    "MUSAStream.h": "torch_musa/csrc/core/MUSAStream.h — `c10::musa::MUSAStream`, `getCurrentMUSAStream`, "
                    "`getDefaultMUSAStream`",
    "MUSAException.h": "torch_musa/csrc/core/MUSAException.h — `C10_MUSA_CHECK`, `C10_MUSA_KERNEL_LAUNCH_CHECK`",
    "Exceptions.h": "torch_musa/csrc/aten/musa/Exceptions.h — `AT_MUSA_CHECK`",
    "MUSAContextLight.h": "torch_musa/csrc/aten/musa/MUSAContextLight.h — `at::musa::getCurrentDeviceProperties`, "
                          "`getDeviceProperties`, `getCurrentMUSABlasHandle`",
    "musa_extension.py": "torch_musa/utils/musa_extension.py — `load_inline(name, cpp_sources, musa_sources=…, "
                         "extra_musa_cflags=…, with_musa=…)` and `load(…)`",
    "torch_musa/__init__.py": "torch_musa/__init__.py — registers `torch.musa`, renames the PrivateUse1 backend to "
                              "`musa` (device strings `musa`, `musa:N`), re-exports device, stream, event, memory "
                              "and RNG functions, adds `ProfilerActivity.MUSA` (= `PrivateUse1`)",
    "tensor_attrs.py": "torch_musa/core/tensor_attrs.py — `torch.Tensor.musa`",
    "module_attrs.py": "torch_musa/core/module_attrs.py — `torch.nn.Module.musa`",
    "memory.py": "torch_musa/core/memory.py — `torch.musa` memory statistics (`max_memory_allocated`, …)",
    "random.py": "torch_musa/core/random.py — `torch.musa.manual_seed`, `manual_seed_all`, RNG state",
    "stream.py": "torch_musa/core/stream.py — `torch.musa.Stream`, `Event` (`record`, `elapsed_time`)",
}

Kind = Literal["header", "cpp", "member", "python-attr", "python-builder", "python-kwarg", "device"]


@dataclass(frozen=True)
class Entry:
    """One rewrite: `cuda` becomes `musa`. `kind` says where it applies:

    - header: an `#include` target (written `<…>` or `"…"` as the MUSA side needs);
    - cpp: a C++ identifier, possibly namespace-qualified, matched on identifier boundaries;
    - member: a C++ member call `.name(`;
    - python-attr: an attribute of `torch.cuda` (or of the `Tensor`/`Module` classes, written `.name`);
    - python-builder: a dotted import path of the extension builder;
    - python-kwarg: a keyword argument of the builder's `load_inline`/`load`;
    - device: a device type in a device string (`"cuda"`, `"cuda:0"`).
    """

    cuda: str
    musa: str
    kind: Kind
    source: str
    note: str = ""


def _h(cuda: str, musa: str, source: str, note: str = "") -> Entry:
    return Entry(cuda, musa, "header", source, note)


def _c(cuda: str, musa: str, source: str, note: str = "") -> Entry:
    return Entry(cuda, musa, "cpp", source, note)


HEADERS: tuple[Entry, ...] = (
    _h("<cuda_runtime.h>", "<musa_runtime.h>", "include.json"),
    _h("<cuda_runtime_api.h>", "<musa_runtime_api.h>", "include.json"),
    _h("<cuda.h>", "<musa.h>", "include.json"),
    _h("<cuda_fp16.h>", "<musa_fp16.h>", "include.json"),
    _h("<cuda_bf16.h>", "<musa_bf16.h>", "include.json"),
    _h("<cublas_v2.h>", "<mublas.h>", "include.json"),
    _h("<cublas.h>", "<mublas.h>", "include.json"),
    _h("<curand_kernel.h>", "<murand_kernel.h>", "include.json"),
    _h("<ATen/cuda/CUDAContext.h>", '"torch_musa/csrc/aten/musa/MUSAContext.h"', "guide-ext"),
    _h("<c10/cuda/CUDAGuard.h>", '"torch_musa/csrc/core/MUSAGuard.h"', "guide-ext"),
    _h("<c10/cuda/CUDAStream.h>", '"torch_musa/csrc/core/MUSAStream.h"', "MUSAStream.h"),
    _h("<c10/cuda/CUDAException.h>", '"torch_musa/csrc/core/MUSAException.h"', "MUSAException.h"),
    _h("<ATen/cuda/Exceptions.h>", '"torch_musa/csrc/aten/musa/Exceptions.h"', "Exceptions.h"),
)

# Namespace-qualified ATen/c10 helpers. `at::cuda::` re-exports `c10::cuda::` in PyTorch; torch_musa keeps streams
# and guards in `c10::musa::` and the context helpers in `at::musa::`, so both CUDA spellings map to those.
QUALIFIED: tuple[Entry, ...] = (
    _c("at::cuda::getCurrentCUDAStream", "c10::musa::getCurrentMUSAStream", "MUSAStream.h"),
    _c("c10::cuda::getCurrentCUDAStream", "c10::musa::getCurrentMUSAStream", "MUSAStream.h"),
    _c("at::cuda::getDefaultCUDAStream", "c10::musa::getDefaultMUSAStream", "MUSAStream.h"),
    _c("c10::cuda::getDefaultCUDAStream", "c10::musa::getDefaultMUSAStream", "MUSAStream.h"),
    _c("at::cuda::CUDAStream", "c10::musa::MUSAStream", "MUSAStream.h"),
    _c("c10::cuda::CUDAStream", "c10::musa::MUSAStream", "MUSAStream.h"),
    _c("at::cuda::OptionalCUDAGuard", "c10::musa::OptionalMUSAGuard", "MUSAGuard.h"),
    _c("c10::cuda::OptionalCUDAGuard", "c10::musa::OptionalMUSAGuard", "MUSAGuard.h"),
    _c("at::cuda::CUDAGuard", "c10::musa::MUSAGuard", "MUSAGuard.h"),
    _c("c10::cuda::CUDAGuard", "c10::musa::MUSAGuard", "MUSAGuard.h"),
    _c("at::cuda::CUDAStreamGuard", "c10::musa::MUSAStreamGuard", "MUSAGuard.h"),
    _c("c10::cuda::CUDAStreamGuard", "c10::musa::MUSAStreamGuard", "MUSAGuard.h"),
    _c("at::cuda::getCurrentDeviceProperties", "at::musa::getCurrentDeviceProperties", "MUSAContextLight.h"),
    _c("at::cuda::getDeviceProperties", "at::musa::getDeviceProperties", "MUSAContextLight.h"),
    _c("at::cuda::getCurrentCUDABlasHandle", "at::musa::getCurrentMUSABlasHandle", "MUSAContextLight.h"),
    _c("torch::kCUDA", "torch::kPrivateUse1", "guide-ext", "MUSA is PyTorch's PrivateUse1 device"),
    _c("at::kCUDA", "at::kPrivateUse1", "guide-ext", "MUSA is PyTorch's PrivateUse1 device"),
    _c("c10::kCUDA", "c10::kPrivateUse1", "guide-ext", "MUSA is PyTorch's PrivateUse1 device"),
)

# Plain identifiers: macros, runtime API, muBLAS, types.
IDENTIFIERS: tuple[Entry, ...] = (
    # torch/c10 macros and unqualified helpers (after `using namespace at::cuda;`)
    _c("C10_CUDA_KERNEL_LAUNCH_CHECK", "C10_MUSA_KERNEL_LAUNCH_CHECK", "MUSAException.h"),
    _c("C10_CUDA_CHECK", "C10_MUSA_CHECK", "MUSAException.h"),
    _c("AT_CUDA_CHECK", "AT_MUSA_CHECK", "extra.json"),
    _c("getCurrentCUDAStream", "getCurrentMUSAStream", "extra.json"),
    _c("getDefaultCUDAStream", "getDefaultMUSAStream", "extra.json"),
    _c("OptionalCUDAGuard", "OptionalMUSAGuard", "MUSAGuard.h"),
    _c("CUDAGuard", "MUSAGuard", "extra.json"),
    _c("CUDAStreamGuard", "MUSAStreamGuard", "MUSAGuard.h"),
    _c("CUDAStream", "MUSAStream", "extra.json"),
    # compiler macros
    _c("__CUDA_ARCH__", "__MUSA_ARCH__", "general.json"),
    _c("__CUDACC__", "__MUSACC__", "general.json"),
    _c("__NVCC__", "__MUSACC__", "guide-ext"),
    _c("CUDART_VERSION", "MUSART_VERSION", "general.json"),
    # runtime API: errors
    _c("cudaError_t", "musaError_t", "general.json"),
    _c("cudaSuccess", "musaSuccess", "general.json"),
    _c("cudaErrorInvalidValue", "musaErrorInvalidValue", "general.json"),
    _c("cudaGetLastError", "musaGetLastError", "general.json"),
    _c("cudaPeekAtLastError", "musaPeekAtLastError", "general.json"),
    _c("cudaGetErrorString", "musaGetErrorString", "general.json"),
    # runtime API: devices
    _c("cudaDeviceProp", "musaDeviceProp", "general.json"),
    _c("cudaGetDeviceProperties", "musaGetDeviceProperties", "general.json"),
    _c("cudaGetDevice", "musaGetDevice", "general.json"),
    _c("cudaSetDevice", "musaSetDevice", "general.json"),
    _c("cudaDeviceSynchronize", "musaDeviceSynchronize", "general.json"),
    _c("cudaDeviceGetAttribute", "musaDeviceGetAttribute", "general.json"),
    _c("cudaDevAttrMaxSharedMemoryPerBlock", "musaDevAttrMaxSharedMemoryPerBlock", "general.json"),
    _c("cudaDevAttrMultiProcessorCount", "musaDevAttrMultiProcessorCount", "general.json"),
    _c("cudaFuncSetAttribute", "musaFuncSetAttribute", "general.json"),
    _c("cudaFuncAttributeMaxDynamicSharedMemorySize", "musaFuncAttributeMaxDynamicSharedMemorySize", "general.json"),
    _c("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "musaOccupancyMaxActiveBlocksPerMultiprocessor",
       "general.json"),
    _c("cudaLaunchKernel", "musaLaunchKernel", "general.json"),
    # runtime API: memory
    _c("cudaMalloc", "musaMalloc", "general.json"),
    _c("cudaFree", "musaFree", "general.json"),
    _c("cudaMallocAsync", "musaMallocAsync", "general.json"),
    _c("cudaFreeAsync", "musaFreeAsync", "general.json"),
    _c("cudaMemcpy", "musaMemcpy", "general.json"),
    _c("cudaMemcpyAsync", "musaMemcpyAsync", "general.json"),
    _c("cudaMemset", "musaMemset", "general.json"),
    _c("cudaMemsetAsync", "musaMemsetAsync", "general.json"),
    _c("cudaMemGetInfo", "musaMemGetInfo", "general.json"),
    _c("cudaMemcpyHostToDevice", "musaMemcpyHostToDevice", "general.json"),
    _c("cudaMemcpyDeviceToHost", "musaMemcpyDeviceToHost", "general.json"),
    _c("cudaMemcpyDeviceToDevice", "musaMemcpyDeviceToDevice", "general.json"),
    # runtime API: streams and events
    _c("cudaStream_t", "musaStream_t", "general.json"),
    _c("cudaStreamCreate", "musaStreamCreate", "general.json"),
    _c("cudaStreamDestroy", "musaStreamDestroy", "general.json"),
    _c("cudaStreamSynchronize", "musaStreamSynchronize", "general.json"),
    _c("cudaStreamDefault", "musaStreamDefault", "general.json"),
    _c("cudaEvent_t", "musaEvent_t", "general.json"),
    _c("cudaEventCreate", "musaEventCreate", "general.json"),
    _c("cudaEventRecord", "musaEventRecord", "general.json"),
    _c("cudaEventSynchronize", "musaEventSynchronize", "general.json"),
    _c("cudaEventElapsedTime", "musaEventElapsedTime", "general.json"),
    _c("cudaEventDestroy", "musaEventDestroy", "general.json"),
    # data types
    _c("cudaDataType", "musaDataType", "general.json"),
    _c("CUDA_R_32F", "MUSA_R_32F", "general.json"),
    _c("__nv_bfloat16", "__mt_bfloat16", "general.json"),
    _c("nv_bfloat16", "mt_bfloat16", "general.json"),
    # cuBLAS → muBLAS
    _c("cublasHandle_t", "mublasHandle_t", "general.json"),
    _c("cublasStatus_t", "mublasStatus_t", "general.json"),
    _c("cublasCreate", "mublasCreate", "general.json"),
    _c("cublasDestroy", "mublasDestroy", "general.json"),
    _c("cublasSetStream", "mublasSetStream", "general.json"),
    _c("cublasSgemm", "mublasSgemm", "general.json"),
    _c("cublasSgemmStridedBatched", "mublasSgemmStridedBatched", "general.json"),
    _c("cublasGemmEx", "mublasGemmEx", "general.json"),
    _c("CUBLAS_OP_N", "MUBLAS_OP_N", "general.json"),
    _c("CUBLAS_OP_T", "MUBLAS_OP_T", "general.json"),
    _c("CUBLAS_STATUS_SUCCESS", "MUBLAS_STATUS_SUCCESS", "general.json"),
    _c("CUBLAS_COMPUTE_32F", "MUBLAS_COMPUTE_32F", "general.json"),
)

MEMBERS: tuple[Entry, ...] = (
    Entry("is_cuda", "is_privateuseone", "member", "guide-ext", "`t.is_cuda()` → `t.is_privateuseone()`"),
)

# Python: torch.cuda.<name> → torch.musa.<name> (all re-exported by torch_musa/__init__.py).
_TORCH_MUSA_ATTRS = {
    "torch_musa/__init__.py": ("is_available", "device_count", "current_device", "set_device", "synchronize",
                               "get_device_name", "get_device_capability", "get_device_properties", "device",
                               "current_stream", "default_stream", "stream", "set_stream"),
    "stream.py": ("Stream", "Event"),
    "memory.py": ("empty_cache", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                  "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated", "mem_get_info",
                  "memory_summary"),
    "random.py": ("manual_seed", "manual_seed_all", "get_rng_state", "set_rng_state", "seed", "initial_seed"),
}
PYTHON_ATTRS: tuple[Entry, ...] = tuple(
    Entry(f"torch.cuda.{name}", f"torch.musa.{name}", "python-attr", src)
    for src, names in _TORCH_MUSA_ATTRS.items() for name in names
) + (
    Entry(".cuda", ".musa", "python-attr", "tensor_attrs.py", "`Tensor.cuda()`/`Module.cuda()` (module_attrs.py)"),
    Entry("ProfilerActivity.CUDA", "ProfilerActivity.MUSA", "python-attr", "torch_musa/__init__.py"),
)

PYTHON_BUILDER: tuple[Entry, ...] = (
    Entry("torch.utils.cpp_extension", "torch_musa.utils.musa_extension", "python-builder", "musa_extension.py",
          "`load_inline` and `load`; imports of other names from the module are reported"),
    Entry("cuda_sources", "musa_sources", "python-kwarg", "musa_extension.py"),
    Entry("extra_cuda_cflags", "extra_musa_cflags", "python-kwarg", "musa_extension.py"),
    Entry("with_cuda", "with_musa", "python-kwarg", "musa_extension.py"),
)

DEVICES: tuple[Entry, ...] = (
    Entry("cuda", "musa", "device", "torch_musa/__init__.py", "`\"cuda\"`, `\"cuda:N\"`, `torch.device(\"cuda\", N)`"),
)

ALL: tuple[Entry, ...] = HEADERS + QUALIFIED + IDENTIFIERS + MEMBERS + PYTHON_ATTRS + PYTHON_BUILDER + DEVICES

# Names the extension builder module exports that the port maps (everything else imported from it is reported).
BUILDER_FUNCTIONS = ("load_inline", "load")

# Device-side built-ins that keep their CUDA names in MUSA code: torch_musa's name table (general.json) has no entry
# for them, i.e. its porting tools leave them as they are.
KEPT_DEVICE_BUILTINS = ("__global__", "__device__", "__shared__", "__syncthreads", "__shfl_xor_sync",
                        "__shfl_up_sync", "__shfl_down_sync", "__shfl_sync", "atomicAdd", "__ldg", "warpSize",
                        "threadIdx", "blockIdx", "blockDim", "gridDim")


_PREDEFINED_MACROS = ("__CUDA_ARCH__", "__CUDACC__", "__NVCC__", "CUDART_VERSION")


def cpp_table() -> dict[str, Entry]:
    """C++ identifier (qualified or plain) → entry, for the translator."""
    return {e.cuda: e for e in QUALIFIED + IDENTIFIERS}


def header_table() -> dict[str, Entry]:
    """`<cuda header>` → entry."""
    return {e.cuda: e for e in HEADERS}


def render_markdown() -> str:
    """The mapping table as Markdown (docs/musa.md embeds it between markers)."""
    lines = ["| CUDA | MUSA | where | source |", "|---|---|---|---|"]
    for e in ALL:
        note = f" ({e.note})" if e.note else ""
        lines.append(f"| `{e.cuda}` | `{e.musa}` | {e.kind}{note} | {e.source} |")
    lines += ["", "Sources (MooreThreads/torch_musa at commit " f"`{TORCH_MUSA_COMMIT[:12]}`):", ""]
    lines += [f"- **{k}**: {v}" for k, v in SOURCES.items()]
    return "\n".join(lines) + "\n"


def render_shim_files() -> dict[str, str]:
    """The shim include directory (`shim/include/`): `musa_to_cuda.h` plus one file per MUSA header the port writes
    (`musa_runtime.h`, `torch_musa/csrc/core/MUSAGuard.h`, …), each including its CUDA original and the shim."""
    files = {"musa_to_cuda.h": render_shim_header()}
    for e in HEADERS:
        path = e.musa[1:-1]
        if path in files:
            continue
        files[path] = ("// Generated from musacoder.port.mapping (render_shim_files); do not edit by hand.\n"
                       f"// Stands in for MUSA's {path}: the CUDA header it was ported from, then the name shim.\n"
                       "#pragma once\n"
                       f"#include {e.cuda}\n"
                       "#include <musa_to_cuda.h>\n")
    return files


def render_shim_header() -> str:
    """`musa_to_cuda.h`: every C++ MUSA name of the table defined back to its CUDA name, so ported sources compile
    with nvcc against PyTorch's CUDA headers. Generated from this table (tests keep the checked-in copy in sync)."""
    out = [
        "// Generated from musacoder.port.mapping (render_shim_header); do not edit by hand.",
        "// Maps the MUSA names the port writes back to CUDA so ported sources compile with nvcc.",
        "#pragma once",
        "#include <cuda_runtime.h>",
        "#include <ATen/core/TensorBase.h>",
        "#include <c10/core/Device.h>",
        "#include <c10/core/DeviceType.h>",
        "#include <ATen/cuda/CUDAContext.h>",
        "#include <c10/cuda/CUDAGuard.h>",
        "#include <c10/cuda/CUDAStream.h>",
        "#include <c10/cuda/CUDAException.h>",
        "",
        "// torch_musa keeps streams/guards in c10::musa and context helpers in at::musa.",
        "namespace c10 { namespace musa = ::c10::cuda; }",
        "namespace at { namespace musa = ::at::cuda; }",
        "",
    ]
    seen: set[str] = set()
    for e in QUALIFIED + IDENTIFIERS + MEMBERS:
        musa = e.musa.rsplit("::", 1)[-1]
        cuda = e.cuda.rsplit("::", 1)[-1]
        if musa in seen or musa == cuda:
            continue
        seen.add(musa)
        if cuda in _PREDEFINED_MACROS:  # defined only where the CUDA compiler defines the original
            out += [f"#if defined({cuda}) && !defined({musa})", f"#define {musa} {cuda}", "#endif"]
        else:
            out.append(f"#define {musa} {cuda}")
    return "\n".join(out) + "\n"
