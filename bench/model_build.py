#!/usr/bin/env python3
"""How long the Python runner takes to make a ModelNew whose parameters are all the problem's
ready for its first call, built and then given the problem's values (load_parameters' copies):
KernelBench's way (torch.manual_seed(42), the module's initialisers draw every initial value)
against pyrunner.py's (no initial values drawn where load_parameters replaces them all), in the
same run, on this host's CPU (where the runner builds ModelNew before moving it to the device).
  python3 bench/model_build.py [--repeats 3]"""
import argparse
import contextlib
import io
import pathlib
import runpy
import statistics
import sys
import time

import torch
import torch.nn as nn

RUNNER = pathlib.Path(__file__).resolve().parents[1] / "judge" / "runner" / "pyrunner.py"


class Linear(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.linear = nn.Linear(n, m)

    def forward(self, x):
        return self.linear(x)


class Mlp(nn.Module):
    def __init__(self, n, hidden, layers):
        super().__init__()
        self.net = nn.Sequential(*[nn.Sequential(nn.Linear(n if i == 0 else hidden, hidden), nn.ReLU()) for i in range(layers)])

    def forward(self, x):
        return self.net(x)


class ConvBn(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x):
        return self.bn(self.conv(x))


CASES = [("Linear(4096, 4096)", Linear, [4096, 4096]), ("Linear(16384, 16384)", Linear, [16384, 16384]),
         ("MLP 8 x Linear(4096, 4096)", Mlp, [4096, 4096, 8]), ("Conv2d(512, 512, 3) + BatchNorm", ConvBn, [512, 512, 3])]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.argv = [str(RUNNER), "--view"]
    with contextlib.redirect_stdout(io.StringIO()):
        build = runpy.run_path(str(RUNNER), run_name="pyrunner_bench")["_build"]
    torch.set_num_threads(1)  # the runner's one thread
    print(f"ModelNew built and given the problem's values, on this host's CPU, one thread, PyTorch {torch.__version__}, "
          f"median of {args.repeats}\n")
    print("| module | parameters | KernelBench's way s | leap's runner s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, cls, init in CASES:
        probe = build(cls, init, set())  # KernelBench's way once: the problem's state
        problem = {k: v.clone() for k, v in probe.state_dict().items()}
        loaded = set(problem)
        count = sum(p.numel() for p in probe.parameters())
        del probe
        times = {"seeded": [], "leap": []}
        for _ in range(args.repeats):
            for way, names in (("seeded", set()), ("leap", loaded)):
                t = time.perf_counter()
                m = build(cls, init, names)
                state = m.state_dict()
                for k, v in problem.items():
                    state[k].copy_(v)
                times[way].append(time.perf_counter() - t)
                del m
        a, b = statistics.median(times["seeded"]), statistics.median(times["leap"])
        print(f"| {name} | {count / 1e6:.1f} M | {a:.3f} | {b:.3f} | {a / b:.1f}x |")


if __name__ == "__main__":
    main()
