#!/usr/bin/env bash
# maint/diag/stall-hunt.sh OUTDIR: catches the rare long MPI_Send/MPI_Recv calls of
# MPI-ACC's small device ping-pongs and shows what ran inside them.
# Session 42 saw single stalls of ~5, ~8 and ~48 ms in host-to-device ping-pongs of 16 and
# 32 KiB (a round's mean of 68.5, 91.9 and 496.8 us one way against 10-16 otherwise),
# once in the third round and twice in the first, and none in the staging-by-hand rows
# beside them. This runs bench/pt2pt's ping-pongs many rounds under maint/diag/
# p2p-timeline.c with TIMELINE_SLOW_US (only calls of at least STALL_US, default 1000, are
# kept), with counters-at-finalize.c beside it, and prints every kept call's CUDA and PMPI
# calls, the time outside them, and the involuntary context switches in it.
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/stall-hunt.sh.
# STALL_SIZES (default 16K,32K), STALL_DIRS (default "H->D D->H D->D"), STALL_ROUNDS (15, bench_harness.h's most),
# STALL_LAUNCH (mpiexec options, such as "-bind-to core"). Each kept call lists its CPU at
# entry and return when they differ (cpu_from, cpu_to) and the process's threads then.
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log stall-hunt
timeline_shim || exit 1
$MPICC -shared -fPIC -o /tmp/counters.so "$diag/counters-at-finalize.c" -ldl || exit 1
counters=cuda.copy.resident,cuda.copy.resident_declined,cuda.resident.launch,cuda.resident.lost
counters=$counters,cuda.resident.time_sliced,protocol.bounce.allocated,protocol.bounce.reused,pool.wait
counters=$counters,protocol.recv.payload_from_pinned,protocol.recv.payload_through_slots,protocol.send.ipc
counters=$counters,protocol.recv.ipc,protocol.send.ipc_declined
for dir in ${STALL_DIRS:-H->D D->H D->D}; do
  echo "== mpiacc $dir ${STALL_SIZES:-16K,32K}, ${STALL_ROUNDS:-15} rounds, calls of at least ${STALL_US:-1000} us kept, mpiexec ${STALL_LAUNCH:-}"
  rm -rf /tmp/tl && mkdir -p /tmp/tl
  # Windows (MPI_Isend/MPI_Irecv/MPI_Waitall) pass through unrecorded: only the ping-pongs.
  TIMELINE_THREADS=1 COUNTERS=$counters TIMELINE_SLOW_US=${STALL_US:-1000} TIMELINE_SKIP=0 TIMELINE_DIR=/tmp/tl timeout 240 \
    $MPIEXEC ${STALL_LAUNCH:-} -n 2 env LD_PRELOAD="/tmp/p2p-timeline.so /tmp/counters.so" bench/pt2pt --iters 1000 --bw-iters 10 \
    --rounds "${STALL_ROUNDS:-15}" --watchdog 30 --sizes "${STALL_SIZES:-16K,32K}" --dirs "$dir" \
    --configs staged,mpiacc --csv /dev/stdout 2>&1 | grep -E '^# round|^\[|^(staged|mpiacc),|^pt2pt:'
  python3 "$diag/p2p-timeline.py" --each /tmp/tl/timeline.0.tsv /tmp/tl/timeline.1.tsv 2>&1 | head -400
done
