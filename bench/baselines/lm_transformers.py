#!/usr/bin/env python3
"""The baseline of `leap bench lm`: Hugging Face transformers' `generate` on a model folder, at the
batch, prompt length, new tokens and sampling leap's engine is measured with (random prompt ids,
no early stop). One JSON line on stdout.

  python bench/baselines/lm_transformers.py --model DIR [--device cuda] [--batch 64] [--prompt-len 512] [--new-tokens 256]
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=dtype).to(a.device).eval()
    load_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(model.config.vocab_size, (a.batch, a.prompt_len), generator=g).to(a.device)
    mask = torch.ones_like(ids)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    def run(n):
        sync()
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, do_sample=a.temperature > 0, temperature=a.temperature,
                                 top_p=a.top_p, top_k=0, max_new_tokens=n, min_new_tokens=n,
                                 pad_token_id=model.config.eos_token_id)
        sync()
        assert out.shape[1] == a.prompt_len + n, out.shape
        return time.perf_counter() - t

    run(min(8, a.new_tokens))  # warm-up
    prefill_s = run(1)
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    total_s = run(a.new_tokens)
    print(json.dumps({
        "model": a.model, "device": a.device, "transformers": transformers.__version__, "torch": torch.__version__,
        "attn": getattr(model.config, "_attn_implementation", "?"), "load_s": load_s,
        "generate_s": total_s, "prefill_s": prefill_s,
        "tokens_per_s": a.batch * a.new_tokens / total_s,
        "decode_steps_per_s": (a.new_tokens - 1) / max(total_s - prefill_s, 1e-9),
        "peak_generate_bytes": torch.cuda.max_memory_allocated() if a.device == "cuda" else 0,
    }), flush=True)


if __name__ == "__main__":
    main()
