"""KernelBench level 2 / 64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py: gelu(gelu(leaky_relu(leaky_relu(logsumexp(linear(x), dim=1, keepdim=True), 0.01), 0.01))) (exact GELU; Linear with or without bias). 128x128x8 tiled SGEMM (fp32 FMA, bias fused), then one block per row: online max / sum-exp and the scalar activation tail."""
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

__device__ __forceinline__ float gelu_f(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f)); }
__device__ __forceinline__ float sigmoid_f(float v) { return 1.f / (1.f + expf(-v)); }

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

__device__ __forceinline__ float leaky_f(float v) { return v > 0.f ? v : v * 0.01f; }
__device__ __forceinline__ float lse_tail(float l) { return gelu_f(gelu_f(leaky_f(leaky_f(l)))); }
__device__ __forceinline__ float pre(float v, float lo, float hi) { return v; }

// One block per row: l = logsumexp(pre(h[r, :])) (online max / sum-exp), then out[r] = lse_tail(l).
__global__ void row_lse_tail_kernel(const float* __restrict__ h, float* __restrict__ out, long long N, float lo, float hi) {
    __shared__ float sh[32];
    const float* __restrict__ p = h + (long long)blockIdx.x * N;
    float m = -INFINITY, s = 0.f;
    for (long long j = threadIdx.x; j < N; j += blockDim.x) {
        const float v = pre(p[j], lo, hi);
        if (v > m) { s = s * expf(m - v) + 1.f; m = v; } else { s += expf(v - m); }
    }
    const float Mx = block_max(m, sh);
    const float Mc = isinf(Mx) ? 0.f : Mx;
    const float S = block_sum(m == -INFINITY ? 0.f : s * expf(m - Mc), sh);
    if (threadIdx.x == 0) out[blockIdx.x] = lse_tail(logf(S) + Mc);
}

torch::Tensor gemm_lse_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    CHECK_F32(x);
    CHECK_F32(weight);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "expected x (B, in) and weight (out, in)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto stream = at::cuda::getCurrentCUDAStream();
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const long long M = xc.size(0), N = wc.size(0);
    const bool has_bias = bias.numel() > 0;
    if (has_bias) { CHECK_F32(bias); TORCH_CHECK(bias.numel() == N, "bias must have out_features elements"); }
    auto bc = has_bias ? bias.contiguous() : bias;
    const float* bp = has_bias ? bc.data_ptr<float>() : nullptr;
    auto h = torch::empty({M, N}, xc.options());
    linear_launch<0>(xc, wc, bp, nullptr, 0.f, 0.f, h);
    const float lo = 0.f, hi = 0.f;
    auto out = torch::empty({M, 1}, xc.options());
    if (M == 0) return out;
    TORCH_CHECK(N > 0, "logsumexp over an empty dimension");
    row_lse_tail_kernel<<<(unsigned int)M, 256, 0, stream>>>(h.data_ptr<float>(), out.data_ptr<float>(), N, lo, hi);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor gemm_lse_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

module = load_inline(
    name="kbc_l2_gemm_lse_leaky_leaky_gelu_gelu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_lse_act_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)  # parameter holder only

    def forward(self, x):
        bias = self.linear.bias if self.linear.bias is not None else torch.empty(0, device=x.device)
        return module.gemm_lse_act_forward(x, self.linear.weight, bias)
