"""KernelBench level 1 / 37: x / ||x||_F. Partial sums of squares per block, a double-precision finalize, then a scale kernel."""
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

// Stage 2: one block sums the per-block partials in double.
__global__ void finalize_kernel(const float* __restrict__ partial, int nparts, float* __restrict__ out, double scale, int take_sqrt) {
    __shared__ double shd[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += (double)partial[i];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) shd[wid] = acc;
    __syncthreads();
    if (wid == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        double t = (lane < nw) ? shd[lane] : 0.0;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
        if (lane == 0) {
            t *= scale;
            out[0] = take_sqrt ? (float)sqrt(t) : (float)t;
        }
    }
}

// Stage 1: grid-stride sum of squares, one partial per block.
__global__ void sumsq_partial_kernel(const float* __restrict__ x, long long n, float* __restrict__ partial) {
    __shared__ float sh[32];
    float acc = 0.f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float v = x[i];
        acc = fmaf(v, v, acc);
    }
    const float t = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

// Stage 3: y = x / norm, with the norm read from device memory (no host sync).
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, const float* __restrict__ norm) {
    const float d = norm[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = x[i] / d;
}

torch::Tensor frobenius_normalize(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    long long blocks = (n + threads * 8 - 1) / (threads * 8);
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 16;
    if (blocks > max_blocks) blocks = max_blocks;
    auto partial = torch::empty({blocks}, xc.options());
    auto norm = torch::empty({1}, xc.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    sumsq_partial_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(xc.data_ptr<float>(), n, partial.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    finalize_kernel<<<1, 1024, 0, stream>>>(partial.data_ptr<float>(), (int)blocks, norm.data_ptr<float>(), 1.0, 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    long long blocks2 = (n + threads - 1) / threads;
    const long long max2 = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    if (blocks2 > max2) blocks2 = max2;
    scale_kernel<<<(unsigned int)blocks2, threads, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, norm.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor frobenius_normalize(torch::Tensor x);
"""

module = load_inline(
    name="kbc_l1_frobenius",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['frobenius_normalize'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.frobenius_normalize(x)
