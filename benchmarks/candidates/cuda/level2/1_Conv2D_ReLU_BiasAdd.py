"""KernelBench level 2 / 1_Conv2D_ReLU_BiasAdd.py: y = relu(conv2d(x)) + bias, bias of shape (C, 1, 1). Direct convolution as an implicit GEMM on the 128x128x8 tiled SGEMM design (fp32 FMA; rows = output channels, columns = output pixels, the input patch gathered by the tile loads, zero padding handled there), with the conv bias, ReLU and the per-channel bias add fused into the store."""
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

template <int EPI>
__device__ __forceinline__ float epilogue(float v, long long c, const float* __restrict__ vec, float p0, float p1) {
    v = v > 0.f ? v : 0.f;
    return v + vec[c];
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

torch::Tensor conv2d_relu_biasadd_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor extra, int64_t sh,
                   int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups, double p0, double p1) {
    CHECK_F32(x);
    CHECK_F32(weight);
    TORCH_CHECK(groups == 1, "only groups == 1 is supported");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    const long long Cout = wc.size(0);
    const bool has_bias = bias.numel() > 0;
    if (has_bias) { CHECK_F32(bias); TORCH_CHECK(bias.numel() == Cout, "bias must have out_channels elements"); }
    auto bc = has_bias ? bias.contiguous() : bias;
    const float* bp = has_bias ? bc.data_ptr<float>() : nullptr;
    CHECK_F32(extra);
    auto ec = extra.contiguous();
    TORCH_CHECK(ec.numel() == Cout, "bias must have out_channels elements (shape (C, 1, 1))");
    return conv2d_launch<0>(xc, wc, bp, ec.data_ptr<float>(), (float)p0, (float)p1, (int)sh, (int)sw, (int)ph, (int)pw, (int)dh, (int)dw);
}
"""

cpp_src = r"""
torch::Tensor conv2d_relu_biasadd_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor extra, int64_t sh,
                   int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups, double p0, double p1);
"""

module = load_inline(
    name="kbc_l2_conv2d_relu_biasadd",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["conv2d_relu_biasadd_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)  # parameter holder only
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        conv = self.conv
        empty = torch.empty(0, device=x.device)
        bias = conv.bias if conv.bias is not None else empty
        return module.conv2d_relu_biasadd_forward(x, conv.weight, bias, self.bias, int(conv.stride[0]), int(conv.stride[1]),
                           int(conv.padding[0]), int(conv.padding[1]), int(conv.dilation[0]), int(conv.dilation[1]),
                           int(conv.groups), 0.0, 0.0)
