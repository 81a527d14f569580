"""The C++ translator: what it maps, what it leaves alone, and what it reports."""

from musacoder.port.cpp import translate_cpp


def port(src):
    out, report = translate_cpp(src)
    return out, report


def test_headers_runtime_names_and_helpers_are_mapped():
    src = """#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>
void f(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  cudaStream_t s = at::cuda::getCurrentCUDAStream();
  float* p; cudaMalloc(&p, 16); cudaMemcpyAsync(p, p, 16, cudaMemcpyDeviceToDevice, s);
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 1, 1, 1, nullptr, p, 1, p, 1, nullptr, p, 1);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
    out, r = port(src)
    assert "#include <musa_runtime.h>" in out
    assert '#include "torch_musa/csrc/aten/musa/MUSAContext.h"' in out
    assert '#include "torch_musa/csrc/core/MUSAGuard.h"' in out
    assert "#include <mublas.h>" in out
    assert "x.is_privateuseone()" in out
    assert "c10::musa::OptionalMUSAGuard guard" in out
    assert "musaStream_t s = c10::musa::getCurrentMUSAStream();" in out
    assert "musaMalloc(&p, 16); musaMemcpyAsync(p, p, 16, musaMemcpyDeviceToDevice, s);" in out
    assert "mublasHandle_t h = at::musa::getCurrentMUSABlasHandle();" in out
    assert "mublasSgemm(h, MUBLAS_OP_N, MUBLAS_OP_T" in out
    assert "C10_MUSA_KERNEL_LAUNCH_CHECK();" in out
    assert r.complete, r.unmapped
    assert r.mapped["cudaMalloc → musaMalloc"] == 1


def test_strings_comments_and_user_names_are_left_alone():
    src = """// uses cudaMalloc in a comment
/* at::cuda::getCurrentCUDAStream */
#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be CUDA")
torch::Tensor relu_cuda(torch::Tensor x) { const char* m = "cudaMalloc failed"; int mycudaMalloc = 0; return x; }
"""
    out, r = port(src)
    assert "// uses cudaMalloc in a comment" in out
    assert "/* at::cuda::getCurrentCUDAStream */" in out
    assert '"cudaMalloc failed"' in out
    assert "relu_cuda(" in out and "mycudaMalloc" in out
    assert "x.is_privateuseone()" in out
    assert r.complete
    assert {"relu_cuda", "CHECK_CUDA", "mycudaMalloc"} <= r.kept


def test_unmapped_cuda_names_are_reported_and_kept_in_place():
    src = """#include <cub/cub.cuh>
#include <cusparse.h>
void g() {
  cudaGraph_t graph; cudaGraphLaunch(0, 0);
  auto s = at::cuda::getStreamFromPool();
  cusparseHandle_t h;
  __nv_fp8_e4m3 v;
}
"""
    out, r = port(src)
    assert not r.complete
    assert {"#include <cub/cub.cuh>", "#include <cusparse.h>", "cudaGraph_t", "cudaGraphLaunch",
            "at::cuda::getStreamFromPool", "cusparseHandle_t", "__nv_fp8_e4m3"} <= r.unmapped
    assert "cudaGraphLaunch(0, 0)" in out  # reported, not silently rewritten or dropped


def test_compiler_macros_and_device_enum():
    src = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n#endif\nauto d = torch::kCUDA;\n"
    out, r = port(src)
    assert "defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 800" in out
    assert "torch::kPrivateUse1" in out
    assert r.complete


def test_device_builtins_keep_their_names():
    src = "__global__ void k(float* x) { __shared__ float s[32]; __syncthreads(); x[0] = __shfl_xor_sync(0xffffffff, s[0], 1); }"
    out, r = port(src)
    assert out == src and r.complete and not r.mapped
