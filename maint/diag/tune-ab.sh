#!/usr/bin/env bash
# maint/diag/tune-ab.sh OUTDIR: mpiacc-tune on this machine, then bench/pt2pt with the
# profile it wrote against the built-in defaults, in the interleaved rounds of knob-ab.sh
# (same build, same call, anchors in the same process as each setting). The tuned profile
# should do at least as well as the defaults at every size.
# Run through maint/gpu-check (which builds the tree and exports MPIEXEC):
#   GPU_CHECK_SCRIPT=maint/diag/tune-ab.sh bash maint/gpu-check
# TUNE_ARGS: mpiacc-tune's options (default --max-size 64M); the KNOB_* variables go to
# knob-ab.sh (defaults here: KNOB_SIZES=all, KNOB_DIRS=D->D,H->D,D->H, KNOB_ENV
# MPIACC_IPC=0: the pipeline, which the profile tunes; KNOB_ENV= for IPC on).
set -uo pipefail
out=${1:?OUTDIR}
profile=$out/mpiacc-profile.txt
# shellcheck disable=SC2086 # TUNE_ARGS is a list of words
if ! timeout 120 $MPIEXEC -n 2 ./mpiacc-tune ${TUNE_ARGS:---max-size 64M} --output "$profile"; then
  echo "tune-ab: mpiacc-tune failed" >&2
  exit 1
fi
KNOB_VARIANTS="default|MPIACC_PROFILE=$profile" KNOB_SIZES=${KNOB_SIZES:-all} KNOB_DIRS=${KNOB_DIRS:-D->D,H->D,D->H} \
  exec bash "$(dirname "$0")/knob-ab.sh" "$out"
