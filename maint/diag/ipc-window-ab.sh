#!/usr/bin/env bash
# maint/diag/ipc-window-ab.sh OUTDIR: IPC-on D->D windows of 16 KiB-1 MiB, interleaved
# rounds of MPIACC_STAGING_HUGE_PAGES=1 and 0 and, when AB_OLD_LIB names another build's
# libmpiacc.so.0.0.0 (made on the GPU machine from an older make-dist tarball), that
# library preloaded, with the raw ipc-pull anchor in every round.
# Session 25's final gpu-check read these windows at 3.2 / 13.8 / 53 GB/s (16 / 64 / 256
# KiB) against 4.2 / 21.3 / 82 in its first, the anchor level in both; the session's
# changes do not touch that path, and the machine was slower elsewhere too. This settles it.
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/ipc-window-ab.sh.
# AB_ROUNDS (default 3).
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log ipc-window-ab "AB_OLD_LIB=${AB_OLD_LIB:-}"
S=16384,65536,262144,1048576
run() {  # label, then env assignments
  local label=$1
  shift
  timeout 120 $MPIEXEC -n 2 env "$@" bench/pt2pt --rounds 1 --watchdog 20 --sizes $S --dirs 'D->D' \
    --configs mpiacc --label "$label" --csv /dev/stdout 2>&1 | grep -v '^#' | grep -v ','
}
for r in $(seq 1 "${AB_ROUNDS:-3}"); do
  run hp1-$r MPIACC_STAGING_HUGE_PAGES=1
  run hp0-$r MPIACC_STAGING_HUGE_PAGES=0
  [ -n "${AB_OLD_LIB:-}" ] && run old-$r LD_PRELOAD="$AB_OLD_LIB"
  timeout 60 $MPIEXEC -n 2 bench/pt2pt --rounds 1 --watchdog 20 --sizes $S --dirs 'D->D' --configs ipc-pull \
    --label anchor-$r --csv /dev/stdout 2>&1 | grep -v '^#' | grep -v ','
done
