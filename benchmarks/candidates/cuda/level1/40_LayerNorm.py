"""KernelBench level 1 / 40: nn.LayerNorm over the trailing normalized_shape (eps=1e-5, affine). Multi-block two-pass statistics (mean, then centred sum of squares) with double-precision combine, then an apply kernel."""
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

#define NT 256
#define CHUNK 16384

// Pass 1 / 2: per-block partial sums over one chunk of one segment.
// CENTERED == false: sum(x); CENTERED == true: sum((x - mean[row])^2).
template <bool CENTERED>
__global__ void seg_partial_kernel(const float* __restrict__ x, float* __restrict__ partial,
                                   const float* __restrict__ mean,
                                   long long rows, long long nseg, long long seglen, long long chunks) {
    __shared__ float sh[32];
    const long long b = blockIdx.x;
    const long long chunk = b % chunks;
    const long long sr = b / chunks;            // = s * rows + r
    const long long r = sr % rows, s = sr / rows;
    const long long start = chunk * CHUNK;
    const long long len = min((long long)CHUNK, seglen - start);
    const float* __restrict__ p = x + sr * seglen + start;
    const float m = CENTERED ? mean[r] : 0.f;
    float acc = 0.f;
    for (long long i = threadIdx.x; i < len; i += NT) {
        const float v = p[i];
        if (CENTERED) { const float d = v - m; acc = fmaf(d, d, acc); }
        else acc += v;
    }
    const float t = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[r * (nseg * chunks) + s * chunks + chunk] = t;
}

// One thread per row: combine the partials in double.
// stage 0: mean[r] = sum / count.  stage 1: rstd[r] = 1 / sqrt(var + eps) (biased variance);
// optionally update BatchNorm running statistics (unbiased variance).
__global__ void seg_finalize_kernel(const float* __restrict__ partial, long long rows, long long per_row,
                                    double count, int stage, float eps, float* __restrict__ mean,
                                    float* __restrict__ rstd, float* __restrict__ run_mean,
                                    float* __restrict__ run_var, float momentum) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    double acc = 0.0;
    for (long long i = 0; i < per_row; ++i) acc += (double)partial[r * per_row + i];
    if (stage == 0) {
        mean[r] = (float)(acc / count);
    } else {
        const double var = acc / count;
        rstd[r] = (float)(1.0 / sqrt(var + (double)eps));
        if (run_mean != nullptr) {
            const double unbiased = count > 1.0 ? acc / (count - 1.0) : var;
            run_mean[r] = (1.f - momentum) * run_mean[r] + momentum * mean[r];
            run_var[r] = (1.f - momentum) * run_var[r] + momentum * (float)unbiased;
        }
    }
}

// Pass 3: y = (x - mean) * rstd * w + b.
__global__ void seg_apply_kernel(const float* __restrict__ x, float* __restrict__ y, long long n,
                                 const float* __restrict__ mean, const float* __restrict__ rstd,
                                 const float* __restrict__ w, const float* __restrict__ bias,
                                 long long rows, long long seglen, long long aff_div, long long aff_mod) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long r = (i / seglen) % rows;
        float v = (x[i] - mean[r]) * rstd[r];
        if (w != nullptr) {
            const long long a = (i / aff_div) % aff_mod;
            v = v * w[a] + bias[a];
        }
        y[i] = v;
    }
}

// Fill mean / rstd from running statistics (BatchNorm in eval mode).
__global__ void stats_from_running_kernel(const float* __restrict__ rm, const float* __restrict__ rv, long long C,
                                          float eps, float* __restrict__ mean, float* __restrict__ rstd) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) { mean[c] = rm[c]; rstd[c] = 1.f / sqrtf(rv[c] + eps); }
}

static void seg_norm_launch(const torch::Tensor& xc, torch::Tensor& y, long long rows, long long nseg, long long seglen,
                            double eps, const float* w, const float* b, long long aff_div, long long aff_mod,
                            float* run_mean, float* run_var, double momentum) {
    auto stream = at::cuda::getCurrentCUDAStream();
    const long long n = xc.numel();
    const long long chunks = (seglen + CHUNK - 1) / CHUNK;
    const long long per_row = nseg * chunks;
    auto partial = torch::empty({rows * per_row}, xc.options());
    auto mean = torch::empty({rows}, xc.options());
    auto rstd = torch::empty({rows}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const long long nblocks = rows * per_row;
    const double count = (double)nseg * (double)seglen;
    const int fin_blocks = (int)((rows + 127) / 128);
    seg_partial_kernel<false><<<(unsigned int)nblocks, NT, 0, stream>>>(xp, partial.data_ptr<float>(), nullptr, rows, nseg, seglen, chunks);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    seg_finalize_kernel<<<fin_blocks, 128, 0, stream>>>(partial.data_ptr<float>(), rows, per_row, count, 0, (float)eps,
                                                        mean.data_ptr<float>(), rstd.data_ptr<float>(), nullptr, nullptr, 0.f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    seg_partial_kernel<true><<<(unsigned int)nblocks, NT, 0, stream>>>(xp, partial.data_ptr<float>(), mean.data_ptr<float>(), rows, nseg, seglen, chunks);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    seg_finalize_kernel<<<fin_blocks, 128, 0, stream>>>(partial.data_ptr<float>(), rows, per_row, count, 1, (float)eps,
                                                        mean.data_ptr<float>(), rstd.data_ptr<float>(), run_mean, run_var, (float)momentum);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    long long ablocks = (n + 255) / 256;
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    if (ablocks > max_blocks) ablocks = max_blocks;
    seg_apply_kernel<<<(unsigned int)ablocks, 256, 0, stream>>>(xp, y.data_ptr<float>(), n, mean.data_ptr<float>(),
        rstd.data_ptr<float>(), w, b, rows, seglen, aff_div, aff_mod);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps, bool affine) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(weight.is_cuda(), "weight must be a CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32, "weight must be float32");
    TORCH_CHECK(bias.is_cuda(), "bias must be a CUDA tensor");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat32, "bias must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long N = weight.numel();   // prod(normalized_shape)
    if (xc.numel() == 0) return y;
    TORCH_CHECK(N > 0 && xc.numel() % N == 0, "normalized_shape does not match the input");
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    seg_norm_launch(xc, y, xc.numel() / N, 1, N, eps,
                    affine ? wc.data_ptr<float>() : nullptr, affine ? bc.data_ptr<float>() : nullptr,
                    1, N, nullptr, nullptr, 0.0);
    return y;
}
"""

cpp_src = r"""
torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps, bool affine);
"""

module = load_inline(
    name="kbc_l1_layernorm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['layernorm_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # parameter holder only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.ln
        if ln.weight is not None:
            return module.layernorm_forward(x, ln.weight, ln.bias, float(ln.eps), True)
        # no affine parameters: pass x itself only to carry the element count of normalized_shape
        n = 1
        for s in ln.normalized_shape:
            n *= s
        w = torch.empty(n, device=x.device, dtype=x.dtype)
        return module.layernorm_forward(x, w, w, float(ln.eps), False)
