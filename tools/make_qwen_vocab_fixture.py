#!/usr/bin/env python3
"""The real Qwen vocabulary as a Hugging Face tokenizer.json, and golden ids for leap's parity test.

Qwen2/Qwen2.5 tokenize with Qwen's byte-level BPE: 151,643 ranked byte sequences (the same ranks as
Qwen-7B's `qwen.tiktoken`), split first by Qwen's regex, then the chat tokens from id 151643. This
script turns the tiktoken ranks into tokenizer.json's form (GPT-2 byte-to-unicode strings; merges:
every token's splits into two tokens, ordered by the merged token's rank), checks that Hugging Face
tokenizers then gives the same ids as tiktoken itself on every test text, and writes:

  OUT/tokenizer.json.gz   the tokenizer (gzip: 7 MB of JSON as ~2.5 MB)
  OUT/golden.json         texts and their ids (the expectations of Tokenizer.QwenVocabulary*)

The ranks come from PyPI, no model download: `pip download dashscope==2.0.2 --no-deps` and
`unzip -j dashscope-*.whl dashscope/resources/qwen.tiktoken` (Apache-2.0).
Usage: python tools/make_qwen_vocab_fixture.py qwen.tiktoken tests/fixtures/lm/qwen-vocab
Needs: tokenizers (0.19), tiktoken.
"""
import base64
import gzip
import json
import pathlib
import random
import sys
import unicodedata

from fixture_texts import random_texts

# Qwen's split regex (Qwen2's tokenizer.json Split pattern).
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
           r"|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
FIRST_SPECIAL = 151643


def byte_to_unicode():
    """GPT-2's reversible map of the 256 byte values to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def load_ranks(path):
    ranks = {}
    for line in pathlib.Path(path).read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def tokenizer_json(ranks):
    b2u = byte_to_unicode()
    show = lambda bs: "".join(b2u[b] for b in bs)  # noqa: E731
    vocab = {show(bs): r for bs, r in ranks.items()}
    merges = []
    for bs, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        splits = [(bs[:i], bs[i:]) for i in range(1, len(bs)) if bs[:i] in ranks and bs[i:] in ranks]
        splits.sort(key=lambda lr: (ranks[lr[0]], ranks[lr[1]]))
        merges += [f"{show(left)} {show(right)}" for left, right in splits]
    added = [{"id": FIRST_SPECIAL + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def texts(root):
    out = [p.read_text() for p in sorted(root.glob("lm/*.cpp"))[:6]]
    out += [(root / "docs" / "lm.md").read_text()[:20000]]
    out += ["def relu(x):\n    return torch.clamp(x, min=0)  # 1234567 numbers split one digit each\n",
            "中文：内核优化。日本語のテキスト、한국어 텍스트, ελληνικά, русский, العربية, עברית 🚀🔥👍🏽",
            "  leading spaces\n\n\n\ttabs\r\n\r\nCRLF  trailing   ", "'S 'LL 'Re I'm don't WE'VE", "x" * 300]
    rng = random.Random(11)
    pools = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x4e00, 0x9fff), (0x1f300, 0x1f64f),
             (0x3040, 0x30ff), (0x600, 0x6ff), (0xac00, 0xd7a3)]
    out += random_texts(rng, 60, 120, pools, [" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "123", "0.5", "__global__"])
    return [unicodedata.normalize("NFC", t) for t in out]  # tiktoken does not normalise; compare on NFC text


def main():
    import tiktoken
    from tokenizers import Tokenizer
    src, out = sys.argv[1], pathlib.Path(sys.argv[2])
    root = pathlib.Path(__file__).resolve().parents[1]
    ranks = load_ranks(src)
    assert len(ranks) == FIRST_SPECIAL, f"{len(ranks)} ranks, expected {FIRST_SPECIAL}"
    spec = tokenizer_json(ranks)
    tok = Tokenizer.from_str(json.dumps(spec))
    reference = tiktoken.Encoding("qwen", pat_str=PATTERN, mergeable_ranks=ranks,
                                  special_tokens={s: FIRST_SPECIAL + i for i, s in enumerate(SPECIALS)})
    golden, tokens = [], 0
    for t in texts(root):
        ids = tok.encode(t).ids
        want = reference.encode(t, allowed_special="all")  # chat tokens in the text are tokens, as in Hugging Face
        assert ids == want, f"tokenizers and tiktoken differ on {t[:80]!r}"
        golden.append({"text": t, "ids": ids})
        tokens += len(ids)
    chat = "<|im_start|>user\nWrite a ReLU kernel.<|im_end|>\n<|im_start|>assistant\n"
    golden.append({"text": chat, "ids": tok.encode(chat).ids})
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "tokenizer.json.gz", "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(spec, f, ensure_ascii=False)
    (out / "golden.json").write_text(json.dumps(golden, ensure_ascii=False), encoding="utf-8")
    print(f"{len(ranks)} ranks, {len(spec['model']['merges'])} merges; {len(golden)} texts, {tokens} tokens, "
          f"tokenizers == tiktoken on all -> {out}")


if __name__ == "__main__":
    main()
