"""KernelBench level 1 / 39_L2Norm_.py: x / ||x||_2 over dim=1 (keepdim). One block per row: block reduction, then scale."""
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

// One block per row: reduce, then scale the row.
__global__ void rownorm_kernel(const float* __restrict__ x, float* __restrict__ y, long long D) {
    __shared__ float sh[32];
    const long long row = blockIdx.x;
    const float* __restrict__ xr = x + row * D;
    float* __restrict__ yr = y + row * D;
    float acc = 0.f;
    for (long long i = threadIdx.x; i < D; i += blockDim.x) {
        const float v = xr[i];
        acc += v * v;
    }
    const float total = block_sum(acc, sh);
    const float denom = sqrtf(total);
    for (long long i = threadIdx.x; i < D; i += blockDim.x) yr[i] = xr[i] / denom;
}

torch::Tensor l2norm_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    TORCH_CHECK(x.dim() >= 2, "input must have at least 2 dimensions (normalised over dim 1)");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    // Reduce over dim 1 (keepdim): treat as [outer, D, inner]; this kernel handles inner == 1.
    long long inner = 1;
    for (int64_t d = 2; d < xc.dim(); ++d) inner *= xc.size(d);
    TORCH_CHECK(inner == 1, "this kernel expects a 2-D input (reduction over the last dim)");
    const long long D = xc.size(1);
    const long long rows = xc.size(0);
    rownorm_kernel<<<(unsigned int)rows, 512, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), D);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor l2norm_forward(torch::Tensor x);
"""

module = load_inline(
    name="kbc_l1_l2norm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['l2norm_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.l2norm_forward(x)
