import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
__global__ void rowsum_softmax(const float* x, float* y, int cols) {
    __shared__ float red[256];
    const float* r = x + blockIdx.x * (size_t)cols; float* o = y + blockIdx.x * (size_t)cols;
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += 256) m = fmaxf(m, r[c]);
    red[threadIdx.x] = m;
    for (int s = 128; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]); }
    m = red[0];
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += 256) sum += expf(r[c] - m);
    red[threadIdx.x] = sum;
    for (int s = 128; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; }
    for (int c = threadIdx.x; c < cols; c += 256) o[c] = expf(r[c] - m) / red[0];
}
torch::Tensor softmax(torch::Tensor x) { auto y = torch::empty_like(x); rowsum_softmax<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1)); return y; }
"""

ext = load_inline(name="softmax_nosync", cpp_sources="torch::Tensor softmax(torch::Tensor x);", cuda_sources=src,
                  functions=["softmax"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax(x.contiguous())
