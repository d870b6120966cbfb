#!/usr/bin/env bash
# maint/diag/coll.sh OUTDIR: bench/coll's whole sweep (8 B to 256 MiB, three rounds) on 2
# and then 4 ranks, CUDA and then OpenCL (the NVIDIA platform where its ICD is registered),
# each its own process; NCCL in processes of its own where every rank has a GPU (else the
# CUDA process skips it and says why). The CSVs are joined into OUTDIR/coll.csv, each
# program's output and summary go to OUTDIR/coll.txt. Run through maint/gpu-check (which
# builds the tree and exports MPIEXEC):
#   GPU_CHECK_SCRIPT=maint/diag/coll.sh bash maint/gpu-check
# COLL_RANKS: rank counts (default "2 4"); COLL_ARGS: more options for every run (`--ops
# allreduce,bcast`, `--max-size 64M`, `--require-mpiacc` once device collectives land).
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log coll "COLL_RANKS='${COLL_RANKS:-2 4}' COLL_ARGS='${COLL_ARGS:-}'"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
clp=""
[ -f /etc/OpenCL/vendors/nvidia.icd ] && clp=MPIACC_OPENCL_PLATFORM=NVIDIA
work=$(mktemp -d /tmp/mpiacc-coll.XXXXXX) || exit 1
rc=0
run() { # csv-name env-and-command...
  local name=$1 r
  shift
  # shellcheck disable=SC2086 # COLL_ARGS: options, split on purpose
  env "$@" --rounds 3 --watchdog 120 ${COLL_ARGS:-} --csv "$work/$name.csv" </dev/null
  r=$?
  echo "== $name: exit $r"
  [ "$rc" -eq 0 ] && rc=$r
}
for n in ${COLL_RANKS:-2 4}; do
  nccl=,nccl
  [ "$ngpus" -ge "$n" ] && nccl=""
  run "$n-cuda" "$MPIEXEC" -n "$n" bench/coll --kinds cuda --configs "mpiacc,staged,host$nccl"
  [ -z "$nccl" ] && run "$n-nccl" "$MPIEXEC" -n "$n" bench/coll --kinds cuda --configs nccl
  run "$n-opencl" $clp "$MPIEXEC" -n "$n" bench/coll --kinds opencl
done
# One header, then every run's rows and comments (each run begins with its "# coll" line).
header=""
: >"$out/coll.csv"
for f in "$work"/*.csv; do
  [ -f "$f" ] || continue
  if [ -z "$header" ]; then
    header=$(grep -m 1 -v '^#' "$f")
    cat "$f" >>"$out/coll.csv"
  else
    grep -v -x -F -e "$header" "$f" >>"$out/coll.csv"
  fi
done
rm -rf "$work"
exit "$rc"
