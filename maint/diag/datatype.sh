#!/usr/bin/env bash
# maint/diag/datatype.sh OUTDIR: bench/datatype at its full sizes (matrices 1K-16K, grids
# 64^3-512^3, three rounds), then its faces again with MPIACC_IPC=0, in two processes;
# the CSVs go to OUTDIR/datatype.csv and OUTDIR/datatype-noipc.csv, each program's output
# and summary to OUTDIR/datatype.txt. Run through maint/gpu-check (which builds the tree
# and exports MPIEXEC):
#   GPU_CHECK_SCRIPT=maint/diag/datatype.sh bash maint/gpu-check
# DATATYPE_ARGS: more options for both runs (`--quick` for the quick sizes, `--cases
# vector,lower` or `--sizes 4K,16K` for part of the sweep); DATATYPE_NOIPC=0 leaves the
# IPC-off run out.
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log datatype "DATATYPE_ARGS='${DATATYPE_ARGS:-}'"
# shellcheck disable=SC2086 # DATATYPE_ARGS: options, split on purpose
"$MPIEXEC" -n 2 bench/datatype ${DATATYPE_ARGS:-} --watchdog 120 --csv "$out/datatype.csv"
rc=$?
if [ "${DATATYPE_NOIPC:-1}" != 0 ]; then
  # shellcheck disable=SC2086
  MPIACC_IPC=0 "$MPIEXEC" -n 2 bench/datatype ${DATATYPE_ARGS:-} --cases faces --watchdog 120 \
    --csv "$out/datatype-noipc.csv"
  r=$?
  [ "$rc" -eq 0 ] && rc=$r
fi
exit "$rc"
