# One-off: is torch's own 0.5B bf16 forward+backward finite on this GPU share (MPS cap)?
import json, os, sys, torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16).cuda()
print("sdpa/attn:", m.config._attn_implementation, file=sys.stderr)
ids = torch.randint(m.config.vocab_size, (16, 768), device="cuda")
res = {"cap": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "none"),
       "sms": torch.cuda.get_device_properties(0).multi_processor_count}
with torch.no_grad():
    lp = F.log_softmax(m(ids).logits.float(), -1)
    res["fwd_finite"] = bool(torch.isfinite(lp).all())
out = m(ids).logits.float()
F.log_softmax(out, -1).gather(-1, ids.unsqueeze(-1)).sum().backward()
res["grad_finite"] = all(bool(torch.isfinite(p.grad).all()) for p in m.parameters() if p.grad is not None)
x = torch.randn(64, 896, device="cuda", dtype=torch.bfloat16)
w = torch.randn(896, device="cuda", dtype=torch.bfloat16)
a = F.rms_norm(x, (896,), w, 1e-6).float()
b = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)) * w.float()
res["rms_norm_maxerr"] = float((a - b).abs().max())
print(json.dumps(res))
