#!/usr/bin/env bash
# maint/diag/knob-ab.sh OUTDIR: one build of MPI-ACC under several knob settings, in
# interleaved rounds, with the hand anchors (staging by hand, the 256 KiB hand pipeline)
# measured in the same process as each setting. The GPU machines differ from one call
# to the next by more than most knobs move a benchmark, so settings are only compared
# within a call, and round by round.
# Run through maint/gpu-check (which builds the tree and exports MPIEXEC):
#   KNOB_VARIANTS='default|MPIACC_CHUNK_SIZE=1M|MPIACC_PIPELINE_TRANSFERS=4' \
#     GPU_CHECK_SCRIPT=maint/diag/knob-ab.sh bash maint/gpu-check
# KNOB_VARIANTS: settings separated by '|'; each is `default` or VAR=VALUE words that go
#   to env(1) (several words set several knobs at once).
# KNOB_SIZES (default 262144,524288,1048576,2097152,4194304; `all` = the bench's own sweep,
# as gpu-check runs it), KNOB_DIRS (H->D), KNOB_BENCH_ARGS (more bench options: gpu-check's
# `--iters 100 --bw-iters 10 --min-iters 2 --min-time 0.01` measures as its pt2pt phases do),
# KNOB_ROUNDS (3), KNOB_ENV (words for every setting, default MPIACC_IPC=0: the pipeline),
# KNOB_BENCH (bench/pt2pt), KNOB_CONFIGS (mpiacc,staged,pipeline; add mpich-host for
# MPICH host-to-host, the pipeline's bar from 4 MiB; the bench measures it
# only in direction H->H, which is then added to KNOB_DIRS).
# Prints each round's rows as `label round config,direction,size,lat_us,bw_GBs`, then for
# each setting and size the median over rounds of MPI-ACC's bandwidth over the best hand
# anchor of the same process (above 1: MPI-ACC is ahead), and over MPICH's where measured.
set -uo pipefail
# shellcheck disable=SC2034 # diag-log.sh writes under it
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log knob-ab "KNOB_VARIANTS='${KNOB_VARIANTS:-default}' KNOB_ENV='${KNOB_ENV-MPIACC_IPC=0}'"
sizes=${KNOB_SIZES:-262144,524288,1048576,2097152,4194304}
size_args=(--sizes "$sizes")
[ "$sizes" = all ] && size_args=()
dirs=${KNOB_DIRS:-H->D}
configs=${KNOB_CONFIGS:-mpiacc,staged,pipeline}
# Without H->H the bench runs no mpich-host row, and the MPICH ratio would be silently absent.
[[ ,$configs, == *,mpich-host,* && ,$dirs, != *,H-\>H,* ]] && dirs+=",H->H"
bench=${KNOB_BENCH:-bench/pt2pt}
rows=$(mktemp)
IFS='|' read -r -a variants <<<"${KNOB_VARIANTS:-default}"
for round in $(seq 1 "${KNOB_ROUNDS:-3}"); do
  for v in "${variants[@]}"; do
    settings=${v//default/}
    echo "== round $round: ${v}"
    # shellcheck disable=SC2086 # settings and KNOB_ENV are lists of words for env(1)
    env ${KNOB_ENV-MPIACC_IPC=0} $settings timeout 150 $MPIEXEC -n 2 "$bench" ${KNOB_BENCH_ARGS:-} --watchdog 20 --rounds 1 \
      "${size_args[@]}" --dirs "$dirs" --configs "$configs" --csv /dev/stdout 2>&1 |
      grep -v '^#' | awk -F, -v label="$v" -v round="$round" 'NF == 5 && $1 != "config" { print label "\t" round "\t" $0 }' | tee -a "$rows"
  done
done
echo "== MPI-ACC bandwidth / best hand anchor of the same run, median over rounds (min-max)"
python3 - "$rows" <<'EOF'
import sys, statistics
from collections import defaultdict
runs = defaultdict(lambda: defaultdict(dict))  # (label, dir, size) -> round -> config -> bw
for line in open(sys.argv[1]):
    label, rnd, row = line.rstrip("\n").split("\t")
    config, direction, size, _, bw = row.split(",")
    runs[(label, direction, int(size))][rnd][config] = float(bw)
for key in sorted(runs, key=lambda k: (k[1], k[2], k[0])):
    if key[1] == "H->H":
        continue  # MPICH's rows: the second ratio of each direction's line
    mpich = runs.get((key[0], "H->H", key[2]), {})
    # Each MPI-ACC configuration of the run (mpiacc, mpiacc-auto, mpiacc-noipc...) its own line.
    mine = sorted({c for r in runs[key].values() for c in r if c.startswith("mpiacc")})
    for config in mine:
        ratios, host = [], []
        for rnd, r in runs[key].items():
            hand = max(r.get("staged", 0), r.get("pipeline", 0))
            if config in r and hand > 0:
                ratios.append(r[config] / hand)
            if config in r and mpich.get(rnd, {}).get("mpich-host", 0) > 0:
                host.append(r[config] / mpich[rnd]["mpich-host"])
        label = key[0] if len(mine) == 1 else f"{key[0]} {config}"
        line = f"{key[1]:5} {key[2]:>9} {label:45}"
        if ratios:
            line += f" {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) n={len(ratios)}"
        if host:
            line += f"  / mpich-host {statistics.median(host):.2f} ({min(host):.2f}-{max(host):.2f})"
        if ratios or host:
            print(line)
EOF
rm -f "$rows"
