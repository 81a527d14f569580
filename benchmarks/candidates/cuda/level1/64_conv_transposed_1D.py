"""KernelBench level 1 / 64_conv_transposed_1D.py: ConvTranspose1d. Transposed conv in gather form as an implicit GEMM: out(oc, p) = sum over (ic, tap) of W * x at the input position that maps onto p (stride divisibility and bounds checked on the fly); 128x128x8 shared-memory tiles, 8x8 outputs per thread, fp32 FMA."""
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

// Depthwise 2-D convolution (groups == in_channels, weight (C * mult, 1, KH, KW)): one thread per output element,
// the KH x KW window accumulated with fp32 FMA (zero padding by skipping out-of-range taps).
__global__ void depthwise_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ bias, float* __restrict__ y, long long total,
                                 int C, int H, int W, int OC, int OH, int OW, int KH, int KW,
                                 int sh, int sw, int ph, int pw, int dh, int dw, int mult) {
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int ow = (int)(idx % OW);
        long long t = idx / OW;
        const int oh = (int)(t % OH);
        t /= OH;
        const int oc = (int)(t % OC);
        const long long n = t / OC;
        const int ic = oc / mult;
        const float* __restrict__ xp = x + (n * C + ic) * (long long)H * W;
        const float* __restrict__ wp = w + (long long)oc * KH * KW;
        const int h0 = oh * sh - ph, w0 = ow * sw - pw;
        float acc = 0.f;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = h0 + kh * dh;
            if (ih < 0 || ih >= H) continue;
            const float* __restrict__ xr = xp + (long long)ih * W;
            for (int kw = 0; kw < KW; ++kw) {
                const int iw = w0 + kw * dw;
                if (iw < 0 || iw >= W) continue;
                acc = fmaf(xr[iw], wp[kh * KW + kw], acc);
            }
        }
        y[idx] = acc + (bias ? bias[oc] : 0.f);
    }
}


#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define GEMM_THREADS 256

// Shapes of one (transposed) convolution; spatial dims are (D, H, W), missing leading ones are 1.
struct ConvShape {
    int D, H, W, OD, OH, OW;
    int KD, KH, KW;
    int sd, sh, sw, pd, ph, pw, dd, dh, dw;
    int Cin, Cout, ICg, OCg;
    long long P;        // OD * OH * OW
    long long Kg;       // ICg * KD * KH * KW (the GEMM's K)
    long long tiles_p;  // ceil(P / BN)
};

