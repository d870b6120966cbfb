#!/usr/bin/env bash
# maint/diag/rndv-hint-ab.sh OUTDIR: MPIACC_HOST_RNDV_HINT_MIN against 0 (off) on
# the GPU machine, where it was measured before it was turned on. Host payloads under the rendezvous
# threshold land in a device receive through a bounce buffer each; windows of 1 MiB ran
# at 0.42-0.74 of the hand pipeline (sessions 10-22), and RTS/CTS forced for every host
# message moved them 2x faster than the hand pipeline but cost host-to-host 9-17% latency
# at 256 KiB-1 MiB. The hint asks RTS/CTS only of senders whose host data lands in device
# receives. This measures, interleaved over rounds, in one build:
#   1. bench/pt2pt H->D (CUDA) 128 KiB-1 MiB, MPI-ACC and the hand anchors, per knob value;
#   2. bench/pt2pt_opencl H->D, the same;
#   3. bench/host_overhead with the knob on: host-to-host must not move (no device receive,
#      so nothing is asked).
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/rndv-hint-ab.sh.
# HINT_VALUES (default "0 128K 256K"), HINT_ROUNDS (2).
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log rndv-hint-ab
sizes=131072,262144,524288,1048576
for round in $(seq 1 "${HINT_ROUNDS:-2}"); do
  for v in ${HINT_VALUES:-0 128K 256K}; do
    echo "== round $round MPIACC_HOST_RNDV_HINT_MIN=$v"
    MPIACC_HOST_RNDV_HINT_MIN=$v timeout 120 $MPIEXEC -n 2 bench/pt2pt --watchdog 20 --rounds 2 --sizes $sizes \
      --dirs 'H->D' --configs mpiacc,staged,pipeline --label "-h$v" 2>&1 | grep -v '^#' | awk 'NF == 5'
    if [ -x bench/pt2pt_opencl ]; then
      MPIACC_HOST_RNDV_HINT_MIN=$v timeout 120 $MPIEXEC -n 2 bench/pt2pt_opencl --watchdog 20 --rounds 2 \
        --sizes $sizes --dirs 'H->D' --configs mpiacc,staged,pipeline --label "-h$v" 2>&1 | grep -v '^#' |
        awk 'NF == 5 { print "ocl-" $0 }'
    fi
  done
done
echo "== host_overhead, MPIACC_HOST_RNDV_HINT_MIN=256K, autodetect off"
MPIACC_HOST_RNDV_HINT_MIN=256K MPIACC_CUDA_AUTODETECT=0 timeout 150 $MPIEXEC -n 2 bench/host_overhead --iters 300 \
  --lat-iters 3000 --rounds 8 --max-size 2097152 2>&1 | grep -v '^#'
