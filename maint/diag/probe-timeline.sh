#!/usr/bin/env bash
# maint/diag/probe-timeline.sh OUTDIR: where a small message's time goes inside the
# library, step by step between the probe points of src/util/probe.h. Builds the tree
# gpu-check built (its working directory) again with CPPFLAGS=-DMPIACC_PROBES, preloads that libmpiacc into
# bench/pt2pt's ranks (latency phase; MPI-ACC and, in the same process, the raw ipc-pull
# anchor for D->D, staging by hand otherwise) and prints maint/diag/probe-report.py's table for each case.
# Run through maint/gpu-check, which builds the tree and exports MPIEXEC, MPICC, MPICXX:
#   GPU_CHECK_SCRIPT=maint/diag/probe-timeline.sh bash maint/gpu-check
# PROBE_CASES (default "D->D:8"): DIR:SIZE[:ENV=VALUE...][:bind=X] items (bind=X: mpiexec
# -bind-to X); PROBE_ROUNDS (default 2), each running every case once.
set -uo pipefail
out=${1:?OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/diag-log.sh"
diag_log probe-timeline "PROBE_CASES=${PROBE_CASES:-D->D:8}"
build=/tmp/mpiacc-probes
# gpu-check's tree (the working directory): the tarball with the working tree's changed
# files put in, as the normal build is; cleaned and configured again with the probes.
rm -rf "$build" && mkdir -p "$build/tree" && cp -a . "$build/tree/" || exit 1
src="$build/tree/"
if ! (cd "$src" && make clean && ./configure --enable-cuda --enable-opencl CPPFLAGS=-DMPIACC_PROBES MPICC="$MPICC" \
  MPICXX="$MPICXX" MPIEXEC="$MPIEXEC" && make -j"$(nproc)" src/accel/cuda/copy_kernel_fatbin.h && make -j"$(nproc)" libmpiacc.la) >"$build/build.log" 2>&1; then
  tail -n 20 "$build/build.log"
  exit 1
fi
lib=$(ls "$src".libs/libmpiacc.so.*.*.* | head -n 1)
# Rounds outside, cases inside: each round runs every case once, so that cases compare
# across the machine's drift between processes.
for r in $(seq 1 "${PROBE_ROUNDS:-2}"); do
  for item in ${PROBE_CASES:-D->D:8}; do
    IFS=: read -r dir size envs <<<"$item"
    bind=()
    envs=${envs//:/ }
    # bind=X in a case's list is not an environment variable: it runs mpiexec -bind-to X.
    if [[ " $envs " == *" bind="* ]]; then
      b=${envs##*bind=}
      b=${b%% *}
      bind=(-bind-to "$b")
      envs=${envs//bind=$b/}
    fi
    echo "== $(date -u +%FT%TZ) $dir $size B $envs ${bind[*]} round $r"
    rm -rf /tmp/probes && mkdir -p /tmp/probes
    configs=mpiacc,staged
    [ "$dir" = 'D->D' ] && configs=mpiacc,ipc-pull
    timeout 60 $MPIEXEC "${bind[@]}" -n 2 env $envs MPIACC_PROBE_DIR=/tmp/probes LD_PRELOAD="$lib" \
      bench/.libs/pt2pt --rounds 1 --watchdog 20 --iters 2000 --bw-iters 2 --sizes "$size" --dirs "$dir" \
      --configs "$configs" --csv /dev/stdout 2>&1 | grep -v '^#' | grep ','
    python3 "$diag/probe-report.py" /tmp/probes --skip 2000
  done
done
echo "== done $(date -u +%FT%TZ)"
