#!/usr/bin/env python3
"""`leap bench lm`: leap's language-model engine beside Hugging Face transformers' `generate` on the
same model folders, batch, prompt length, new tokens and sampling, in the same run: tokens/s, the
ratio, the share of the memory-bandwidth bound, prefill, peak memory, KV cache, and the training
forward+backward of the token log-probabilities. Random-weight models of Qwen2.5 shapes are made
on first use (tools/make_shaped_model.py); their tokens are noise, the arithmetic is a real model's.

  bench/lm_bench.py [--shapes 0.5b,1.5b,7b | --models DIR,...] [--device cuda] [--batch 64]
                    [--prompt-len 512] [--new-tokens 256] [--python PY] [--bandwidth-gbs 4800]
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:200]}
    return json.loads(lines[-1])


def bound_tokens_per_s(cfg, batch, prompt_len, new_tokens, elem, gbs):
    """Tokens/s if a decode step only read its bytes at the device's bandwidth: every weight but the
    embedding table (its B rows are gathered; tied, it is read as the output projection) and the
    KV cache filled half way through the answer."""
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    d = cfg.get("head_dim", h // heads)
    per_layer = h * heads * d * 2 + h * kv * d * 2 + 3 * h * i + 2 * h
    weights = (layers * per_layer + h + cfg["vocab_size"] * h) * elem
    cache = layers * 2 * batch * kv * (prompt_len + new_tokens / 2) * d * elem
    return batch * gbs * 1e9 / (weights + cache), weights


def gb(x):
    return f"{x / 1e9:.2f}" if x else "-"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="0.5b,1.5b,7b", help="Qwen2.5 shapes to make and measure (tiny for a CPU)")
    ap.add_argument("--models", default="", help="model folders to measure instead of --shapes")
    ap.add_argument("--models-dir", default=str(ROOT / "runs" / "lm-bench"), help="where shaped models are made")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--train-batch", type=int, default=16)
    ap.add_argument("--train-len", type=int, default=768)
    ap.add_argument("--python", default=sys.executable, help="Python with torch and transformers (models, baseline)")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--bandwidth-gbs", type=float, default=4800.0, help="device memory bandwidth (H200: 4800 GB/s)")
    ap.add_argument("--no-eager", action="store_true", help="skip leap's eager decode (the CUDA graph's baseline)")
    ap.add_argument("--no-baseline", action="store_true", help="skip transformers")
    return ap.parse_args()


def models_of(a):
    """(name, folder) of each model to measure: --models, or the --shapes made once under --models-dir."""
    models = []
    if a.models:
        models = [(pathlib.Path(m).name, pathlib.Path(m)) for m in a.models.split(",")]
    else:
        for shape in a.shapes.split(","):
            d = pathlib.Path(a.models_dir) / f"shaped-{shape}"
            if not (d / "config.json").exists():
                r = subprocess.run([a.python, str(ROOT / "tools" / "make_shaped_model.py"), "--shape", shape, "--out",
                                    str(d), "--device", a.device], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if r.returncode != 0:
                    sys.exit(f"lm_bench: making the {shape} model failed: {r.stderr[-2000:]}")
            models.append((shape, d))
    return models


def measure(a, models):
    """Per model: its config, leap's run, leap's eager decode, transformers', the bandwidth bound."""
    common = ["--device", a.device, "--batch", str(a.batch), "--prompt-len", str(a.prompt_len),
              "--new-tokens", str(a.new_tokens), "--temperature", str(a.temperature), "--top-p", str(a.top_p)]
    leap = [str(pathlib.Path(a.build) / "leap"), "lm", "bench"]
    rows = []
    for name, d in models:
        cfg = json.loads((d / "config.json").read_text())
        fast = run_json(leap + ["--model", str(d)] + common + ["--train-batch", str(a.train_batch),
                                                                "--train-len", str(a.train_len)])
        eager = {} if a.no_eager or a.device == "cpu" else run_json(
            leap + ["--model", str(d), "--decode", "eager", "--train-batch", "0"] + common)
        base = {} if a.no_baseline else run_json(
            [a.python, str(ROOT / "bench" / "baselines" / "lm_transformers.py"), "--model", str(d)] + common)
        elem = 2 if a.device == "cuda" else 4
        bound, weights = bound_tokens_per_s(cfg, a.batch, a.prompt_len, a.new_tokens, elem, a.bandwidth_gbs)
        rows.append((name, cfg, fast, eager, base, bound, weights))
        for label, j in (("leap", fast), ("leap eager", eager), ("transformers", base)):
            if j:
                print(f"{name} {label}: {json.dumps(j)}", file=sys.stderr, flush=True)
    return rows


