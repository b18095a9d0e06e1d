#!/usr/bin/env bash
# Call 5: compile hiding's pipelined modes with spares started in batches (A) and one at a time (B).
set -u
O=$OUT/c5; mkdir -p $O
echo "local tree: 7th commit of session 43 (+ untracked tmpdiag)" > $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
BUILD_TARGETS="leap leap-evald leap-runner leap-nvrtc leap-pyrunner" BUILD_ONLY=1 timeout 200 bench/gpu-report.sh $O/build > $O/build.out 2>&1; t "build rc=$?"
export PATH=/tmp/leap-deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):${LD_LIBRARY_PATH:-}
sed "/^\[sandbox\]/a serial_spare_starts = true" configs/demo-cuda.toml > $O/serial.toml
for run in A:configs/demo-cuda.toml B:$O/serial.toml; do
  n=${run%%:*}; cfg=${run#*:}
  timeout 75 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 0 --modes pipelined --config $cfg \
    --records $O/$n.jsonl > $O/$n.md 2> $O/$n.err; t "$n rc=$?"
  grep -E "^\| pipelined" $O/$n.md
done
python3 tools/stage_sums.py $O/A.jsonl $O/B.jsonl > $O/stage-sums.txt 2>&1; grep -E "gpu_lock|eval |span|ok " $O/stage-sums.txt
