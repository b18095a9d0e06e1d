#!/usr/bin/env python3
"""Tiny random Qwen2 and Llama models made with Hugging Face transformers, and their golden
outputs, for the parity tests of leap's language-model engine (lm/). Norm weights and the q/k/v
biases are randomised so that defaults cannot hide a bug. Writes, per model, DIR/<name>/
(config.json, model.safetensors) and DIR/<name>/golden.safetensors (input ids, logits, greedy
continuation).

  tools/make_lm_fixtures.py tests/fixtures/lm     (transformers 4.40 with the PyTorch beside libtorch)
  tools/make_lm_fixtures.py tests/fixtures/lm --tokenizer   (a Qwen2-shaped BPE tokenizer, tokenizers 0.19)
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
    # The Qwen2 model speaks the fixture tokenizer's vocabulary (made first: --tokenizer), so that
    # `leap lm generate` runs on it end to end.
    make(out, "tiny-qwen2", Qwen2ForCausalLM(Qwen2Config(**dict(common, vocab_size=3000))), 11)
    import shutil
    shutil.copy(os.path.join(out, "tokenizer", "tokenizer.json"), os.path.join(out, "tiny-qwen2", "tokenizer.json"))
    make(out, "tiny-llama", LlamaForCausalLM(LlamaConfig(**common, attention_bias=False)), 12)


if __name__ == "__main__" and "--tokenizer" not in sys.argv:
    main()


# ---- a byte-level BPE tokenizer in Qwen2's shape (NFC, its split regex, byte-level, chat tokens),
# trained with Hugging Face tokenizers on this repository's sources: the tokenizer parity fixture.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")


def make_tokenizer(out, root):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    files = sorted(str(p) for ext in ("*.cpp", "*.h", "*.md", "*.py") for p in root.rglob(ext)
                   if "build" not in p.parts and "fixtures" not in p.parts)
    tok.train(files, trainer)
    d = os.path.join(out, "tokenizer")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    print(f"tokenizer: {tok.get_vocab_size()} tokens -> {d}")


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[2] == "--tokenizer":
    import pathlib
    make_tokenizer(sys.argv[1], pathlib.Path(__file__).resolve().parents[1])


def tokenizer_golden(out, root):
    """Texts (some of this repository's sources at fixture time, random Unicode) and the ids Hugging
    Face tokenizers gives them: the tokenizer parity test's expectations."""
    import json
    import random
    from tokenizers import Tokenizer
    from fixture_texts import random_texts
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer", "tokenizer.json"))
    texts = [p.read_text() for p in sorted(root.glob("common/*.h"))[:12]]
    texts += [(root / "README.md").read_text()[:20000]]
    rng = random.Random(5)
    pools = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x4e00, 0x4fff), (0x1f300, 0x1f64f),
             (0x3040, 0x30ff), (0x600, 0x6ff)]
    texts += random_texts(rng, 40, 80, pools,
                          [" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "123", " <|im_end|>", "<|im_start|>"])
    texts.append("e\u0301 caf\u00e9 cafe\u0301 \u212b")  # NFC folds these
    golden = [{"text": t, "ids": tok.encode(t).ids} for t in texts]
    with open(os.path.join(out, "tokenizer", "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False)
    print(f"tokenizer golden: {len(golden)} texts")


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[2] == "--tokenizer":
    tokenizer_golden(sys.argv[1], pathlib.Path(__file__).resolve().parents[1])
