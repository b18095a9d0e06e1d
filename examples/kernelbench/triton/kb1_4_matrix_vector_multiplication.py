# ModelNew for KernelBench problem kb1_4 (A (M, K) times B (K, 1)) with Triton: one program per row
# of A, a running fp32 sum of a BLOCK-wide chunk at a time (the product is bound by reading A).
import triton
import triton.language as tl


@triton.jit
def _matvec(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * K
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, K, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < K
        acc += tl.load(a_ptr + row + offs, mask=mask, other=0.0) * tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(c_ptr + tl.program_id(0), tl.sum(acc, 0))


class ModelNew(Model):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
        _matvec[(A.shape[0],)](A, B, C, A.shape[1], BLOCK=4096, num_warps=8)
        return C
