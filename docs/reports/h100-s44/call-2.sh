#!/usr/bin/env bash
# Call 2 (session 44): 3732e37 (too slow at 2 of 2 later calls; compile-hiding clock from the judge
# up): CUDA hostile folder, compile hiding (64), leap bench serve (256 requests, 16 clients), hiding again.
set -u
O=$OUT/c2; mkdir -p $O
echo "local tree: 3732e37 (+ untracked tmpdiag)" > $O/tree.txt; git status --short >> $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
left() { echo $(( 575 - ($(date +%s) - start) )); }
BUILD_ONLY=1 timeout 280 bench/gpu-report.sh $O/build > $O/build.out 2>&1; t "build rc=$?"
tail -3 $O/build.out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH=/tmp/leap-deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):${LD_LIBRARY_PATH:-}
timeout 60 ./build-gpu/leap eval --backend cuda --candidates tests/fixtures/hostile/cuda --out $O/cuda-hostile.jsonl > $O/cuda-hostile.txt 2>&1; t "hostile eval rc=$?"
hid() { timeout $1 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 0 \
  --records $O/compile-hiding-$2.jsonl > $O/compile-hiding-$2.md 2> $O/compile-hiding-$2.err; t "hiding $2 rc=$?"
  head -12 $O/compile-hiding-$2.md; python3 tools/stage_sums.py $O/compile-hiding-$2.jsonl > $O/stage-sums-$2.txt 2>&1; }
hid 130 1
l=$(left); [ $l -gt 230 ] && { SERVE_ONLY=1 REQUESTS=256 CLIENTS=16 timeout $(( l - 100 )) bench/gpu-report.sh $O/serve > $O/serve.out 2>&1; t "serve rc=$?"; head -8 $O/serve/serve.md; }
l=$(left); [ $l -gt 100 ] && hid $(( l - 10 )) 2
cd $OUT && find c2 -type f -size -20M | tar czf c2.tgz -T - && rm -rf c2; ls -la $OUT
