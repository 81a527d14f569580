"""KernelBench level 1 / 12: diag(A) @ B computed as a row scaling C[i, j] = A[i] * B[i, j] (never forms diag(A))."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

// C[i, j] = A[i] * B[i, j]; 2-D grid: blockIdx.y = row chunk, x covers columns.
__global__ void diag_mul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                long long N, long long M) {
    const long long total = N * M;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / M;
        c[i] = a[row] * b[i];
    }
}

torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(B));
    TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && A.size(0) == B.size(0), "expected A (N,) and B (N, M)");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    auto C = torch::empty_like(Bc);
    const long long N = Bc.size(0), M = Bc.size(1);
    if (N * M == 0) return C;
    const int threads = 256;
    long long blocks = (N * M + threads - 1) / threads;
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    if (blocks > max_blocks) blocks = max_blocks;
    diag_mul_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), N, M);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_src = r"""
torch::Tensor diag_matmul_forward(torch::Tensor A, torch::Tensor B);
"""

module = load_inline(
    name="kbc_l1_diag_matmul",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['diag_matmul_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.diag_matmul_forward(A, B)
