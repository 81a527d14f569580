"""KernelBench level 1 / 24_LogSoftmax.py: log_softmax over dim. One block per row: online max/sum-exp pass, then a write pass."""
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

__device__ __forceinline__ void online_update(float v, float& m, float& s) {
    if (v > m) { s = s * expf(m - v) + 1.f; m = v; }
    else { s += expf(v - m); }
}

// One block per row. Pass 1: online (max, sum of exp) per thread, merged across the block.
// Pass 2: write exp(x - max) / sum  (or x - max - log(sum) for log-softmax).
template <bool LOG>
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long R, int vec) {
    __shared__ float sh[32];
    const long long row = blockIdx.x;
    const float* __restrict__ xr = x + row * R;
    float* __restrict__ yr = y + row * R;
    float m = -INFINITY, s = 0.f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long i = threadIdx.x; i < (R >> 2); i += blockDim.x) {
            float4 v = x4[i];
            online_update(v.x, m, s); online_update(v.y, m, s);
            online_update(v.z, m, s); online_update(v.w, m, s);
        }
    } else {
        for (long long i = threadIdx.x; i < R; i += blockDim.x) online_update(xr[i], m, s);
    }
    const float M = block_max(m, sh);
    const float sc = (m == -INFINITY) ? 0.f : s * expf(m - M);
    const float S = block_sum(sc, sh);
    const float logS = logf(S);
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long i = threadIdx.x; i < (R >> 2); i += blockDim.x) {
            float4 v = x4[i];
            if (LOG) { v.x = v.x - M - logS; v.y = v.y - M - logS; v.z = v.z - M - logS; v.w = v.w - M - logS; }
            else { v.x = expf(v.x - M) / S; v.y = expf(v.y - M) / S; v.z = expf(v.z - M) / S; v.w = expf(v.w - M) / S; }
            y4[i] = v;
        }
    } else {
        for (long long i = threadIdx.x; i < R; i += blockDim.x) {
            const float v = xr[i];
            yr[i] = LOG ? (v - M - logS) : (expf(v - M) / S);
        }
    }
}

torch::Tensor log_softmax_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "input must have at least one dimension");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim == nd - 1, "this kernel normalizes over the last dimension only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long R = xc.size(nd - 1);
    if (xc.numel() == 0) return y;
    const long long rows = xc.numel() / R;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int vec = (R % 4 == 0 && ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0) ? 1 : 0;
    const int threads = 1024;
    softmax_rows_kernel<true><<<(unsigned int)rows, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, R, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor log_softmax_forward(torch::Tensor x, int64_t dim);
"""

module = load_inline(
    name="kbc_l1_log_softmax",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['log_softmax_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.log_softmax_forward(x, self.dim)