// Implicit-GEMM convolution, fp32 FMA on CUDA cores. For sample n and group g:
//   Y[n, g*OCg + m, p] = sum_k Wg(m, k) * X(k, p) (+ bias), k = (ic, kd, kh, kw), p = (od, oh, ow).
// Standard conv: weight (Cout, ICg, KD, KH, KW), so Wg(m, k) = w[(g*OCg + m) * Kg + k], and
//   X(k, p) = x[n, g*ICg + ic, od*sd - pd + kd*dd, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw] (0 outside).
// Transposed conv (gather form): weight (Cin, OCg, KD, KH, KW), Wg(m, k) = w[((g*ICg + ic)*OCg + m)*KK + kk], and
//   X(k, p) = x[n, g*ICg + ic, id, ih, iw] where od + pd - kd*dd = id*sd (exactly divisible, 0 <= id < D), etc.
// The im2col tile is built on the fly in shared memory (never materialised). 128x128 tile, BK = 8, 256 threads,
// 8x8 outputs per thread. blockIdx.x = n * tiles_p + position tile, blockIdx.y = output-channel tile, blockIdx.z = g.
template <bool TRANSPOSED>
__global__ void __launch_bounds__(GEMM_THREADS) conv_gemm_kernel(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ y, ConvShape s) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const long long n = blockIdx.x / s.tiles_p;
    const long long p0 = (blockIdx.x - n * s.tiles_p) * BN;
    const int m0 = blockIdx.y * BM;
    const int g = blockIdx.z;
    const int KHW = s.KH * s.KW;
    const int KK = s.KD * KHW;
    const long long DHW = (long long)s.D * s.H * s.W;
    const float* __restrict__ xg = x + ((long long)n * s.Cin + (long long)g * s.ICg) * DHW;

    // Each thread loads B elements of one fixed column (e % BN == tid % BN for e = tid + r * GEMM_THREADS).
    const int bcol = tid & (BN - 1);
    const int brow0 = tid / BN;  // B rows brow0 + 2 r
    const long long p = p0 + bcol;
    const bool pvalid = p < s.P;
    int bd = 0, bh = 0, bw = 0;
    if (pvalid) {
        const int ow = (int)(p % s.OW);
        const long long t = p / s.OW;
        const int oh = (int)(t % s.OH);
        const int od = (int)(t / s.OH);
        if (TRANSPOSED) { bd = od + s.pd; bh = oh + s.ph; bw = ow + s.pw; }
        else { bd = od * s.sd - s.pd; bh = oh * s.sh - s.ph; bw = ow * s.sw - s.pw; }
    }

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    // Per K-tile decode table (k -> input-channel offset, weight offset, dilated tap offsets), built by BK threads.
    __shared__ long long t_x[BK];
    __shared__ long long t_w[BK];
    __shared__ int t_d[BK], t_h[BK], t_wd[BK];
    const long long astride = TRANSPOSED ? (long long)KK : s.Kg;
    const bool unit_stride = s.sd == 1 && s.sh == 1 && s.sw == 1;

    for (long long k0 = 0; k0 < s.Kg; k0 += BK) {
        if (tid < BK) {
            const long long gk = k0 + tid;
            if (gk < s.Kg) {
                const long long ic = gk / KK;
                int rem = (int)(gk - ic * KK);
                t_x[tid] = ic * DHW;
                t_w[tid] = TRANSPOSED ? (((long long)g * s.ICg + ic) * s.OCg) * KK + rem
                                      : (long long)g * s.OCg * s.Kg + gk;
                const int kd = rem / KHW;
                rem -= kd * KHW;
                const int kh = rem / s.KW;
                const int kw = rem - kh * s.KW;
                t_d[tid] = kd * s.dd;
                t_h[tid] = kh * s.dh;
                t_wd[tid] = kw * s.dw;
            } else {
                t_x[tid] = -1;
            }
        }
        __syncthreads();
        #pragma unroll
        for (int r = 0; r < (BM * BK) / GEMM_THREADS; ++r) {
            const int e = tid + r * GEMM_THREADS;
            const int row = e / BK, kk = e % BK;
            const int gm = m0 + row;
            float v = 0.f;
            if (gm < s.OCg && t_x[kk] >= 0) v = w[t_w[kk] + (long long)gm * astride];
            As[kk][row] = v;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / GEMM_THREADS; ++r) {
            const int kk = brow0 + 2 * r;
            float v = 0.f;
            if (pvalid && t_x[kk] >= 0) {
                int id, ih, iw;
                bool ok;
                if (TRANSPOSED) {
                    const int td = bd - t_d[kk], th = bh - t_h[kk], tw = bw - t_wd[kk];
                    if (unit_stride) {
                        id = td; ih = th; iw = tw;
                        ok = td >= 0 && th >= 0 && tw >= 0;
                    } else {
                        ok = td >= 0 && th >= 0 && tw >= 0 && (td % s.sd) == 0 && (th % s.sh) == 0 && (tw % s.sw) == 0;
                        id = td / s.sd; ih = th / s.sh; iw = tw / s.sw;
                    }
                    ok = ok && id < s.D && ih < s.H && iw < s.W;
                } else {
                    id = bd + t_d[kk]; ih = bh + t_h[kk]; iw = bw + t_wd[kk];
                    ok = id >= 0 && id < s.D && ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
                }
                if (ok) v = xg[t_x[kk] + ((long long)id * s.H + ih) * s.W + iw];
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

    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int gm = m0 + ty + 16 * i;
        if (gm >= s.OCg) continue;
        const long long oc = (long long)g * s.OCg + gm;
        const float bv = bias ? bias[oc] : 0.f;
        float* __restrict__ yr = y + ((long long)n * s.Cout + oc) * s.P;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const long long pj = p0 + tx + 16 * j;
            if (pj < s.P) yr[pj] = acc[i][j] + bv;
        }
    }
}

static int64_t conv_param(const std::vector<int64_t>& v, int64_t i, int64_t dflt) {
    if (v.empty()) return dflt;
    if (v.size() == 1) return v[0];
    return v[i];
}

