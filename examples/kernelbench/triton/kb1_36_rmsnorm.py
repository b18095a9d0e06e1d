# ModelNew for KernelBench problem kb1_36_rmsnorm with Triton: x is (batch, features, d1, d2) and
# the mean of squares runs over features; each program takes a block of contiguous spatial
# positions of one batch entry (coalesced loads) and loops over the features twice.
import triton
import triton.language as tl


@triton.jit
def _rmsnorm(x_ptr, y_ptr, features, spatial, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < spatial
    base = tl.program_id(1).to(tl.int64) * features * spatial
    acc = tl.zeros([BLOCK], tl.float32)
    for f in range(0, features):
        x = tl.load(x_ptr + base + f * spatial + offs, mask=mask, other=0.0)
        acc += x * x
    inv = 1.0 / tl.sqrt(acc / features + eps)
    for f in range(0, features):
        x = tl.load(x_ptr + base + f * spatial + offs, mask=mask)
        tl.store(y_ptr + base + f * spatial + offs, x * inv, mask=mask)


class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        spatial = x[0, 0].numel()
        _rmsnorm[(triton.cdiv(spatial, 1024), x.shape[0])](x, y, x.shape[1], spatial, self.eps, BLOCK=1024)
        return y
