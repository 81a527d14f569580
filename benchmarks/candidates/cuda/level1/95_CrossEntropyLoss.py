"""KernelBench level 1 / 95_CrossEntropyLoss.py: F.cross_entropy with class-index targets (mean, ignore_index=-100). One block per row: max and sum-of-exp block reductions, row loss logsumexp - x[target] into a double workspace, then a one-block double mean over counted rows."""
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

// One block per row: max pass, sum-of-exp pass (fp32), row loss = log(sum) + max - x[target].
// Rows whose target is ignore_index (-100) get weight 0; the mean divides by the number of counted rows.
__global__ void ce_rows_kernel(const float* __restrict__ x, const int64_t* __restrict__ target, long long C,
                               double* __restrict__ loss, double* __restrict__ weight) {
    __shared__ float sh[32];
    const long long row = blockIdx.x;
    const float* __restrict__ xr = x + row * C;
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_max(m, sh);
    float s = 0.f;
    for (long long i = threadIdx.x; i < C; i += blockDim.x) s += expf(xr[i] - m);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        const int64_t t = target[row];
        if (t == -100) {
            loss[row] = 0.0;
            weight[row] = 0.0;
        } else {
            const float lse = logf(s) + m;
            loss[row] = (t >= 0 && t < C) ? (double)(lse - xr[t]) : (double)NAN;
            weight[row] = 1.0;
        }
    }
}

torch::Tensor cross_entropy_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda(), "predictions must be a CUDA tensor");
    TORCH_CHECK(predictions.scalar_type() == torch::kFloat32, "predictions must be float32");
    TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kInt64, "targets must be a CUDA int64 tensor");
    const at::cuda::OptionalCUDAGuard guard(device_of(predictions));
    TORCH_CHECK(predictions.dim() == 2 && targets.dim() == 1 && targets.size(0) == predictions.size(0),
                "expected predictions (N, C) and class-index targets (N,)");
    auto pc = predictions.contiguous();
    auto tc = targets.contiguous();
    const long long N = pc.size(0), C = pc.size(1);
    auto out = torch::empty({}, pc.options());
    auto loss = torch::empty({N > 0 ? N : 1}, pc.options().dtype(torch::kFloat64));
    auto weight = torch::empty({N > 0 ? N : 1}, pc.options().dtype(torch::kFloat64));
    auto stream = at::cuda::getCurrentCUDAStream();
    if (N > 0) {
        TORCH_CHECK(N < (1LL << 31), "too many rows");
        ce_rows_kernel<<<(unsigned int)N, 256, 0, stream>>>(pc.data_ptr<float>(), tc.data_ptr<int64_t>(), C,
                                                           loss.data_ptr<double>(), weight.data_ptr<double>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    finalize_kernel<<<1, 1024, 0, stream>>>(loss.data_ptr<double>(), weight.data_ptr<double>(), N, 0.0,
                                           out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor cross_entropy_forward(torch::Tensor predictions, torch::Tensor targets);
"""

module = load_inline(
    name="kbc_l1_cross_entropy",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['cross_entropy_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return module.cross_entropy_forward(predictions, targets)
