"""KernelBench level 2 / 76_Gemm_Add_ReLU.py: relu(x @ W^T + bias) (bias-free Linear plus a separate bias parameter). x @ W^T + b on a 128x128x8 tiled SGEMM (fp32 FMA, W read transposed in the tile loads) with the elementwise tail fused into the store."""
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
__device__ __forceinline__ float epilogue(float v, const float* __restrict__ scal, float p0, float p1, float p2) {
    return v < 0.f ? 0.f : v;
}

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define GEMM_THREADS 256

// C = op(A) @ op(B) (+ epilogue), fp32 FMA on CUDA cores (no TF32).
// Logical A is M x K: A(m, k) = TA ? A[k * lda + m] : A[m * lda + k].
// Logical B is K x N: B(k, n) = TB ? B[n * ldb + k] : B[k * ldb + n].
// 128x128 block tile, BK = 8, 256 threads, each thread owns an 8x8 sub-tile (rows ty + 16 i, cols tx + 16 j).
// Global loads are mapped so that consecutive threads read consecutive addresses for either layout.
// blockIdx.z selects a batch (pointer offsets sA / sB / sC) and, if kchunk > 0, a K-split range.
template <bool TA, bool TB>
__global__ void __launch_bounds__(GEMM_THREADS) gemm_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc,
    long long sA, long long sB, long long sC, int kchunk ,
    const float* __restrict__ bias, const float* __restrict__ vec2, const float* __restrict__ scal, float p0, float p1, float p2) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const long long z = blockIdx.z;
    A += z * sA;
    B += z * sB;
    C += z * sC;
    int kb = 0, ke = K;
    if (kchunk > 0) { kb = (int)z * kchunk; ke = min(K, kb + kchunk); }

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = kb; k0 < ke; k0 += BK) {
        #pragma unroll
        for (int r = 0; r < (BM * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            int row, kk;
            if (TA) { kk = e / BM; row = e % BM; } else { row = e / BK; kk = e % BK; }
            const int gm = m0 + row, gk = k0 + kk;
            float v = 0.f;
            if (gm < M && gk < ke) v = TA ? A[(long long)gk * lda + gm] : A[(long long)gm * lda + gk];
            As[kk][row] = v;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            int col, kk;
            if (TB) { col = e / BK; kk = e % BK; } else { kk = e / BN; col = e % BN; }
            const int gn = n0 + col, gk = k0 + kk;
            float v = 0.f;
            if (gn < N && gk < ke) v = TB ? B[(long long)gn * ldb + gk] : B[(long long)gk * ldb + gn];
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
                if (vec2 != nullptr) v += vec2[gn];
                v = epilogue(v, scal, p0, p1, p2);
                C[(long long)gm * ldc + gn] = v;
            }
        }
    }
}

// y = epilogue(x @ W^T + bias (+ vec2)); W is (out_features, in_features) as stored by nn.Linear.
static torch::Tensor linear_epilogue(torch::Tensor x, torch::Tensor w, const float* bias, const float* vec2,
                                     const float* scal, float p0, float p1, float p2) {
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "expected x (M, K) and W (N, K)");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const long long M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    dim3 grid((unsigned int)((N + BN - 1) / BN), (unsigned int)((M + BM - 1) / BM), 1);
    gemm_kernel<false, true><<<grid, GEMM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), (int)M, (int)N, (int)K,
        K, K, N, 0, 0, 0, 0, bias, vec2, scal, p0, p1, p2);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
torch::Tensor linear_add_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(weight.is_cuda(), "weight must be a CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32, "weight must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    TORCH_CHECK(bias.is_cuda(), "bias must be a CUDA tensor");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat32, "bias must be float32");
    auto bc = bias.contiguous();
    TORCH_CHECK(bc.numel() == weight.size(0), "bias must have out_features elements");
    return linear_epilogue(x, weight, bc.data_ptr<float>(), nullptr, nullptr, 0.f, 0.f, 0.f);
}
"""

cpp_src = r"""
torch::Tensor linear_add_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""

module = load_inline(
    name="kbc_l2_linear_add_relu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['linear_add_relu_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)  # weight holder only
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return module.linear_add_relu_forward(x, self.gemm.weight, self.bias)
