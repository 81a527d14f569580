"""KernelBench level 1 / 97_ScaledDotProductAttention.py: softmax(Q K^T / sqrt(E)) V (no mask, no dropout). Batched tiled SGEMM for the scores (K^T folded into the tile loads, scale fused into the store) into a workspace, a one-block-per-row softmax in place, then a batched tiled SGEMM with V. All fp32 on CUDA cores."""
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

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define GEMM_THREADS 256
#define MAX_GRID_Z 65535

// C = alpha * op(A) @ op(B), fp32 FMA on CUDA cores (no TF32).
// Logical A is M x K: A(m, k) = TA ? A[k * lda + m] : A[m * lda + k].
// Logical B is K x N: B(k, n) = TB ? B[n * ldb + k] : B[k * ldb + n].
// 128x128 block tile, BK = 8, 256 threads, each thread owns an 8x8 sub-tile (rows ty + 16 i, cols tx + 16 j).
// blockIdx.x is the linear tile index (tile_m * tiles_n + tile_n), blockIdx.z the batch (offsets sA / sB / sC).
// EPI 1 keeps the upper triangle (j >= i) and EPI 2 the lower triangle (j <= i), writing zeros elsewhere;
// tiles that lie entirely in the zeroed triangle skip the K loop.
template <bool TA, bool TB, int EPI>
__global__ void __launch_bounds__(GEMM_THREADS) gemm_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    long long M, long long N, long long K, long long lda, long long ldb, long long ldc,
    long long sA, long long sB, long long sC, long long tiles_n, float alpha) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const long long tile = blockIdx.x;
    const long long m0 = (tile / tiles_n) * BM;
    const long long n0 = (tile % tiles_n) * BN;
    const long long z = blockIdx.z;
    A += z * sA;
    B += z * sB;
    C += z * sC;
    const bool skip = (EPI == 1 && m0 > n0 + (BN - 1)) || (EPI == 2 && n0 > m0 + (BM - 1));

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    if (!skip) {  // uniform across the block
        for (long long k0 = 0; k0 < K; k0 += BK) {
            #pragma unroll
            for (int r = 0; r < (BM * BK) / GEMM_THREADS; ++r) {
                const int e = tid + r * GEMM_THREADS;
                int row, kk;
                if (TA) { kk = e / BM; row = e % BM; } else { row = e / BK; kk = e % BK; }
                const long long gm = m0 + row, gk = k0 + kk;
                float v = 0.f;
                if (gm < M && gk < K) v = TA ? A[gk * lda + gm] : A[gm * lda + gk];
                As[kk][row] = v;
            }
            #pragma unroll
            for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
                const int e = tid + r * GEMM_THREADS;
                int col, kk;
                if (TB) { col = e / BK; kk = e % BK; } else { kk = e / BN; col = e % BN; }
                const long long gn = n0 + col, gk = k0 + kk;
                float v = 0.f;
                if (gn < N && gk < K) v = TB ? B[gn * ldb + gk] : B[gk * ldb + gn];
                Bs[kk][col] = v;
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
    }

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long gm = m0 + ty + 16 * i;
        if (gm >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const long long gn = n0 + tx + 16 * j;
            if (gn < N) {
                float v = acc[i][j] * alpha;
                if (EPI == 1 && gn < gm) v = 0.f;
                if (EPI == 2 && gn > gm) v = 0.f;
                C[gm * ldc + gn] = v;
            }
        }
    }
}

// Launches the GEMM for `batch` independent problems (batch strides sA, sB, sC), in chunks of at most 65535.
template <bool TA, bool TB, int EPI>
static void launch_gemm(const float* A, const float* B, float* C, long long M, long long N, long long K,
                        long long lda, long long ldb, long long ldc, long long sA, long long sB, long long sC,
                        long long batch, float alpha, cudaStream_t stream) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    const long long tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    TORCH_CHECK(tiles_m * tiles_n < (1LL << 31), "matrix too large");
    for (long long z0 = 0; z0 < batch; z0 += MAX_GRID_Z) {
        const long long nz = (batch - z0 < MAX_GRID_Z) ? (batch - z0) : MAX_GRID_Z;
        dim3 grid((unsigned int)(tiles_m * tiles_n), 1, (unsigned int)nz);
        gemm_kernel<TA, TB, EPI><<<grid, GEMM_THREADS, 0, stream>>>(
            A + z0 * sA, B + z0 * sB, C + z0 * sC, M, N, K, lda, ldb, ldc, sA, sB, sC, tiles_n, alpha);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
}

