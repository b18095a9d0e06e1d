#!/usr/bin/env python3
"""Tiny random Qwen2 and Llama models made with Hugging Face transformers, and their golden
outputs, for the parity tests of leap's language-model engine (lm/). Norm weights and the q/k/v
biases are randomised so that defaults cannot hide a bug. Writes, per model, DIR/<name>/
(config.json, model.safetensors) and DIR/<name>/golden.safetensors (input ids, logits, greedy
continuation).

  tools/make_lm_fixtures.py tests/fixtures/lm     (transformers 4.40 with the PyTorch beside libtorch)
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def make(out, name, model, seed):
    torch.manual_seed(seed)
    randomise(model, seed)
    model.eval()
    d = os.path.join(out, name)
    model.save_pretrained(d, safe_serialization=True)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=g)
    with torch.no_grad():
        logits = model(ids).logits
        greedy = model.generate(ids[:1], max_new_tokens=24, do_sample=False, pad_token_id=0)[:, ids.shape[1]:]
    # Gradient of the summed log-probability of the given tokens, for the training forward.
    model.zero_grad()
    lp = torch.log_softmax(model(ids).logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).sum()
    lp.backward()
    first_q = [n for n, _ in model.named_parameters() if n.endswith("self_attn.q_proj.weight")][0]
    grad = dict(model.named_parameters())[first_q].grad
    save_file({"ids": ids.contiguous(), "logits": logits.contiguous(), "greedy": greedy.contiguous(),
               "logprob_sum": lp.detach().reshape(1), "grad_q_proj_0": grad.contiguous()},
              os.path.join(d, "golden.safetensors"), metadata={"grad_of": first_q})
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters -> {d}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/lm"
    common = dict(vocab_size=384, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False)
    make(out, "tiny-qwen2", Qwen2ForCausalLM(Qwen2Config(**common)), 11)
    make(out, "tiny-llama", LlamaForCausalLM(LlamaConfig(**common, attention_bias=False)), 12)


if __name__ == "__main__":
    main()
