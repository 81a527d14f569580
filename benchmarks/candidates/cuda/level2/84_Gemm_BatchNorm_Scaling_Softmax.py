"""KernelBench level 2 / 84_Gemm_BatchNorm_Scaling_Softmax.py: softmax(scale * bn(linear(x)), dim=1) with nn.BatchNorm1d. 128x128x8 tiled SGEMM (fp32 FMA, bias fused); BatchNorm1d in training mode (the module default) uses batch statistics per feature (two-pass, double-precision combine of row-slice partials, biased variance) and updates running_mean / running_var (unbiased variance, momentum) and num_batches_tracked; in eval mode it uses the running statistics. A row kernel (one block per row, online max / sum-exp) applies the normalisation and the scale and computes the softmax."""
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
#include <cmath>

#define CHECK_F32(t) TORCH_CHECK((t).is_cuda() && (t).scalar_type() == torch::kFloat32, #t " must be a float32 CUDA tensor")
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_min(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Block-wide reductions (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
__device__ __forceinline__ float block_max(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
__device__ __forceinline__ float block_min(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_min(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : INFINITY;
        t = warp_min(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

template <int EPI>
__device__ __forceinline__ float epilogue(float v, long long c, const float* __restrict__ vec, float p0, float p1) {
    return v;
}

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define GEMM_THREADS 256

// Y = epilogue<EPI>(X @ W^T + bias), X (M, K) row-major with leading dimension lda, W (N, K) row-major
// (nn.Linear layout) with leading dimension ldw. fp32 FMA on CUDA cores (no TF32).
// 128x128 block tile, BK = 8, 256 threads, each thread owns an 8x8 sub-tile (rows ty + 16 i, cols tx + 16 j);
// shared tiles padded against bank conflicts; W is read transposed by the tile loads.
template <int EPI>
__global__ void __launch_bounds__(GEMM_THREADS) linear_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc,
    const float* __restrict__ bias, const float* __restrict__ vec, float p0, float p1) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        #pragma unroll
        for (int r = 0; r < (BM * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int row = e / BK, kk = e % BK;
            const int gm = m0 + row, gk = k0 + kk;
            As[kk][row] = (gm < M && gk < K) ? A[(long long)gm * lda + gk] : 0.f;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int col = e / BK, kk = e % BK;
            const int gn = n0 + col, gk = k0 + kk;
            Bs[kk][col] = (gn < N && gk < K) ? B[(long long)gn * ldb + gk] : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty + 16 * i];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gm = m0 + ty + 16 * i;
        if (gm >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int gn = n0 + tx + 16 * j;
            if (gn < N) {
                float v = acc[i][j];
                if (bias != nullptr) v += bias[gn];
                C[(long long)gm * ldc + gn] = epilogue<EPI>(v, gn, vec, p0, p1);
            }
        }
    }
}

// y (M, N) = epilogue<EPI>(x (M, K) @ w (N, K)^T + bias); x, w, y contiguous.
template <int EPI>
static void linear_launch(const torch::Tensor& x, const torch::Tensor& w, const float* bias, const float* vec,
                          float p0, float p1, torch::Tensor& y) {
    const long long M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K, "weight has ", w.size(1), " input features, x has ", K);
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "GEMM dimensions too large");
    if (M == 0 || N == 0) return;
    dim3 grid((unsigned int)((N + BN - 1) / BN), (unsigned int)((M + BM - 1) / BM), 1);
    linear_kernel<EPI><<<grid, GEMM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), (int)M, (int)N, (int)K,
        K, K, N, bias, vec, p0, p1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
// Per-column partial sums over a slice of rows: block (32 columns x 8 row lanes), blockIdx.y = row slice.
// CENTERED == false: sum(v); CENTERED == true: sum((v - mean[c])^2). Accumulated in double.
template <bool CENTERED>
__global__ void col_partial_kernel(const float* __restrict__ h, long long M, long long N, long long rows_per_split,
                                   const float* __restrict__ mean, double* __restrict__ partial) {
    __shared__ double sh[8][33];
    const long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    const long long r0 = (long long)blockIdx.y * rows_per_split;
    const long long r1 = min(M, r0 + rows_per_split);
    double acc = 0.0;
    if (c < N) {
        const float m = CENTERED ? mean[c] : 0.f;
        for (long long r = r0 + threadIdx.y; r < r1; r += 8) {
            const float v = h[r * N + c];
            if (CENTERED) { const double d = (double)v - (double)m; acc += d * d; }
            else acc += (double)v;
        }
    }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < N) {
        double t = 0.0;
        #pragma unroll
        for (int i = 0; i < 8; ++i) t += sh[i][threadIdx.x];
        partial[(long long)blockIdx.y * N + c] = t;
    }
}

// stage 0: mean[c] = sum / M.  stage 1: rstd[c] = 1 / sqrt(var + eps) (biased variance), and, if run_mean is
// given, the running-stat update with the unbiased variance. momentum < 0 means a cumulative average
// (nn.BatchNorm momentum=None): factor = 1 / (num_batches_tracked + 1).
__global__ void col_finalize_kernel(const double* __restrict__ partial, long long splits, long long N, long long M,
                                    int stage, float eps, float* __restrict__ mean, float* __restrict__ rstd,
                                    float* __restrict__ run_mean, float* __restrict__ run_var,
                                    const int64_t* __restrict__ nbt, float momentum) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N) return;
    double acc = 0.0;
    for (long long s = 0; s < splits; ++s) acc += partial[s * N + c];
    if (stage == 0) {
        mean[c] = (float)(acc / (double)M);
    } else {
        const double var = acc / (double)M;
        rstd[c] = (float)(1.0 / sqrt(var + (double)eps));
        if (run_mean != nullptr) {
            const double unbiased = M > 1 ? acc / (double)(M - 1) : var;
            const float f = momentum >= 0.f ? momentum : (float)(1.0 / (double)((nbt != nullptr ? *nbt : 0) + 1));
            run_mean[c] = (1.f - f) * run_mean[c] + f * mean[c];
            run_var[c] = (1.f - f) * run_var[c] + f * (float)unbiased;
        }
    }
}

