#!/usr/bin/env python3
"""pyrunner.py's ModelNew build: without the initialisers' random draws where load_parameters
overwrites every parameter they fill, and as KernelBench builds it (torch.manual_seed(42), the
initialisers) wherever anything else could have seen the initial values. Runs the runner's file in
its --view mode (no judge) to reach its functions; needs the PyTorch the runner uses."""
import contextlib
import io
import pathlib
import runpy
import sys

import torch
import torch.nn as nn

RUNNER = pathlib.Path(__file__).resolve().parents[2] / "judge" / "runner" / "pyrunner.py"
sys.argv = [str(RUNNER), "--view"]
with contextlib.redirect_stdout(io.StringIO()):
    pr = runpy.run_path(str(RUNNER), run_name="pyrunner_under_test")
build = pr["_build"]

calls = []
real = torch.nn.init.kaiming_uniform_


def counted(t, *a, **k):
    calls.append(t.shape)
    return real(t, *a, **k)


torch.nn.init.kaiming_uniform_ = counted


def built(cls, loaded, *args):
    calls.clear()
    m = build(cls, list(args), set(loaded))
    return m, len(calls)


class Plain(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.register_buffer("scale", torch.full((n,), 0.5))

    def forward(self, x):
        return self.linear(x) * self.scale


# Every parameter the initialisers fill is the problem's: no initial values drawn.
m, n = built(Plain, ["linear.weight", "linear.bias", "scale"], 16)
assert n == 0, n
assert torch.equal(m.scale, torch.full((16,), 0.5))  # buffers are set as the constructor sets them
assert m.linear.weight.shape == (16, 16)

# The problem has no parameters (nothing loaded): built as KernelBench builds it, seed 42.
m, n = built(Plain, [], 16)
assert n == 1, n
torch.manual_seed(42)
assert torch.equal(m.linear.weight, Plain(16).linear.weight)

# A parameter of ModelNew's own (not the problem's): built with the initialisers.
m, n = built(Plain, ["linear.weight", "scale"], 16)
assert n == 1, n
torch.manual_seed(42)
assert torch.equal(m.linear.bias, Plain(16).linear.bias)


class DrawsItsOwn(Plain):
    def __init__(self, n):
        super().__init__(n)
        self.register_buffer("noise", torch.randn(n))  # the generator moves


m, n = built(DrawsItsOwn, ["linear.weight", "linear.bias", "scale", "noise"], 8)
assert n == 1, n
torch.manual_seed(42)
expect = DrawsItsOwn(8)
assert torch.equal(m.noise, expect.noise) and torch.equal(m.linear.weight, expect.linear.weight)


class KeepsACopy(Plain):
    def __init__(self, n):
        super().__init__(n)
        self.weight_t = self.linear.weight.detach().t().contiguous()  # made from an initial value


m, n = built(KeepsACopy, ["linear.weight", "linear.bias", "scale"], 8)
assert n == 1, n
torch.manual_seed(42)
assert torch.equal(m.weight_t, KeepsACopy(8).weight_t)


class KeepsAList(Plain):
    def __init__(self, n):
        super().__init__(n)
        self.pieces = [self.linear.weight[:2].clone()]


assert built(KeepsAList, ["linear.weight", "linear.bias", "scale"], 8)[1] == 1


class InitsABuffer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        w = torch.empty(n, n)
        nn.init.kaiming_uniform_(w)  # an initialiser on a tensor that is not a parameter
        self.register_buffer("w", w)

    def forward(self, x):
        return self.linear(x) @ self.w


m, n = built(InitsABuffer, ["linear.weight", "linear.bias", "w"], 8)
assert n == 2, n


class FailsWithoutValues(Plain):
    def __init__(self, n):
        super().__init__(n)
        if not torch.isfinite(self.linear.weight).all() or self.linear.weight.abs().max() > 1:
            raise ValueError("reads its initial values")


m, n = built(FailsWithoutValues, ["linear.weight", "linear.bias", "scale"], 8)  # may or may not fail without them
assert isinstance(m, FailsWithoutValues)

# The initialisers are themselves again after a build, and a failing constructor's error is the verdict.
assert torch.nn.init.kaiming_uniform_ is counted


class Broken(nn.Module):
    def __init__(self, n):
        super().__init__()
        raise RuntimeError("broken")


try:
    built(Broken, ["x"], 4)
    raise AssertionError("no error")
except RuntimeError as e:
    assert str(e) == "broken"
assert torch.nn.init.kaiming_uniform_ is counted
print("pyrunner build: ok")
