"""KernelBench level 2 / 80_Gemm_Max_Subtract_GELU.py: gelu(m - mean(m, dim=1, keepdim=True)) with m = max(linear(x), dim=max_dim, keepdim=True). 128x128x8 tiled SGEMM (fp32 FMA, bias fused); the max over dim 1 (one block per row) or dim 0 (one thread per column); then one block per row of m for the mean (double accumulation), the subtraction and exact GELU."""
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

// m[r] = max_j h[r, j]; one block per row.
__global__ void row_max_kernel(const float* __restrict__ h, float* __restrict__ m, long long N) {
    __shared__ float sh[32];
    const float* __restrict__ p = h + (long long)blockIdx.x * N;
    float v = -INFINITY;
    for (long long j = threadIdx.x; j < N; j += blockDim.x) v = fmaxf(v, p[j]);
    v = block_max(v, sh);
    if (threadIdx.x == 0) m[blockIdx.x] = v;
}

// m[c] = max_r h[r, c]; one thread per column (coalesced across threads).
__global__ void col_max_kernel(const float* __restrict__ h, float* __restrict__ m, long long M, long long N) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N) return;
    float v = -INFINITY;
    for (long long r = 0; r < M; ++r) v = fmaxf(v, h[r * N + c]);
    m[c] = v;
}

// m viewed as (R, L): out[r, j] = gelu(m[r, j] - mean_j m[r, :]); one block per row.
__global__ void sub_mean_gelu_kernel(const float* __restrict__ m, float* __restrict__ out, long long L) {
    __shared__ double sh[32];
    const float* __restrict__ p = m + (long long)blockIdx.x * L;
    float* __restrict__ q = out + (long long)blockIdx.x * L;
    double acc = 0.0;
    for (long long j = threadIdx.x; j < L; j += blockDim.x) acc += (double)p[j];
    const float mean = (float)(block_sum_d(acc, sh) / (double)L);
    for (long long j = threadIdx.x; j < L; j += blockDim.x) q[j] = gelu_f(p[j] - mean);
}

torch::Tensor gemm_max_sub_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t max_dim) {
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
    TORCH_CHECK(max_dim == 0 || max_dim == 1, "max_dim must be 0 or 1 for a 2-D tensor");
    TORCH_CHECK(M > 0 && N > 0, "max over an empty dimension");
    torch::Tensor m;
    long long R, L;
    if (max_dim == 1) {
        m = torch::empty({M, 1}, xc.options());
        R = M; L = 1;
        row_max_kernel<<<(unsigned int)M, 256, 0, stream>>>(h.data_ptr<float>(), m.data_ptr<float>(), N);
    } else {
        m = torch::empty({1, N}, xc.options());
        R = 1; L = N;
        col_max_kernel<<<(unsigned int)((N + 255) / 256), 256, 0, stream>>>(h.data_ptr<float>(), m.data_ptr<float>(), M, N);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    auto out = torch::empty_like(m);
    sub_mean_gelu_kernel<<<(unsigned int)R, 256, 0, stream>>>(m.data_ptr<float>(), out.data_ptr<float>(), L);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_src = r"""
torch::Tensor gemm_max_sub_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t max_dim);
"""

module = load_inline(
    name="kbc_l2_gemm_max_subtract_gelu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_max_sub_gelu_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, max_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # parameter holder only
        self.max_dim = max_dim

    def forward(self, x):
        bias = self.gemm.bias if self.gemm.bias is not None else torch.empty(0, device=x.device)
        return module.gemm_max_sub_gelu_forward(x, self.gemm.weight, bias, int(self.max_dim) % 2)
