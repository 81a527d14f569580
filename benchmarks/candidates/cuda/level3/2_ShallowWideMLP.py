"""KernelBench level 3 / 2_ShallowWideMLP.py: shallow, wide MLP (Linear + ReLU layers, final Linear). ModelNew builds the same nn.Sequential of nn.Linear / nn.ReLU layers (same state_dict keys) but never calls it: forward walks the layers, reads each Linear's weight and bias and runs one 128x128x8 tiled SGEMM per Linear (fp32 FMA on CUDA cores, W read transposed in the tile loads) with the bias and, where a ReLU follows, the ReLU fused into the store."""
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

// EPI 0: identity; EPI 1: ReLU.
template <int EPI>
__device__ __forceinline__ float epilogue(float v, long long c, const float* __restrict__ vec, float p0, float p1) {
    return EPI == 1 ? (v > 0.f ? v : 0.f) : v;
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

// y = x @ W^T + b, followed by ReLU if relu.
torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, bool relu) {
    CHECK_F32(x);
    CHECK_F32(weight);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "expected x (B, in) and weight (out, in)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const long long M = xc.size(0), N = wc.size(0);
    const bool has_bias = bias.numel() > 0;
    if (has_bias) { CHECK_F32(bias); TORCH_CHECK(bias.numel() == N, "bias must have out_features elements"); }
    auto bc = has_bias ? bias.contiguous() : bias;
    const float* bp = has_bias ? bc.data_ptr<float>() : nullptr;
    auto y = torch::empty({M, N}, xc.options());
    if (relu) linear_launch<1>(xc, wc, bp, nullptr, 0.f, 0.f, y);
    else linear_launch<0>(xc, wc, bp, nullptr, 0.f, 0.f, y);
    return y;
}
"""

cpp_src = r"""
torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, bool relu);
"""

module = load_inline(
    name="kbc_l3_shallow_wide_mlp",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["linear_act_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        current_input_size = input_size
        for hidden_size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, hidden_size))
            layers.append(nn.ReLU())
            current_input_size = hidden_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)  # parameter holder only; its layers are never called

    def forward(self, x):
        layers = self.network
        n = len(layers)
        empty = torch.empty(0, device=x.device)
        h = x
        for i in range(n):
            layer = layers[i]
            if isinstance(layer, nn.Linear):
                relu = i + 1 < n and isinstance(layers[i + 1], nn.ReLU)
                bias = layer.bias if layer.bias is not None else empty
                h = module.linear_act_forward(h, layer.weight, bias, relu)
        return h
