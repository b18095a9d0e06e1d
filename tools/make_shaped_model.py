#!/usr/bin/env python3
"""A randomly initialised model of a Qwen2.5 size (0.5b, 1.5b, 7b; or tiny), in Hugging Face's
layout with Qwen's real vocabulary: what `leap run` with the LM policy needs to measure step
times, memory and the weight broadcast at a real model's size without downloading one. Its
answers are noise (no code block: compile_error), so it measures the machinery, not learning.

  python tools/make_shaped_model.py --shape 0.5b --out runs/shaped-0.5b [--dtype bfloat16] [--device cuda]
Needs torch and transformers (4.40+); the tokenizer comes from tests/fixtures/lm/qwen-vocab.
"""
import argparse
import gzip
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Qwen2.5 configs (config.json of the Hugging Face releases); tiny: for a quick check.
SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, tie_word_embeddings=False),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="where to initialise the weights (cuda: seconds for a 7b, not minutes)")
    a = ap.parse_args()
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(a.seed)
    cfg = Qwen2Config(vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                      bos_token_id=151643, eos_token_id=151645, **SHAPES[a.shape])
    torch.set_default_dtype(getattr(torch, a.dtype))
    if a.device == "cpu":
        model = Qwen2ForCausalLM(cfg)
    else:  # torch 2's device context: the weights are created there
        with torch.device(a.device):
            model = Qwen2ForCausalLM(cfg)
    a.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    with gzip.open(ROOT / "tests" / "fixtures" / "lm" / "qwen-vocab" / "tokenizer.json.gz", "rb") as src, \
            open(a.out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    n = sum(p.numel() for p in model.parameters())
    print(f"{a.shape}: {n / 1e9:.3f} B parameters ({a.dtype}) -> {a.out}")


if __name__ == "__main__":
    main()