__global__ void stats_from_running_kernel(const float* __restrict__ rm, const float* __restrict__ rv, long long C,
                                          float eps, float* __restrict__ mean, float* __restrict__ rstd) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) { mean[c] = rm[c]; rstd[c] = 1.f / sqrtf(rv[c] + eps); }
}

__global__ void increment_kernel(int64_t* __restrict__ p) { *p += 1; }

// Batch-norm statistics of h (M, N) per column into mean / rstd (N). Training: batch statistics (two-pass,
// double combine) and, if update, running stats + num_batches_tracked; eval: running stats.
static void bn1d_stats(const torch::Tensor& h, bool training, bool update, torch::Tensor& running_mean,
                       torch::Tensor& running_var, torch::Tensor& nbt, double momentum, double eps,
                       torch::Tensor& mean, torch::Tensor& rstd) {
    auto stream = at::cuda::getCurrentCUDAStream();
    const long long M = h.size(0), N = h.size(1);
    if (N == 0) return;
    const unsigned int fb = (unsigned int)((N + 255) / 256);
    if (!training) {
        stats_from_running_kernel<<<fb, 256, 0, stream>>>(running_mean.data_ptr<float>(), running_var.data_ptr<float>(),
                                                          N, (float)eps, mean.data_ptr<float>(), rstd.data_ptr<float>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return;
    }
    TORCH_CHECK(M > 0, "batch norm in training mode needs at least one row");
    const long long gx = (N + 31) / 32;
    long long splits = 2048 / gx;
    if (splits < 1) splits = 1;
    const long long max_splits = (M + 63) / 64;
    if (splits > max_splits) splits = max_splits;
    if (splits > 65535) splits = 65535;
    const long long rps = (M + splits - 1) / splits;
    auto partial = torch::empty({splits * N}, h.options().dtype(torch::kFloat64));
    dim3 grid((unsigned int)gx, (unsigned int)splits), block(32, 8);
    float* rm = update ? running_mean.data_ptr<float>() : nullptr;
    float* rv = update ? running_var.data_ptr<float>() : nullptr;
    const int64_t* nb = update && nbt.numel() > 0 ? nbt.data_ptr<int64_t>() : nullptr;
    col_partial_kernel<false><<<grid, block, 0, stream>>>(h.data_ptr<float>(), M, N, rps, nullptr, partial.data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    col_finalize_kernel<<<fb, 256, 0, stream>>>(partial.data_ptr<double>(), splits, N, M, 0, (float)eps,
        mean.data_ptr<float>(), rstd.data_ptr<float>(), nullptr, nullptr, nullptr, (float)momentum);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    col_partial_kernel<true><<<grid, block, 0, stream>>>(h.data_ptr<float>(), M, N, rps, mean.data_ptr<float>(), partial.data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    col_finalize_kernel<<<fb, 256, 0, stream>>>(partial.data_ptr<double>(), splits, N, M, 1, (float)eps,
        mean.data_ptr<float>(), rstd.data_ptr<float>(), rm, rv, nb, (float)momentum);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (nb != nullptr) {
        increment_kernel<<<1, 1, 0, stream>>>(nbt.data_ptr<int64_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
}

__device__ __forceinline__ float bn_scaled(const float* __restrict__ p, long long c, const float* __restrict__ mean,
                                           const float* __restrict__ rstd, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, const float* __restrict__ sc, long long nsc) {
    float v = (p[c] - mean[c]) * rstd[c];
    if (gamma != nullptr) v = v * gamma[c] + beta[c];
    return sc[nsc == 1 ? 0 : c] * v;
}

// out[r, :] = softmax(scale * bn(h[r, :])); one block per row, online max / sum-exp, then a write pass.
__global__ void bn_scale_softmax_kernel(const float* __restrict__ h, float* __restrict__ out, long long N,
                                        const float* __restrict__ mean, const float* __restrict__ rstd,
                                        const float* __restrict__ gamma, const float* __restrict__ beta,
                                        const float* __restrict__ sc, long long nsc) {
    __shared__ float sh[32];
    const float* __restrict__ p = h + (long long)blockIdx.x * N;
    float* __restrict__ q = out + (long long)blockIdx.x * N;
    float m = -INFINITY, s = 0.f;
    for (long long j = threadIdx.x; j < N; j += blockDim.x) {
        const float v = bn_scaled(p, j, mean, rstd, gamma, beta, sc, nsc);
        if (v > m) { s = s * expf(m - v) + 1.f; m = v; } else { s += expf(v - m); }
    }
    const float M = block_max(m, sh);
    const float S = block_sum(m == -INFINITY ? 0.f : s * expf(m - M), sh);
    for (long long j = threadIdx.x; j < N; j += blockDim.x)
        q[j] = expf(bn_scaled(p, j, mean, rstd, gamma, beta, sc, nsc) - M) / S;
}

torch::Tensor gemm_bn_scale_softmax_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor extra,
                   torch::Tensor bn_weight, torch::Tensor bn_bias, torch::Tensor running_mean,
                   torch::Tensor running_var, torch::Tensor num_batches_tracked,
                   bool training, bool update, double momentum, double eps, double p0) {
    CHECK_F32(x);
    CHECK_F32(weight);
    CHECK_F32(bias);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "expected x (B, in) and weight (out, in)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto stream = at::cuda::getCurrentCUDAStream();
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const long long M = xc.size(0), N = wc.size(0);
    TORCH_CHECK(bc.numel() == N, "bias must have out_features elements");
    auto h = torch::empty({M, N}, xc.options());
    linear_launch<0>(xc, wc, bc.data_ptr<float>(), nullptr, 0.f, 0.f, h);
    auto mean = torch::empty({N}, xc.options());
    auto rstd = torch::empty({N}, xc.options());
    if (update || !training) {
        CHECK_F32(running_mean);
        CHECK_F32(running_var);
        TORCH_CHECK(running_mean.numel() == N && running_var.numel() == N, "running stats must have N elements");
    }
    bn1d_stats(h, training, update, running_mean, running_var, num_batches_tracked, momentum, eps, mean, rstd);
    const bool affine = bn_weight.numel() > 0;
    if (affine) { CHECK_F32(bn_weight); CHECK_F32(bn_bias); TORCH_CHECK(bn_weight.numel() == N && bn_bias.numel() == N, "bn affine size"); }
    const float* g = affine ? bn_weight.data_ptr<float>() : nullptr;
    const float* be = affine ? bn_bias.data_ptr<float>() : nullptr;
    CHECK_F32(extra);
    auto ec = extra.contiguous();
    TORCH_CHECK(ec.numel() == 1 || ec.numel() == N, "scale must have one element or out_features elements");
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    bn_scale_softmax_kernel<<<(unsigned int)M, 512, 0, stream>>>(h.data_ptr<float>(), y.data_ptr<float>(), N,
        mean.data_ptr<float>(), rstd.data_ptr<float>(), g, be, ec.data_ptr<float>(), ec.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor gemm_bn_scale_softmax_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor extra,
                   torch::Tensor bn_weight, torch::Tensor bn_bias, torch::Tensor running_mean,
                   torch::Tensor running_var, torch::Tensor num_batches_tracked,
                   bool training, bool update, double momentum, double eps, double p0);
"""

module = load_inline(
    name="kbc_l2_gemm_batchnorm_scaling_softmax",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_bn_scale_softmax_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # parameter holder only
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)  # parameter / buffer holder only
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)  # kept for module parity; never called

    def forward(self, x):
        bn = self.bn
        training = bn.training or bn.running_mean is None
        update = bn.training and bn.track_running_stats and bn.running_mean is not None
        momentum = bn.momentum if bn.momentum is not None else -1.0
        empty = torch.empty(0, device=x.device)
        rm = bn.running_mean if bn.running_mean is not None else empty
        rv = bn.running_var if bn.running_var is not None else empty
        nbt = bn.num_batches_tracked if bn.num_batches_tracked is not None else empty
        w = bn.weight if bn.weight is not None else empty
        b = bn.bias if bn.bias is not None else empty
        return module.gemm_bn_scale_softmax_forward(x, self.gemm.weight, self.gemm.bias, self.scale, w, b, rm, rv, nbt,
                           training, update, float(momentum), float(bn.eps), 0.0)
