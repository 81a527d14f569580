import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_rowsum(x_ptr, out_ptr, cols, stride, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < cols
        v = tl.load(x_ptr + row * stride + c, mask=m, other=0.0)
        acc += tl.where(m, v * scale + 1.0, 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        scale_bias_rowsum[(rows,)](x, out, cols, x.stride(0), self.scale, BLOCK=512)
        return out
