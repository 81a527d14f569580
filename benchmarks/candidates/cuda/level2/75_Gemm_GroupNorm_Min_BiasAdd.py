"""KernelBench level 2 / 75_Gemm_GroupNorm_Min_BiasAdd.py: min(group_norm(linear(x)), dim=1, keepdim=True) + bias, where the (B, 1) minimum broadcast against the (1, C, 1, 1) bias gives a (1, C, B, 1) result. 128x128x8 tiled SGEMM (fp32 FMA) with the bias fused into the store; GroupNorm with one warp per (row, group): two-pass statistics (mean, then centred sum of squares), then the affine write pass; a one-block-per-row minimum and a broadcast-add kernel."""
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

template <int EPI>
__device__ __forceinline__ float post(float v, long long c, const float* __restrict__ vec, float p0, float p1) {
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
// GroupNorm of h (M, C) with G groups of C / G contiguous channels: one warp per (row, group);
// two passes over the group (mean, then centred sum of squares), then y = post<EPI>(gamma * xhat + beta).
template <int EPI>
__global__ void groupnorm_rows_kernel(const float* __restrict__ h, float* __restrict__ y, long long M, long long C,
                                      long long G, float eps, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, const float* __restrict__ vec,
                                      float p0, float p1) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= M * G) return;
    const long long row = warp / G, g = warp - row * G;
    const long long cpg = C / G;
    const long long base = row * C + g * cpg;
    const float* __restrict__ p = h + base;
    float s = 0.f;
    for (long long i = lane; i < cpg; i += 32) s += p[i];
    const float mean = warp_sum(s) / (float)cpg;
    float q = 0.f;
    for (long long i = lane; i < cpg; i += 32) { const float d = p[i] - mean; q = fmaf(d, d, q); }
    const float var = warp_sum(q) / (float)cpg;
    const float rstd = 1.f / sqrtf(var + eps);
    for (long long i = lane; i < cpg; i += 32) {
        const long long c = g * cpg + i;
        float v = (p[i] - mean) * rstd;
        if (gamma != nullptr) v = v * gamma[c] + beta[c];
        y[base + i] = post<EPI>(v, c, vec, p0, p1);
    }
}

template <int EPI>
static void groupnorm_launch(const torch::Tensor& h, torch::Tensor& y, long long G, double eps, const float* gamma,
                             const float* beta, const float* vec, float p0, float p1) {
    const long long M = h.size(0), C = h.size(1);
    TORCH_CHECK(G > 0 && C % G == 0, "num_channels must be divisible by num_groups");
    const long long warps = M * G;
    if (warps == 0) return;
    const long long blocks = (warps * 32 + 255) / 256;
    groupnorm_rows_kernel<EPI><<<(unsigned int)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        h.data_ptr<float>(), y.data_ptr<float>(), M, C, G, (float)eps, gamma, beta, vec, p0, p1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// mins[r] = min_j g[r, j]; one block per row.
__global__ void row_min_kernel(const float* __restrict__ g, float* __restrict__ mins, long long N) {
    __shared__ float sh[32];
    const float* __restrict__ p = g + (long long)blockIdx.x * N;
    float m = INFINITY;
    for (long long j = threadIdx.x; j < N; j += blockDim.x) m = fminf(m, p[j]);
    m = block_min(m, sh);
    if (threadIdx.x == 0) mins[blockIdx.x] = m;
}

// (B, 1) + (1, C, 1, 1) broadcasts to (1, C, B, 1): out[c, r] = mins[r] + bias[c].
__global__ void broadcast_add_kernel(const float* __restrict__ mins, const float* __restrict__ b2, float* __restrict__ out,
                                     long long B, long long C) {
    const long long total = B * C;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long c = i / B, r = i - c * B;
        out[i] = mins[r] + b2[c];
    }
}

torch::Tensor gemm_gn_min_biasadd_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gn_weight,
                   torch::Tensor gn_bias, int64_t num_groups, double eps, torch::Tensor extra, double p0, double p1) {
    CHECK_F32(x);
    CHECK_F32(weight);
    CHECK_F32(bias);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "expected x (B, in) and weight (out, in)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const long long M = xc.size(0), N = wc.size(0);
    TORCH_CHECK(bc.numel() == N, "bias must have out_features elements");
    const bool affine = gn_weight.numel() > 0;
    if (affine) { CHECK_F32(gn_weight); CHECK_F32(gn_bias); TORCH_CHECK(gn_weight.numel() == N && gn_bias.numel() == N, "GroupNorm affine size"); }
    auto gw = affine ? gn_weight.contiguous() : gn_weight;
    auto gb = affine ? gn_bias.contiguous() : gn_bias;
    const float* g = affine ? gw.data_ptr<float>() : nullptr;
    const float* be = affine ? gb.data_ptr<float>() : nullptr;
    CHECK_F32(extra);
    TORCH_CHECK(extra.dim() == 4 && extra.size(0) == 1 && extra.size(2) == 1 && extra.size(3) == 1,
                "bias must have shape (1, C, 1, 1)");
    auto ec = extra.contiguous();
    const long long C2 = ec.size(1);
    auto h = torch::empty({M, N}, xc.options());
    linear_launch<0>(xc, wc, bc.data_ptr<float>(), nullptr, 0.f, 0.f, h);
    auto gno = torch::empty({M, N}, xc.options());
    groupnorm_launch<0>(h, gno, num_groups, eps, g, be, nullptr, 0.f, 0.f);
    auto mins = torch::empty({M}, xc.options());
    auto out = torch::empty({1, C2, M, 1}, xc.options());
    if (M == 0 || C2 == 0) return out;
    TORCH_CHECK(N > 0, "min over an empty dimension");
    auto stream = at::cuda::getCurrentCUDAStream();
    row_min_kernel<<<(unsigned int)M, 256, 0, stream>>>(gno.data_ptr<float>(), mins.data_ptr<float>(), N);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    long long blocks = (M * C2 + 255) / 256;
    if (blocks > 65535LL * 16) blocks = 65535LL * 16;
    broadcast_add_kernel<<<(unsigned int)blocks, 256, 0, stream>>>(mins.data_ptr<float>(), ec.data_ptr<float>(),
                                                                  out.data_ptr<float>(), M, C2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor gemm_gn_min_biasadd_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gn_weight,
                   torch::Tensor gn_bias, int64_t num_groups, double eps, torch::Tensor extra, double p0, double p1);
"""

module = load_inline(
    name="kbc_l2_gemm_groupnorm_min_biasadd",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_gn_min_biasadd_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # parameter holder only
        self.group_norm = nn.GroupNorm(num_groups, out_features)  # parameter holder only
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        gn = self.group_norm
        empty = torch.empty(0, device=x.device)
        w = gn.weight if gn.weight is not None else empty
        b = gn.bias if gn.bias is not None else empty
        return module.gemm_gn_min_biasadd_forward(x, self.gemm.weight, self.gemm.bias, w, b, int(gn.num_groups), float(gn.eps),
                           self.bias, 0.0, 0.0)
