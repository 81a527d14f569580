"""KernelBench level 1 / 99_TripletMarginLoss.py: nn.TripletMarginLoss(margin) (p=2, eps=1e-6, mean). One block per row: both squared distances of (a - x + eps) by block reductions, row loss max(d_ap - d_an + margin, 0) into a double workspace, one-block double mean."""
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

// One block per row: ||a - p + eps||_2 and ||a - n + eps||_2 (pairwise_distance), row loss
// max(d_ap - d_an + margin, 0) into a double workspace.
__global__ void triplet_rows_kernel(const float* __restrict__ a, const float* __restrict__ p,
                                    const float* __restrict__ q, long long D, float margin, float eps,
                                    double* __restrict__ loss) {
    __shared__ float sh[32];
    const long long off = (long long)blockIdx.x * D;
    float sp = 0.f, sn = 0.f;
    for (long long i = threadIdx.x; i < D; i += blockDim.x) {
        const float av = a[off + i];
        const float dp = av - p[off + i] + eps;
        const float dn = av - q[off + i] + eps;
        sp = fmaf(dp, dp, sp);
        sn = fmaf(dn, dn, sn);
    }
    sp = block_sum(sp, sh);
    sn = block_sum(sn, sh);
    if (threadIdx.x == 0) loss[blockIdx.x] = (double)fmaxf(sqrtf(sp) - sqrtf(sn) + margin, 0.f);
}

torch::Tensor triplet_loss_forward(torch::Tensor anchor, torch::Tensor positive, torch::Tensor negative,
                                   double margin) {
    TORCH_CHECK(anchor.is_cuda(), "anchor must be a CUDA tensor");
    TORCH_CHECK(anchor.scalar_type() == torch::kFloat32, "anchor must be float32");
    TORCH_CHECK(positive.is_cuda(), "positive must be a CUDA tensor");
    TORCH_CHECK(positive.scalar_type() == torch::kFloat32, "positive must be float32");
    TORCH_CHECK(negative.is_cuda(), "negative must be a CUDA tensor");
    TORCH_CHECK(negative.scalar_type() == torch::kFloat32, "negative must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(anchor));
    TORCH_CHECK(anchor.dim() >= 1 && anchor.sizes() == positive.sizes() && anchor.sizes() == negative.sizes(),
                "anchor, positive and negative must have the same shape");
    auto ac = anchor.contiguous();
    auto pc = positive.contiguous();
    auto nc = negative.contiguous();
    const long long D = ac.size(ac.dim() - 1);
    const long long rows = D > 0 ? ac.numel() / D : 0;
    auto out = torch::empty({}, ac.options());
    auto loss = torch::empty({rows > 0 ? rows : 1}, ac.options().dtype(torch::kFloat64));
    auto stream = at::cuda::getCurrentCUDAStream();
    if (rows > 0) {
        TORCH_CHECK(rows < (1LL << 31), "too many rows");
        triplet_rows_kernel<<<(unsigned int)rows, 256, 0, stream>>>(ac.data_ptr<float>(), pc.data_ptr<float>(),
                                                                   nc.data_ptr<float>(), D, (float)margin, 1e-6f,
                                                                   loss.data_ptr<double>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    finalize_kernel<<<1, 1024, 0, stream>>>(loss.data_ptr<double>(), nullptr, rows, (double)rows,
                                           out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor triplet_loss_forward(torch::Tensor anchor, torch::Tensor positive, torch::Tensor negative,
                                   double margin);
"""

module = load_inline(
    name="kbc_l1_triplet_loss",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['triplet_loss_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = float(margin)

    def forward(self, anchor, positive, negative):
        return module.triplet_loss_forward(anchor, positive, negative, self.margin)
