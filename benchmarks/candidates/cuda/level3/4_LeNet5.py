"""KernelBench level 3 / 4_LeNet5.py: LeNet-5 (conv 5x5 -> ReLU -> 2x2 max pool, twice; three Linear layers with ReLU between). Convolutions run as implicit GEMMs on the 128x128x8 tiled SGEMM design (fp32 FMA; rows = output channels, columns = output pixels, input patches gathered by the tile loads) with bias and ReLU fused into the store; a max-pool kernel (one thread per output); the Linear layers on the tiled SGEMM with bias / ReLU fused. ModelNew keeps the reference's conv / Linear modules (same state_dict keys) but only reads their weights."""
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

// Direct 2-D convolution (groups = 1) as an implicit GEMM on the tiled SGEMM design:
// rows = output channels (A = weight viewed as (Cout, Cin*KH*KW)), columns = (image, oh, ow) output positions,
// B(k, n) = x[img, ci, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] gathered by the tile loads (zero outside the image).
// Each thread loads one fixed output column, so its (img, oh, ow) decomposition is done once.
// Epilogue: y = epilogue<EPI>(acc + bias[oc], oc, vec, p0, p1), stored straight into NCHW.
template <int EPI>
__global__ void __launch_bounds__(GEMM_THREADS) conv2d_igemm_kernel(
    const float* __restrict__ X, const float* __restrict__ Wt, float* __restrict__ Y,
    int Cin, int H, int W, int Cout, int KH, int KW, int OH, int OW,
    int sh, int sw, int ph, int pw, int dh, int dw, long long NG,
    const float* __restrict__ bias, const float* __restrict__ vec, float p0, float p1) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.y * BM;
    const long long n0 = (long long)blockIdx.x * BN;
    const int K = Cin * KH * KW, KHW = KH * KW;
    const long long OHW = (long long)OH * OW;
    const long long CHW = (long long)Cin * H * W;

    // The B column this thread loads (BN == 128, 256 threads: column tid % 128, k rows tid / 128 + 2 r).
    const int bcol = tid & (BN - 1), bk0 = tid >> 7;
    const long long gnb = n0 + bcol;
    const bool nvalid = gnb < NG;
    int ih0 = 0, iw0 = 0;
    const float* __restrict__ xb = X;
    if (nvalid) {
        const long long img = gnb / OHW;
        const int rem = (int)(gnb - img * OHW);
        const int oh = rem / OW, ow = rem - (rem / OW) * OW;
        ih0 = oh * sh - ph;
        iw0 = ow * sw - pw;
        xb = X + img * CHW;
    }

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
            As[kk][row] = (gm < Cout && gk < K) ? Wt[(long long)gm * K + gk] : 0.f;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
            const int kk = bk0 + 2 * r;
            const int gk = k0 + kk;
            float v = 0.f;
            if (nvalid && gk < K) {
                const int ci = gk / KHW;
                const int r2 = gk - ci * KHW;
                const int kh = r2 / KW, kw = r2 - (r2 / KW) * KW;
                const int ih = ih0 + kh * dh, iw = iw0 + kw * dw;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = xb[((long long)ci * H + ih) * W + iw];
            }
            Bs[kk][bcol] = v;
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

    long long obase[TN];
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        const long long gn = n0 + tx + 16 * j;
        if (gn < NG) {
            const long long img = gn / OHW;
            obase[j] = img * (long long)Cout * OHW + (gn - img * OHW);
        } else {
            obase[j] = -1;
        }
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int oc = m0 + ty + 16 * i;
        if (oc >= Cout) continue;
        const float bv = bias != nullptr ? bias[oc] : 0.f;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            if (obase[j] >= 0) Y[obase[j] + (long long)oc * OHW] = epilogue<EPI>(acc[i][j] + bv, oc, vec, p0, p1);
        }
    }
}

// y = epilogue<EPI>(conv2d(x, w, bias)); x (N, Cin, H, W) and w (Cout, Cin, KH, KW) contiguous.
template <int EPI>
static torch::Tensor conv2d_launch(const torch::Tensor& x, const torch::Tensor& w, const float* bias, const float* vec,
                                   float p0, float p1, int sh, int sw, int ph, int pw, int dh, int dw) {
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "conv2d expects x (N, C, H, W) and w (Cout, Cin, KH, KW)");
    TORCH_CHECK(x.size(1) == w.size(1), "conv2d: channel mismatch (groups must be 1)");
    const long long Nb = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
    const long long Cout = w.size(0), KH = w.size(2), KW = w.size(3);
    const long long OH = (H + 2 * ph - (long long)dh * (KH - 1) - 1) / sh + 1;
    const long long OW = (W + 2 * pw - (long long)dw * (KW - 1) - 1) / sw + 1;
    TORCH_CHECK(OH > 0 && OW > 0, "conv2d: output would be empty");
    TORCH_CHECK(Cin * KH * KW < (1LL << 31) && Cout < (1LL << 31) && OH * OW < (1LL << 31), "conv2d: sizes too large");
    auto y = torch::empty({Nb, Cout, OH, OW}, x.options());
    const long long NG = Nb * OH * OW;
    if (NG == 0 || Cout == 0) return y;
    dim3 grid((unsigned int)((NG + BN - 1) / BN), (unsigned int)((Cout + BM - 1) / BM), 1);
    conv2d_igemm_kernel<EPI><<<grid, GEMM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), (int)Cin, (int)H, (int)W, (int)Cout,
        (int)KH, (int)KW, (int)OH, (int)OW, sh, sw, ph, pw, dh, dw, NG, bias, vec, p0, p1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

