#!/usr/bin/env bash
# What the host side of a typical KernelBench answer's load_inline build costs in the compile farm,
# three ways, in one run: as load_inline's two files (main.cpp: <torch/extension.h> precompiled, the
# declaration and the pybind11 module; cuda.cu's host pass: the lighter precompiled prelude, then
# the answer's own `#include <torch/extension.h>` parsed); as one host pass with <torch/extension.h>
# and the CUDA headers precompiled, the binding appended (the farm's build of a main.cpp that only
# declares, session 31); and as that pass with the light prelude (<torch/types.h>, the CUDA headers,
# PyTorch's pybind11 casters) precompiled and the answer's `#include <torch/extension.h>` made empty
# (the farm now, where the answer needs no more of PyTorch's API). Compiler CPU seconds of each file, REPEATS runs, medians; the precompiles not counted
# (once per machine). CUDA's headers from $CUDA_HOME (default /usr/local/cuda); PyTorch's CUDA
# context headers where that PyTorch has them (a CPU build lacks them: left out of both preludes).
# Usage: bench/extension-build.sh [PYTHON]
set -euo pipefail
py=${1:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
repeats=${REPEATS:-3}
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t flags < <("$py" "$(dirname "$0")/torch_build_flags.py" 2>/dev/null)
flags+=(-I"$cuda/include" -DTORCH_API_INCLUDE_EXTENSION_H -std=c++17 -fPIC -w)
cu_headers='#include <cuda.h>
#include <cuda_runtime.h>'
if printf '#include <ATen/cuda/CUDAContext.h>\n' | g++ "${flags[@]}" -fsyntax-only -x c++ - 2>/dev/null; then
  cu_headers+=$'\n#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>'
  context=yes
else
  context="no (this PyTorch has no CUDA headers)"
fi
printf '#include <torch/extension.h>\n' > "$work/main_prelude.h"
printf '#include <torch/types.h>\n%s\n#include <torch/csrc/utils/pybind.h>\n' "$cu_headers" > "$work/light_prelude.h"
printf '#include <torch/extension.h>\n%s\n' "$cu_headers" > "$work/extension_prelude.h"
mkdir -p "$work/shadow/torch" && : > "$work/shadow/torch/extension.h"
for p in main_prelude light_prelude extension_prelude; do
  g++ "${flags[@]}" -x c++-header "$work/$p.h" -o "$work/$p.h.gch"
done
# The answer (tests/fixtures/kernelbench/answers_cuda/relu.py): its declaration, and its cuda.cu's
# host code as the NVRTC split leaves it (the kernel launch a call into the embedded image).
decl='torch::Tensor relu_forward(torch::Tensor x);'
module='PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_forward", &relu_forward, "relu_forward"); }'
cat > "$work/host.cpp" <<'CPP'
#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <torch/extension.h>
extern "C" void leap_launch_relu_kernel(const float* x, float* y, int64_t n, cudaStream_t s);
torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  leap_launch_relu_kernel(x.data_ptr<float>(), y.data_ptr<float>(), n, nullptr);
  return y;
}
CPP
printf '#include <torch/extension.h>\n%s\n%s\n' "$decl" "$module" > "$work/main.cpp"
{ cat "$work/host.cpp"; printf '#line 1 "main.cpp"\n#include <torch/extension.h>\n%s\n%s\n' "$decl" "$module"; } > "$work/bound.cpp"
cpu_of() {  # compiler CPU seconds (user + sys) of one compile: prelude, file[, include folder first]
  /usr/bin/time -f "%U %S" -o "$work/t" g++ -Winvalid-pch -include "$work/$1.h" ${3:+-I"$3"} "${flags[@]}" \
    -DTORCH_EXTENSION_NAME=relu_cuda -c "$work/$2" -o "$work/o.o"
  awk '{printf "%.2f\n", $1 + $2}' "$work/t"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
main=$(for _ in $(seq "$repeats"); do cpu_of main_prelude main.cpp; done | median)
host=$(for _ in $(seq "$repeats"); do cpu_of light_prelude host.cpp; done | median)
bound=$(for _ in $(seq "$repeats"); do cpu_of extension_prelude bound.cpp; done | median)
light=$(for _ in $(seq "$repeats"); do cpu_of light_prelude bound.cpp "$work/shadow"; done | median)
two=$(awk -v a="$main" -v b="$host" 'BEGIN {printf "%.2f", a + b}')
echo "torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null), $(g++ --version | head -1), $(nproc) cores, PyTorch's CUDA context headers: $context; $repeats runs each, compiler CPU s (medians)"
echo
echo "| build of the answer's host side | main.cpp | cuda.cu's host pass | total | vs two files |"
echo "|---|---:|---:|---:|---:|"
echo "| two files (load_inline's; the farm before) | $main | $host | $two | 1.00x |"
echo "| one host pass, the binding in it, <torch/extension.h> precompiled | - | $bound | $bound | $(awk -v a="$two" -v b="$bound" 'BEGIN {printf "%.2fx", a / b}') |"
echo "| one host pass, the light prelude (the farm now) | - | $light | $light | $(awk -v a="$two" -v b="$light" 'BEGIN {printf "%.2fx", a / b}') |"
