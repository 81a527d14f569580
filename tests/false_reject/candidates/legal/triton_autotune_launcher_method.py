import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = alpha
        self.kernel = scale_kernel

    def _launch(self, x, out):
        n = out.numel()
        self.kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, self.alpha, n)
        return out

    def forward(self, x):
        return self._launch(x.contiguous(), torch.empty_like(x))