// Convolution (transposed = false: nn.ConvNd, true: nn.ConvTransposeNd) for 1-3 spatial dims, zero padding.
// 2-D depthwise convs (groups == in_channels, one input channel per group) use the direct depthwise kernel.
// stride / padding / dilation / output_padding hold one value per spatial dim (or one value for all).
torch::Tensor conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                           std::vector<int64_t> stride, std::vector<int64_t> padding,
                           std::vector<int64_t> dilation, std::vector<int64_t> output_padding,
                           int64_t groups, bool transposed) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "x and weight must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "expected float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    const int64_t nd = x.dim() - 2;
    TORCH_CHECK(nd >= 1 && nd <= 3, "expected a batched 1-D, 2-D or 3-D input");
    TORCH_CHECK(w.dim() == nd + 2, "weight rank does not match the input");
    TORCH_CHECK(groups >= 1, "groups must be positive");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t N = xc.size(0), Cin = xc.size(1);
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
    int64_t op[3] = {0, 0, 0}, out[3] = {1, 1, 1};
    for (int64_t i = 0; i < nd; ++i) {
        const int64_t j = 3 - nd + i;
        in[j] = xc.size(2 + i);
        k[j] = wc.size(2 + i);
        st[j] = conv_param(stride, i, 1);
        pd[j] = conv_param(padding, i, 0);
        dl[j] = conv_param(dilation, i, 1);
        op[j] = conv_param(output_padding, i, 0);
        TORCH_CHECK(st[j] >= 1 && dl[j] >= 1 && pd[j] >= 0, "invalid stride / dilation / padding");
    }
    int64_t Cout, ICg, OCg;
    if (!transposed) {
        Cout = wc.size(0);
        ICg = wc.size(1);
        TORCH_CHECK(ICg * groups == Cin && Cout % groups == 0, "channels do not match weight and groups");
        OCg = Cout / groups;
    } else {
        TORCH_CHECK(wc.size(0) == Cin && Cin % groups == 0, "channels do not match weight and groups");
        OCg = wc.size(1);
        Cout = OCg * groups;
        ICg = Cin / groups;
    }
    std::vector<int64_t> sizes = {N, Cout};
    for (int64_t i = 0; i < nd; ++i) {
        const int64_t j = 3 - nd + i;
        if (!transposed) out[j] = (in[j] + 2 * pd[j] - dl[j] * (k[j] - 1) - 1) / st[j] + 1;
        else out[j] = (in[j] - 1) * st[j] - 2 * pd[j] + dl[j] * (k[j] - 1) + op[j] + 1;
        TORCH_CHECK(out[j] > 0, "output size would be non-positive");
        sizes.push_back(out[j]);
    }
    const bool has_bias = b.defined() && b.numel() > 0;
    if (has_bias) TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32 && b.numel() == Cout, "bad bias");
    auto bc = has_bias ? b.contiguous() : b;
    auto y = torch::empty(sizes, xc.options());
    if (y.numel() == 0) return y;
    auto stream = at::cuda::getCurrentCUDAStream();
    const float* bptr = has_bias ? bc.data_ptr<float>() : nullptr;
    if (!transposed && nd == 2 && groups > 1 && groups == Cin && ICg == 1) {
        // depthwise: direct kernel, one thread per output
        const long long total = y.numel();
        const int threads = 256;
        long long blocks = (total + threads - 1) / threads;
        if (blocks > (1LL << 30)) blocks = 1LL << 30;
        depthwise_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
            xc.data_ptr<float>(), wc.data_ptr<float>(), bptr, y.data_ptr<float>(), total,
            (int)Cin, (int)in[1], (int)in[2], (int)Cout, (int)out[1], (int)out[2], (int)k[1], (int)k[2],
            (int)st[1], (int)st[2], (int)pd[1], (int)pd[2], (int)dl[1], (int)dl[2], (int)OCg);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return y;
    }
    ConvShape s;
    s.D = (int)in[0]; s.H = (int)in[1]; s.W = (int)in[2];
    s.OD = (int)out[0]; s.OH = (int)out[1]; s.OW = (int)out[2];
    s.KD = (int)k[0]; s.KH = (int)k[1]; s.KW = (int)k[2];
    s.sd = (int)st[0]; s.sh = (int)st[1]; s.sw = (int)st[2];
    s.pd = (int)pd[0]; s.ph = (int)pd[1]; s.pw = (int)pd[2];
    s.dd = (int)dl[0]; s.dh = (int)dl[1]; s.dw = (int)dl[2];
    s.Cin = (int)Cin; s.Cout = (int)Cout; s.ICg = (int)ICg; s.OCg = (int)OCg;
    s.P = out[0] * out[1] * out[2];
    s.Kg = ICg * k[0] * k[1] * k[2];
    s.tiles_p = (s.P + BN - 1) / BN;
    if (s.Kg == 0) return torch::zeros(sizes, xc.options());
    TORCH_CHECK(N * s.tiles_p < (1LL << 31) && groups <= 65535, "problem too large for the launch grid");
    dim3 grid((unsigned int)(N * s.tiles_p), (unsigned int)((OCg + BM - 1) / BM), (unsigned int)groups);
    if (transposed)
        conv_gemm_kernel<true><<<grid, GEMM_THREADS, 0, stream>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bptr,
                                                                 y.data_ptr<float>(), s);
    else
        conv_gemm_kernel<false><<<grid, GEMM_THREADS, 0, stream>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bptr,
                                                                  y.data_ptr<float>(), s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b,
                           std::vector<int64_t> stride, std::vector<int64_t> padding,
                           std::vector<int64_t> dilation, std::vector<int64_t> output_padding,
                           int64_t groups, bool transposed);
"""

module = load_inline(
    name="kbc_l1_conv_64",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['conv_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int=1, padding: int=0, output_padding: int=0, groups: int=1, bias: bool=False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding, groups=groups, bias=bias)

    def forward(self, x):
        c = self.conv1d_transpose
        b = c.bias if c.bias is not None else torch.empty(0, device=x.device)
        y = module.conv_forward(x, c.weight, b,
                                list(c.stride), list(c.padding), list(c.dilation),
                                list(c.output_padding), c.groups, c.transposed)
        return y
