"""KernelBench level 1 / 11_4D_tensor_matrix_multiplication.py: einsum('bijl,lk->bijk'). The leading dims are flattened into one (b*i*j) x l x k tiled SGEMM (128x128x8, fp32 FMA)."""
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

// A (..., K) @ B (K, L): the leading dims of A are flattened into the GEMM's M.
torch::Tensor tensor4d_matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(B.scalar_type() == torch::kFloat32, "B must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(A));
    TORCH_CHECK(A.dim() >= 2 && B.dim() == 2, "expected A with >= 2 dims and a 2-D B");
    auto Ac = A.contiguous();
    auto Bc = B.contiguous();
    const long long K = Ac.size(Ac.dim() - 1), L = Bc.size(1);
    TORCH_CHECK(Bc.size(0) == K, "inner dimensions do not match");
    long long M = 1;
    for (int64_t d = 0; d + 1 < Ac.dim(); ++d) M *= Ac.size(d);
    std::vector<int64_t> sizes = Ac.sizes().vec();
    sizes.back() = L;
    auto C = torch::empty(sizes, Ac.options());
    if (M == 0 || L == 0) return C;
    launch_gemm<false, false, 0>(Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, L, K,
                                 K, L, L, 0, 0, 0, 1, 1.f, at::cuda::getCurrentCUDAStream());
    return C;
}
"""

cpp_src = r"""
torch::Tensor tensor4d_matmul_forward(torch::Tensor A, torch::Tensor B);
"""

module = load_inline(
    name="kbc_l1_tensor4d_matmul",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['tensor4d_matmul_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.tensor4d_matmul_forward(A, B)
