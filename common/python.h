// The Python with PyTorch that KernelBench-format candidates use: the compile farm builds their
// load_inline extensions against its PyTorch and the judge's Python runners run in it, so both
// find it by one rule.
#pragma once
#include <string>

namespace leap {

// `given` when set; else the first of $LEAP_PYTHON, deploy/python-env.sh's .venv, python3 (on PATH)
// and /usr/bin/python3 that imports torch.
// Throws LeapError saying what was tried.
std::string python_with_torch(const std::string& given = "");

}  // namespace leap