// In-place softmax of each row of S scores (one block per row): max pass, sum-of-exp pass, write pass.
__global__ void softmax_rows_kernel(float* __restrict__ s, long long S) {
    __shared__ float sh[32];
    float* __restrict__ row = s + (long long)blockIdx.x * S;
    float m = -INFINITY;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_max(m, sh);
    float sum = 0.f;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) sum += expf(row[i] - m);
    sum = block_sum(sum, sh);
    for (long long i = threadIdx.x; i < S; i += blockDim.x) row[i] = expf(row[i] - m) / sum;
}

// softmax(Q K^T / sqrt(E)) V for Q (..., L, E), K (..., S, E), V (..., S, Ev); no mask, no dropout.
// Scores for all heads go to a workspace (BH, L, S); both products use the tiled SGEMM (K^T via the B load mapping).
torch::Tensor sdpa_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V) {
    TORCH_CHECK(Q.is_cuda(), "Q must be a CUDA tensor");
    TORCH_CHECK(Q.scalar_type() == torch::kFloat32, "Q must be float32");
    TORCH_CHECK(K.is_cuda(), "K must be a CUDA tensor");
    TORCH_CHECK(K.scalar_type() == torch::kFloat32, "K must be float32");
    TORCH_CHECK(V.is_cuda(), "V must be a CUDA tensor");
    TORCH_CHECK(V.scalar_type() == torch::kFloat32, "V must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(Q));
    const int64_t nd = Q.dim();
    TORCH_CHECK(nd >= 2 && K.dim() == nd && V.dim() == nd, "Q, K, V must have the same number of dims (>= 2)");
    for (int64_t d = 0; d + 2 < nd; ++d)
        TORCH_CHECK(K.size(d) == Q.size(d) && V.size(d) == Q.size(d), "batch dims of Q, K, V must match");
    auto Qc = Q.contiguous();
    auto Kc = K.contiguous();
    auto Vc = V.contiguous();
    const long long L = Qc.size(nd - 2), E = Qc.size(nd - 1);
    const long long S = Kc.size(nd - 2), Ev = Vc.size(nd - 1);
    TORCH_CHECK(Kc.size(nd - 1) == E, "K's last dim must equal Q's");
    TORCH_CHECK(Vc.size(nd - 2) == S, "V's sequence length must equal K's");
    long long BH = 1;
    for (int64_t d = 0; d + 2 < nd; ++d) BH *= Qc.size(d);
    std::vector<int64_t> sizes = Qc.sizes().vec();
    sizes.back() = Ev;
    auto O = torch::empty(sizes, Qc.options());
    if (BH == 0 || L == 0 || Ev == 0) return O;
    TORCH_CHECK(S > 0, "empty key sequence");
    auto P = torch::empty({BH, L, S}, Qc.options());
    auto stream = at::cuda::getCurrentCUDAStream();
    const float scale = (float)(1.0 / sqrt((double)E));
    launch_gemm<false, true, 0>(Qc.data_ptr<float>(), Kc.data_ptr<float>(), P.data_ptr<float>(), L, S, E,
                                E, E, S, L * E, S * E, L * S, BH, scale, stream);
    const long long rows = BH * L;
    TORCH_CHECK(rows < (1LL << 31), "too many rows");
    softmax_rows_kernel<<<(unsigned int)rows, 256, 0, stream>>>(P.data_ptr<float>(), S);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch_gemm<false, false, 0>(P.data_ptr<float>(), Vc.data_ptr<float>(), O.data_ptr<float>(), L, Ev, S,
                                 S, Ev, Ev, L * S, S * Ev, L * Ev, BH, 1.f, stream);
    return O;
}
"""

cpp_src = r"""
torch::Tensor sdpa_forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V);
"""

module = load_inline(
    name="kbc_l1_sdpa",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['sdpa_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return module.sdpa_forward(Q, K, V)
