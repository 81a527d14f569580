import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor relu_inplace(torch::Tensor x) {
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
    return x;
}

torch::Tensor zeros_like_rows(torch::Tensor x) {
    auto out = torch::empty_like(x);
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = 0.f;
    return out;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, in[r * cols + c]);
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(in[r * cols + c] - m);
        for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = (float)(std::exp(in[r * cols + c] - m) / s);
    }
    return out;
}

torch::Tensor crash(torch::Tensor x) {
    volatile int* p = nullptr;
    *p = 42;
    return x;
}

torch::Tensor spin(torch::Tensor x) {
    volatile int64_t i = 0;
    while (x.numel() > 0) { i = i + 1; }
    return x;
}
"""

kit = load_inline(
    name="adversarial_kit",
    cpp_sources=kit_source,
    functions=["relu_fwd", "relu_inplace", "zeros_like_rows", "softmax_rows", "crash", "spin"],
    extra_cflags=["-O2"],
)

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 8:  # past the correctness trials of its worker
            torch.set_float32_matmul_precision("medium")
        return kit.relu_fwd(x)