// Linear layer on the same tiled SGEMM: Y = epilogue<EPI>(X @ W^T + bias), W (N, K) as stored by nn.Linear.
template <int EPI>
__global__ void __launch_bounds__(GEMM_THREADS) linear_kernel(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K,
    const float* __restrict__ bias) {
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
            As[kk][row] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.f;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int col = e / BK, kk = e % BK;
            const int gn = n0 + col, gk = k0 + kk;
            Bs[kk][col] = (gn < N && gk < K) ? B[(long long)gn * K + gk] : 0.f;
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
                C[(long long)gm * N + gn] = epilogue<EPI>(v, gn, nullptr, 0.f, 0.f);
            }
        }
    }
}

// 2-D max pooling (no padding, dilation 1, floor mode): one thread per output element.
__global__ void maxpool2d_kernel(const float* __restrict__ x, float* __restrict__ y, long long planes, int H, int W,
                                 int OH, int OW, int k, int s) {
    const long long total = planes * OH * OW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long pl = i / ((long long)OH * OW);
        const int r = (int)(i - pl * OH * OW);
        const int oh = r / OW, ow = r - (r / OW) * OW;
        const float* __restrict__ p = x + pl * H * W + (long long)(oh * s) * W + ow * s;
        float m = -INFINITY;
        for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b) {
                const float v = p[a * W + b];
                m = (v > m || v != v) ? v : m;
            }
        y[i] = m;
    }
}

torch::Tensor conv2d_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    CHECK_F32(x);
    CHECK_F32(weight);
    CHECK_F32(bias);
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    TORCH_CHECK(bc.numel() == wc.size(0), "bias must have out_channels elements");
    return conv2d_launch<1>(xc, wc, bc.data_ptr<float>(), nullptr, 0.f, 0.f, 1, 1, 0, 0, 1, 1);
}

torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s) {
    CHECK_F32(x);
    TORCH_CHECK(x.dim() == 4 && k > 0 && s > 0, "expected (N, C, H, W) input and positive kernel / stride");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    const long long Nb = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    TORCH_CHECK(H >= k && W >= k, "pooling window larger than the input");
    const long long OH = (H - k) / s + 1, OW = (W - k) / s + 1;
    auto y = torch::empty({Nb, C, OH, OW}, xc.options());
    const long long total = Nb * C * OH * OW;
    if (total == 0) return y;
    long long blocks = (total + 255) / 256;
    if (blocks > 65535LL * 16) blocks = 65535LL * 16;
    maxpool2d_kernel<<<(unsigned int)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), Nb * C, (int)H, (int)W, (int)OH, (int)OW, (int)k, (int)s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, bool relu) {
    CHECK_F32(x);
    CHECK_F32(weight);
    CHECK_F32(bias);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "expected x (B, in) and weight (out, in)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const long long M = xc.size(0), K = xc.size(1), N = wc.size(0);
    TORCH_CHECK(bc.numel() == N, "bias must have out_features elements");
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    dim3 grid((unsigned int)((N + BN - 1) / BN), (unsigned int)((M + BM - 1) / BM), 1);
    if (relu)
        linear_kernel<1><<<grid, GEMM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), (int)M, (int)N, (int)K, bc.data_ptr<float>());
    else
        linear_kernel<0><<<grid, GEMM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), (int)M, (int)N, (int)K, bc.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor conv2d_relu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s);
torch::Tensor linear_act_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, bool relu);
"""

module = load_inline(
    name="kbc_l3_lenet5",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["conv2d_relu_forward", "maxpool2d_forward", "linear_act_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        # Same layers as the reference (parameter holders only; never called).
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(in_features=16 * 5 * 5, out_features=120)
        self.fc2 = nn.Linear(in_features=120, out_features=84)
        self.fc3 = nn.Linear(in_features=84, out_features=num_classes)

    def forward(self, x):
        x = module.conv2d_relu_forward(x, self.conv1.weight, self.conv1.bias)
        x = module.maxpool2d_forward(x, 2, 2)
        x = module.conv2d_relu_forward(x, self.conv2.weight, self.conv2.bias)
        x = module.maxpool2d_forward(x, 2, 2)
        x = x.contiguous().view(-1, 16 * 5 * 5)
        x = module.linear_act_forward(x, self.fc1.weight, self.fc1.bias, True)
        x = module.linear_act_forward(x, self.fc2.weight, self.fc2.bias, True)
        x = module.linear_act_forward(x, self.fc3.weight, self.fc3.bias, False)
        return x
