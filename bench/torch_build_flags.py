#!/usr/bin/env python3
"""The host compiler flags the compile farm builds a load_inline extension with (its
`TorchBuild::flags` without -std/-fPIC/-w): PyTorch's and Python's include folders, the C++ ABI,
pybind11's identity. One per line, for the bench scripts (`mapfile -t flags < <(PY this)`)."""
import sysconfig

import torch
import torch.utils.cpp_extension as c

try:
    inc = c.include_paths(device_type="cpu")
except TypeError:
    inc = c.include_paths(cuda=False)
for d in inc + [sysconfig.get_paths()["include"]]:
    print("-I" + d)
print("-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    v = getattr(torch._C, "_PYBIND11_" + k, None)
    if v is not None:
        print('-DPYBIND11_%s="%s"' % (k, v))
