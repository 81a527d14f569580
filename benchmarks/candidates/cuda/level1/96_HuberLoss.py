"""KernelBench level 1 / 96_HuberLoss.py: F.smooth_l1_loss (beta=1, mean). Grid-stride per-thread double accumulation of the elementwise term, one double partial per block, then a one-block double finalize."""
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
__device__ __forceinline__ double warp_sum_d(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Block-wide reductions; every thread gets the result. sh must hold >= 32 elements.
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
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        double t = (lane < nw) ? sh[lane] : 0.0;
        t = warp_sum_d(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

// One block sums per-block (or per-row) partials in double: out = sum(num) / (den ? sum(den) : den_const).
__global__ void finalize_kernel(const double* __restrict__ num, const double* __restrict__ den, long long n,
                                double den_const, float* __restrict__ out) {
    __shared__ double sh[32];
    double a = 0.0, b = 0.0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        a += num[i];
        if (den) b += den[i];
    }
    a = block_sum_d(a, sh);
    if (den) b = block_sum_d(b, sh);
    if (threadIdx.x == 0) out[0] = (float)(a / (den ? b : den_const));
}

// Grid-stride partial sums of the smooth-L1 term (beta = 1): 0.5 d^2 if |d| < 1 else |d| - 0.5, d = p - t.
// Each thread accumulates in double; one double partial per block.
__global__ void huber_partial_kernel(const float* __restrict__ p, const float* __restrict__ t, long long n,
                                     double* __restrict__ partial) {
    __shared__ double sh[32];
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float d = p[i] - t[i];
        const float ad = fabsf(d);
        const float term = ad < 1.f ? 0.5f * d * d : ad - 0.5f;
        acc += (double)term;
    }
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

torch::Tensor huber_loss_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda(), "predictions must be a CUDA tensor");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32, "predictions must be float32");
    TORCH_CHECK(targets.is_cuda(), "targets must be a CUDA tensor");
    TORCH_CHECK(targets.scalar_type() == torch::kFloat32, "targets must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(predictions));
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "predictions and targets must have the same shape");
    auto pc = predictions.contiguous();
    auto tc = targets.contiguous();
    const long long n = pc.numel();
    auto out = torch::empty({}, pc.options());
    const int threads = 256;
    long long blocks = (n + threads * 8 - 1) / (threads * 8);
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 8;
    if (blocks > max_blocks) blocks = max_blocks;
    if (blocks < 1) blocks = 1;
    auto partial = torch::empty({blocks}, pc.options().dtype(torch::kFloat64));
    auto stream = at::cuda::getCurrentCUDAStream();
    huber_partial_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(pc.data_ptr<float>(), tc.data_ptr<float>(), n,
                                                                      partial.data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    finalize_kernel<<<1, 1024, 0, stream>>>(partial.data_ptr<double>(), nullptr, blocks, (double)n, out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor huber_loss_forward(torch::Tensor predictions, torch::Tensor targets);
"""

module = load_inline(
    name="kbc_l1_huber_loss",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['huber_loss_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return module.huber_loss_forward(predictions, targets)
