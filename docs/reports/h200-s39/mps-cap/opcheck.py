import json, os, torch
import torch.nn.functional as F
torch.manual_seed(0)
r = {"cap": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "none"), "sms": torch.cuda.get_device_properties(0).multi_processor_count}
def chk(name, f):
    try:
        r[name] = f()
    except Exception as e:
        r[name] = "error: " + str(e)[:160]
for (m, k, n) in [(12288, 896, 4864), (12288, 4864, 896), (12288, 896, 151936), (64, 896, 4864), (12288, 896, 896)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    def g():
        c = (a @ b).float(); ref = a.float() @ b.float()
        return [bool(torch.isfinite(c).all()), float(((c - ref).abs().max() / ref.abs().max()))]
    chk(f"mm{m}x{k}x{n}", g)
q = torch.randn(16, 14, 768, 64, device="cuda", dtype=torch.bfloat16)
kv = torch.randn(16, 2, 768, 64, device="cuda", dtype=torch.bfloat16)
def sd():
    o = F.scaled_dot_product_attention(q, kv.repeat_interleave(7, 1), kv.repeat_interleave(7, 1), is_causal=True)
    return bool(torch.isfinite(o).all())
chk("sdpa", sd)
x = torch.randn(12288, 151936 // 4, device="cuda")
chk("log_softmax", lambda: bool(torch.isfinite(F.log_softmax(x, -1)).all()))
print(json.dumps(r))
