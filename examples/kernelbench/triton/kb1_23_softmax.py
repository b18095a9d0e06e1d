# ModelNew for KernelBench problem kb1_23_softmax with Triton: one program per row; a first pass
# keeps the running maximum and the sum of exponentials rescaled to it (online softmax), a second
# writes exp(x - max) / sum.
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, LOG: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + offs, mask=offs < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    mx = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - mx), 0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row + offs, mask=mask)
        if LOG:
            y = x - mx - tl.log(total)
        else:
            y = tl.exp(x - mx) / total
        tl.store(y_ptr + row + offs, y, mask=mask)


class ModelNew(Model):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _softmax[(x.shape[0],)](x, y, x.shape[1], LOG=False, BLOCK=2048, num_warps=8)
        return y
