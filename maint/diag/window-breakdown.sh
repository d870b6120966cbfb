#!/usr/bin/env bash
# maint/diag/window-breakdown.sh OUTDIR: where each side of an IPC-off window spends its
# time, per MPI_Isend, MPI_Irecv and MPI_Waitall, under maint/diag/p2p-timeline.
# After session 24 IPC-off D->D windows of 1-4 KiB ran at ~8.8 us a message, while the
# sender side alone (D->H) ran at ~4: the receiver's device receives (bounce, pinned slot,
# copy to the device) bound them. This records the window phase of bench/pt2pt for
# MPI-ACC and for staging by hand, D->D and D->H, and prints each rank's breakdown (the
# CUDA and PMPI calls inside each top-level call, and the time outside them).
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/window-breakdown.sh.
# WINDOW_SIZES (default "4096 65536"), WINDOW_DIRS (default "D->D D->H").
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log window-breakdown
timeline_shim || exit 1
for size in ${WINDOW_SIZES:-4096 65536}; do
  for dir in ${WINDOW_DIRS:-D->D D->H}; do
    for config in mpiacc staged; do
      echo "== $config $dir $size B, MPIACC_IPC=0"
      rm -rf /tmp/tl && mkdir -p /tmp/tl
      # The latency phase comes first (MPI_Send/MPI_Recv, not recorded); the windows
      # after it are what TIMELINE_TOPS records.
      MPIACC_IPC=0 TIMELINE_TOPS=MPI_Isend,MPI_Irecv,MPI_Waitall TIMELINE_SKIP=200 TIMELINE_CALLS=2000 \
        TIMELINE_DIR=/tmp/tl LD_PRELOAD=/tmp/p2p-timeline.so timeout 60 \
        $MPIEXEC -n 2 bench/pt2pt --rounds 1 --watchdog 20 --sizes "$size" --dirs "$dir" --configs "$config" \
        --csv /dev/stdout 2>&1 | grep -v '^#' | grep -v '^config,'
      python3 -c "
import importlib.util, sys
spec = importlib.util.spec_from_file_location('tl', '$diag/p2p-timeline.py')
tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
for rank in (0, 1):
    tl.breakdown(rank, tl.load('/tmp/tl/timeline.%d.tsv' % rank))
" 2>&1 | head -60
    done
  done
done
