#!/usr/bin/env bash
# maint/diag/isend-defer-ab.sh OUTDIR: MPIACC_DEVICE_ISEND_DEFER on against off on the GPU
# machine. With it off, a nonblocking send of small CUDA data (below
# MPIACC_DEVICE_ISEND_EAGER_MAX, no stream or event attribute, no IPC pull on offer) waits
# in the call for its staging copy, and a window of them runs at the copy's latency per
# message: IPC-off windows of 8 B-4 KiB read 0.82-0.94 of staging by hand (sessions 22-24).
# With it on, the call returns once the copy is issued and progress sends the payload.
# Measured, interleaved over rounds, in one build:
#   1. the GPU tests that cover the path (cuda_p2p in its four variants, cuda_stream_pipeline),
#      then cuda_p2p_pipeline again with the knob off;
#   2. bench/pt2pt with MPIACC_IPC=0, D->D and D->H, 8 B-64 KiB, MPI-ACC and the hand
#      anchors, per knob value.
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/isend-defer-ab.sh.
# DEFER_ROUNDS (2), DEFER_SIZES (8,64,1024,4096,16384,65536).
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log isend-defer-ab
gpu_tests="test/gpu/cuda_p2p test/gpu/cuda_p2p_pipeline test/gpu/cuda_p2p_same_gpu test/gpu/cuda_p2p_copy_flags"
gpu_tests="$gpu_tests test/gpu/cuda_stream_pipeline test/gpu/cuda_stream"
echo "== GPU tests"
timeout 200 make -s check TESTS="$gpu_tests" 2>&1 | grep -E "^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS)|^# " | grep -v "^PASS" | head -40
grep -hE "^not ok|^ok" test/gpu/cuda_p2p*.log test/gpu/cuda_stream*.log 2>/dev/null | awk '{print $1, $2}' | sort | uniq -c
grep -h "^not ok" -A3 test/gpu/*.log 2>/dev/null | head -30
echo "== cuda_p2p_pipeline with MPIACC_DEVICE_ISEND_DEFER=0"
MPIACC_DEVICE_ISEND_DEFER=0 timeout 120 $MPIEXEC -n 2 test/gpu/cuda_p2p_pipeline 2>&1 | grep -E "^not ok|^1\.\." ;
MPIACC_DEVICE_ISEND_DEFER=0 timeout 120 $MPIEXEC -n 2 test/gpu/cuda_p2p_pipeline 2>&1 | grep -c "^ok"
for round in $(seq 1 "${DEFER_ROUNDS:-2}"); do
  for v in 1 0; do
    echo "== round $round MPIACC_DEVICE_ISEND_DEFER=$v"
    MPIACC_IPC=0 MPIACC_DEVICE_ISEND_DEFER=$v timeout 120 $MPIEXEC -n 2 bench/pt2pt --watchdog 20 --rounds 2 \
      --sizes "${DEFER_SIZES:-8,64,1024,4096,16384,65536}" --dirs 'D->D,D->H' --configs mpiacc,staged,pipeline \
      --label "-d$v" 2>&1 | grep -v '^#' | awk 'NF == 5'
  done
done
