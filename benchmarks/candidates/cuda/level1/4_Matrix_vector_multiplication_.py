"""KernelBench level 1 / 4: matrix-vector product A (M, K) @ B (K, 1). One block per row, float4 loads, block reduction."""
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

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Block-wide sum; every thread gets the result. sh must hold >= 32 floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}
__device__ __forceinline__ float block_max(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

// C[m] = sum_k A[m, k] * B[k]; one block per row of A.
__global__ void matvec_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                              long long K, int vec) {
    __shared__ float sh[32];
    const long long row = blockIdx.x;
    const float* __restrict__ a = A + row * K;
    float acc = 0.f;
    if (vec) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(B);
        for (long long i = threadIdx.x; i < (K >> 2); i += blockDim.x) {
            const float4 u = a4[i];
            const float4 w = b4[i];
            acc = fmaf(u.x, w.x, acc); acc = fmaf(u.y, w.y, acc);
            acc = fmaf(u.z, w.z, acc); acc = fmaf(u.w, w.w, acc);
        }
    } else {
        for (long long i = threadIdx.x; i < K; i += blockDim.x) acc = fmaf(a[i], B[i], acc);
    }
    const float total = block_sum(acc, sh);
    if (threadIdx.x == 0) C[row] = total;
}

torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(A));
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && B.size(1) == 1 && A.size(1) == B.size(0), "expected A (M, K) and B (K, 1)");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    const long long M = Ac.size(0), K = Ac.size(1);
    auto C = torch::empty({M, 1}, Ac.options());
    if (M == 0) return C;
    if (K == 0) { return torch::zeros({M, 1}, Ac.options()); }
    const float* ap = Ac.data_ptr<float>();
    const float* bp = Bc.data_ptr<float>();
    const int vec = (K % 4 == 0 && ((reinterpret_cast<uintptr_t>(ap) | reinterpret_cast<uintptr_t>(bp)) & 15) == 0) ? 1 : 0;
    matvec_kernel<<<(unsigned int)M, 512, 0, at::cuda::getCurrentCUDAStream()>>>(ap, bp, C.data_ptr<float>(), K, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_src = r"""
torch::Tensor matvec_forward(torch::Tensor A, torch::Tensor B);
"""

module = load_inline(
    name="kbc_l1_matvec",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['matvec_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return module.matvec_forward(A, B)