def print_table(a, rows):
    """The table, then each error; 1 where a run failed or measured nothing."""
    print(f"## leap bench lm ({a.device}, batch {a.batch}, prompt {a.prompt_len}, {a.new_tokens} new tokens, "
          f"temperature {a.temperature}, top-p {a.top_p})\n")
    print("| model | parameters | leap tokens/s | leap eager tokens/s | transformers tokens/s | leap / transformers "
          "| leap decode / bandwidth bound | prefill s (leap, transformers) | peak GB (leap, transformers) | KV cache GB "
          f"| log-prob fwd+bwd {a.train_batch}x{a.train_len} s (checkpointed) | peak GB (checkpointed) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")

    def num(j, k, f="{:.0f}"):
        return f.format(j[k]) if j and k in j else ("error" if j and "error" in j else "-")

    for name, cfg, fast, eager, base, bound, weights in rows:
        ratio = f"{fast['tokens_per_s'] / base['tokens_per_s']:.1f}x" if "tokens_per_s" in fast and "tokens_per_s" in base else "-"
        share = (f"{fast['decode_steps_per_s'] * a.batch:.0f} / {bound:.0f} = {fast['decode_steps_per_s'] * a.batch / bound:.0%}"
                 if "decode_steps_per_s" in fast and a.device == "cuda" else "-")
        fb = f"{num(fast, 'logprob_fwd_bwd_s', '{:.2f}')} ({num(fast, 'logprob_fwd_bwd_checkpointed_s', '{:.2f}')})"
        fbm = f"{gb(fast.get('logprob_fwd_bwd_peak_bytes', 0))} ({gb(fast.get('logprob_fwd_bwd_checkpointed_peak_bytes', 0))})"
        params = "-" if "params" not in fast else (
            f"{fast['params'] / 1e9:.2f} B" if fast["params"] >= 1e8 else f"{fast['params'] / 1e6:.2f} M")
        print(f"| {name} | {params} | {num(fast, 'tokens_per_s')} | {num(eager, 'tokens_per_s')} | "
              f"{num(base, 'tokens_per_s')} | {ratio} | {share} | "
              f"{num(fast, 'prefill_s', '{:.3f}')}, {num(base, 'prefill_s', '{:.3f}')} | "
              f"{gb(fast.get('peak_generate_bytes', 0))}, {gb(base.get('peak_generate_bytes', 0) if base else 0)} | "
              f"{gb(fast.get('kv_cache_bytes', 0))} | {fb} | {fbm} |")
    errors = [(n, k, j["error"]) for n, _, f, e, b, _, _ in rows for k, j in (("leap", f), ("eager", e), ("transformers", b))
              if j and "error" in j]
    for n, k, e in errors:
        print(f"\n{n} {k}: {e}")
    # A time of a forward+backward whose log-probs or gradients are not finite measures nothing.
    not_finite = [(n, k) for n, _, f, _, _, _, _ in rows if f
                  for k in ("logprob_finite", "logprob_fwd_bwd_grad_finite", "logprob_fwd_bwd_checkpointed_grad_finite")
                  if f.get(k) is False]
    for n, k in not_finite:
        print(f"\n{n} leap: {k} is false: its log-prob times are not results")
    print(f"\nBandwidth bound: the weights a decode step reads (all but the embedding table) and the KV cache "
          f"half filled, at {a.bandwidth_gbs:.0f} GB/s. transformers: `generate` (sampling, top_k=0, min_new_tokens) "
          f"with its default attention.")
    return 1 if errors or not_finite else 0


def main():
    a = parse_args()
    return print_table(a, measure(a, models_of(a)))


if __name__ == "__main__":
    sys.exit(main())
