#!/usr/bin/env bash
# What loading a precompiled PyTorch header costs each compile of a load_inline extension: the
# farm's two preludes (<torch/extension.h> for main.cpp; cuda.cu's own <torch/types.h> for its
# host pass) precompiled with the farm's flags, then `g++ -include` of an empty file with each,
# beside the same file compiled with no prelude; REPEATS runs each, the median printed.
# Usage: bench/prelude-load.sh [PYTHON]   (default: the .venv deploy/python-env.sh makes, else python3)
set -euo pipefail
py=${1:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
repeats=${REPEATS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t flags < <("$py" "$(dirname "$0")/torch_build_flags.py" 2>/dev/null)
flags+=(-DTORCH_API_INCLUDE_EXTENSION_H -std=c++17 -fPIC -w)
echo 'int x;' > "$work/empty.cpp"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_of() {  # seconds of one compile of empty.cpp with the given extra arguments
  local t0 t1
  t0=$(date +%s.%N); g++ "$@" "${flags[@]}" -c "$work/empty.cpp" -o "$work/e.o"; t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", b - a}'
}
echo "torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null), $(g++ --version | head -1), $(nproc) cores, $repeats runs each"
echo
echo "| prelude | precompile s | .gch MB | compile of an empty file with it, median s |"
echo "|---|---:|---:|---:|"
for h in torch/extension.h torch/types.h; do
  name=$(echo "$h" | tr '/.' '__')
  printf '#include <%s>\n' "$h" > "$work/$name.h"
  t0=$(date +%s.%N); g++ "${flags[@]}" -x c++-header "$work/$name.h" -o "$work/$name.h.gch"; t1=$(date +%s.%N)
  mb=$(( $(stat -c %s "$work/$name.h.gch") / 1000000 ))
  med=$(for _ in $(seq "$repeats"); do time_of -include "$work/$name.h"; done | median)
  echo "| <$h> | $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') | $mb | $med |"
done
echo "| none | | | $(for _ in $(seq "$repeats"); do time_of; done | median) |"
