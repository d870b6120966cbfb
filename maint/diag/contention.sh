#!/usr/bin/env bash
# maint/diag/contention.sh OUTDIR: bench/contention at its full size (4 MiB, 100 iterations
# each task, CONTENTION_ROUNDS rounds, default 3), MPI-ACC's IPC path and then its pipeline
# (MPIACC_IPC=0) in a second process; on a machine with one GPU, both again under an MPS
# daemon of this run's own (two processes otherwise time-slice the GPU, and every pairing
# then measures context switches). The CSVs go to OUTDIR/contention.csv, -noipc.csv,
# -mps.csv and -mps-noipc.csv, every run's table and verdicts to OUTDIR/contention.txt.
# Run through maint/gpu-check (which builds the tree and exports MPIEXEC):
#   GPU_CHECK_SCRIPT=maint/diag/contention.sh bash maint/gpu-check
# CONTENTION_ARGS: more options for every run (`--local-ranks 1`, `--locals d2h,h2d`);
# CONTENTION_MPS=0 leaves the MPS runs out. About 15 s a run on one H100.
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log contention "CONTENTION_ARGS='${CONTENTION_ARGS:-}' CONTENTION_ROUNDS=${CONTENTION_ROUNDS:-3}"
rc=0

# run NAME [ENV=VALUE...]: one process pair, its CSV as OUTDIR/NAME.csv.
run() {
  local name=$1
  shift
  echo "== $name: $*"
  # shellcheck disable=SC2086 # CONTENTION_ARGS: options, split on purpose
  env "$@" timeout -k 10 200 "$MPIEXEC" -n 2 bench/contention --rounds "${CONTENTION_ROUNDS:-3}" \
    ${CONTENTION_ARGS:-} --watchdog 60 --csv "$out/$name.csv"
  local r=$?
  [ "$rc" -eq 0 ] && rc=$r
}

run contention MPIACC_IPC=1
run contention-noipc MPIACC_IPC=0

ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${CONTENTION_MPS:-1}" = 0 ]; then
  echo "== MPS runs left out (CONTENTION_MPS=0)"
elif [ "$ngpus" != 1 ]; then
  echo "== MPS runs left out: $ngpus GPUs, each rank has its own"
elif ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  echo "== MPS runs left out: nvidia-cuda-mps-control not found"
else
  # A pipe folder of this run's own: only these processes are told of the daemon, which
  # is told to quit right after; MPS changes no setting of the GPU.
  pipe=$(mktemp -d /tmp/contention-mps.XXXXXX)
  mkdir -p "$pipe/log"
  if CUDA_MPS_PIPE_DIRECTORY=$pipe CUDA_MPS_LOG_DIRECTORY=$pipe/log nvidia-cuda-mps-control -d; then
    sleep 1
    run contention-mps MPIACC_IPC=1 CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$pipe/log"
    run contention-mps-noipc MPIACC_IPC=0 CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$pipe/log"
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe nvidia-cuda-mps-control
  else
    echo "== the MPS control daemon did not start"
    rc=1
  fi
  rm -rf "$pipe"
fi
exit "$rc"
