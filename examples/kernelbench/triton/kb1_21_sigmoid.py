# ModelNew for KernelBench problem kb1_21_sigmoid with a Triton kernel (appended to the problem's file, whose
# Model it subclasses): one pass over the flattened tensor, 64-bit offsets (the problem has more
# than 2^31 elements at KernelBench's sizes).
import triton
import triton.language as tl


@triton.jit
def _elementwise(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 1.0 / (1.0 + tl.exp(-x)), mask=mask)


class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _elementwise[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y
