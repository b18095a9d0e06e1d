#!/usr/bin/env bash
# one-off device call (not committed)
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
BUILD_ONLY=1 bench/gpu-report.sh $R/build > $R/build.txt 2>&1 || { tail -30 $R/build.txt; tar czf $OUT/r.tgz -C $OUT r; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PATH=/tmp/leap-deps/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
git rev-parse HEAD > $R/commit.txt 2>/dev/null; git status --short > $R/tree-status.txt 2>/dev/null
(cd build-gpu && timeout 100 ctest --output-on-failure -R "MpiWeights|WeightDigest") > $R/ctest.log 2>&1; grep -E "Test +#|tests passed|Failed" $R/ctest.log
timeout 90 mpirun -np 2 ./build-gpu/leap-bench-broadcast --shared-gpu --models 0.5b,1.5b,7b --bucket-mb 64,256 > $R/broadcast.md 2> $R/broadcast.err; cat $R/broadcast.md; tail -3 $R/broadcast.err
echo "t $(( $(date +%s) - t0 )) s"
command -v nvidia-cuda-mps-control || echo "no MPS control"
python3 tools/make_shaped_model.py --shape 0.5b --device cuda --out runs/shaped-0.5b > $R/model.log 2>&1 || tail -5 $R/model.log
echo "t $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0 MPS=${MPS-1} LEAP=build-gpu/leap STEPS=${STEPS:-4} K=1 timeout $(( 570 - ($(date +%s) - t0) )) \
  bench/staleness.sh configs/lm-shaped-cuda-learn.toml $R/staleness > $R/staleness.md 2>&1; cat $R/staleness.md
echo "t $(( $(date +%s) - t0 )) s"
rm -rf $R/staleness/run-*/checkpoints $R/staleness/mps/pipe
tar czf $OUT/r.tgz -C $OUT r
