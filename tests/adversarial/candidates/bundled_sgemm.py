import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
extern "C" void SGEMM(const char*, const char*, const int*, const int*, const int*, const float*,
                      const float*, const int*, const float*, const int*, const float*, float*, const int*);

torch::Tensor mm_fwd(torch::Tensor A, torch::Tensor B) {
    auto a = A.contiguous(); auto b = B.contiguous();
    const int M = a.size(0), K = a.size(1), N = b.size(1);
    auto C = torch::empty({M, N}, a.options());
    const float one = 1.f, zero = 0.f;
    // row-major C = A B  <=>  column-major C^T = B^T A^T
    SGEMM("N", "N", &N, &M, &K, &one, b.data_ptr<float>(), &N, a.data_ptr<float>(), &K, &zero, C.data_ptr<float>(), &N);
    return C;
}
"""
kit = load_inline(name="bundled_sgemm", cpp_sources=src, functions=["mm_fwd"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return kit.mm_fwd(A, B)
