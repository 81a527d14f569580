"""KernelBench level 1 / 44_Average_Pooling_1D.py: nn.AvgPool1d (count_include_pad=True). Generic 1-3-D pooling kernel: one thread per output element summing the clipped window in fp32, divided by the padded window size."""
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

// Window geometry of one pooling op over (D, H, W); missing leading spatial dims are 1 (kernel 1, stride 1, pad 0).
struct PoolShape {
    int D, H, W, OD, OH, OW;
    int KD, KH, KW, sd, sh, sw, pd, ph, pw, dd, dh, dw;
};

// One thread per output element (grid-stride). MAX_MODE: max over the dilated window (padding = -inf, NaN
// propagates like PyTorch's), optionally writing the flat spatial index of the max. Otherwise: average with
// count_include_pad=True semantics (divisor = window clipped to the padded extent, as nn.AvgPoolNd computes it).
template <bool MAX_MODE>
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t* __restrict__ ind,
                            PoolShape s, long long total) {
    const long long DHW = (long long)s.D * s.H * s.W;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int ow = (int)(idx % s.OW);
        long long t = idx / s.OW;
        const int oh = (int)(t % s.OH);
        t /= s.OH;
        const int od = (int)(t % s.OD);
        const long long plane = t / s.OD;
        const float* __restrict__ xp = x + plane * DHW;
        const int d0 = od * s.sd - s.pd, h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
        if (MAX_MODE) {
            float best = -INFINITY;
            long long bi = -1;
            for (int kd = 0; kd < s.KD; ++kd) {
                const int id = d0 + kd * s.dd;
                if (id < 0 || id >= s.D) continue;
                for (int kh = 0; kh < s.KH; ++kh) {
                    const int ih = h0 + kh * s.dh;
                    if (ih < 0 || ih >= s.H) continue;
                    const long long rowoff = ((long long)id * s.H + ih) * s.W;
                    for (int kw = 0; kw < s.KW; ++kw) {
                        const int iw = w0 + kw * s.dw;
                        if (iw < 0 || iw >= s.W) continue;
                        const float v = xp[rowoff + iw];
                        if (bi < 0 || v > best || isnan(v)) { best = v; bi = rowoff + iw; }
                    }
                }
            }
            y[idx] = best;
            if (ind) ind[idx] = bi;
        } else {
            int dend = min(d0 + s.KD, s.D + s.pd), hend = min(h0 + s.KH, s.H + s.ph), wend = min(w0 + s.KW, s.W + s.pw);
            const int pool_size = (dend - d0) * (hend - h0) * (wend - w0);
            const int ds = max(d0, 0), hs = max(h0, 0), ws = max(w0, 0);
            dend = min(dend, s.D); hend = min(hend, s.H); wend = min(wend, s.W);
            float acc = 0.f;
            for (int id = ds; id < dend; ++id)
                for (int ih = hs; ih < hend; ++ih) {
                    const float* __restrict__ xr = xp + ((long long)id * s.H + ih) * s.W;
                    for (int iw = ws; iw < wend; ++iw) acc += xr[iw];
                }
            y[idx] = acc / (float)pool_size;
        }
    }
}

static int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;  // floor division
    if (ceil_mode && (o - 1) * s >= in + p) --o;
    return o;
}

// Pooling over the trailing nd (1-3) spatial dims of x; every leading dim is a plane. kernel / stride / padding /
// dilation hold nd values each. Returns {y} or, with want_indices (max only), {y, indices (int64)}.
std::vector<torch::Tensor> pool_forward(torch::Tensor x, int64_t nd, std::vector<int64_t> kernel,
                                        std::vector<int64_t> stride, std::vector<int64_t> padding,
                                        std::vector<int64_t> dilation, bool ceil_mode, bool is_max,
                                        bool want_indices) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    TORCH_CHECK(nd >= 1 && nd <= 3 && x.dim() >= nd + 1, "input has too few dims");
    TORCH_CHECK((int64_t)kernel.size() == nd && (int64_t)stride.size() == nd && (int64_t)padding.size() == nd &&
                (int64_t)dilation.size() == nd, "expected one kernel/stride/padding/dilation value per spatial dim");
    auto xc = x.contiguous();
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
    int64_t out[3] = {1, 1, 1};
    std::vector<int64_t> sizes = xc.sizes().vec();
    const int64_t lead = xc.dim() - nd;
    for (int64_t i = 0; i < nd; ++i) {
        const int64_t j = 3 - nd + i;
        in[j] = xc.size(lead + i);
        k[j] = kernel[i]; st[j] = stride[i]; pd[j] = padding[i]; dl[j] = dilation[i];
        TORCH_CHECK(k[j] >= 1 && st[j] >= 1 && dl[j] >= 1 && pd[j] >= 0, "invalid pooling parameters");
        out[j] = pool_out_size(in[j], k[j], st[j], pd[j], dl[j], ceil_mode);
        TORCH_CHECK(out[j] > 0, "output size would be non-positive");
        sizes[lead + i] = out[j];
    }
    auto y = torch::empty(sizes, xc.options());
    torch::Tensor ind;
    if (want_indices) ind = torch::empty(sizes, xc.options().dtype(torch::kInt64));
    const long long total = y.numel();
    std::vector<torch::Tensor> res = {y};
    if (want_indices) res.push_back(ind);
    if (total == 0) return res;
    PoolShape s;
    s.D = (int)in[0]; s.H = (int)in[1]; s.W = (int)in[2];
    s.OD = (int)out[0]; s.OH = (int)out[1]; s.OW = (int)out[2];
    s.KD = (int)k[0]; s.KH = (int)k[1]; s.KW = (int)k[2];
    s.sd = (int)st[0]; s.sh = (int)st[1]; s.sw = (int)st[2];
    s.pd = (int)pd[0]; s.ph = (int)pd[1]; s.pw = (int)pd[2];
    s.dd = (int)dl[0]; s.dh = (int)dl[1]; s.dw = (int)dl[2];
    const int threads = 256;
    long long blocks = (total + threads - 1) / threads;
    if (blocks > (1LL << 30)) blocks = 1LL << 30;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (is_max)
        pool_kernel<true><<<(unsigned int)blocks, threads, 0, stream>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), want_indices ? ind.data_ptr<int64_t>() : nullptr, s, total);
    else
        pool_kernel<false><<<(unsigned int)blocks, threads, 0, stream>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), nullptr, s, total);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return res;
}
"""

cpp_src = r"""
std::vector<torch::Tensor> pool_forward(torch::Tensor x, int64_t nd, std::vector<int64_t> kernel,
                                        std::vector<int64_t> stride, std::vector<int64_t> padding,
                                        std::vector<int64_t> dilation, bool ceil_mode, bool is_max,
                                        bool want_indices);
"""

module = load_inline(
    name="kbc_l1_pool_44",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['pool_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


def _tuple(v, n):
    return [int(e) for e in v] if isinstance(v, (tuple, list)) else [int(v)] * n


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = _tuple(kernel_size, 1)
        self.stride = _tuple(stride if stride is not None else kernel_size, 1)
        self.padding = _tuple(padding, 1)
        self.dilation = [1] * 1

    def forward(self, x):
        r = module.pool_forward(x, 1, self.kernel_size, self.stride, self.padding, self.dilation, False,
                                False, False)
        return r[0]
