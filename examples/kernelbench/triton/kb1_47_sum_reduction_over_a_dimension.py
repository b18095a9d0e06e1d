# ModelNew for KernelBench problem kb1_47 (sum over dim 1 of (batch, d1, d2), keepdim) with Triton:
# each program sums a block of contiguous columns of one batch entry down the d1 rows.
import triton
import triton.language as tl


@triton.jit
def _sum_rows(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < cols
    base = tl.program_id(1).to(tl.int64) * rows * cols
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(0, rows):
        acc += tl.load(x_ptr + base + r * cols + offs, mask=mask, other=0.0)
    tl.store(y_ptr + tl.program_id(1).to(tl.int64) * cols + offs, acc, mask=mask)


class ModelNew(Model):
    def forward(self, x):
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        b, rows, cols = x.shape
        y = torch.empty((b, 1, cols), device=x.device, dtype=x.dtype)
        _sum_rows[(triton.cdiv(cols, 512), b)](x, y, rows, cols, BLOCK=512, num_warps=4)
        return y
