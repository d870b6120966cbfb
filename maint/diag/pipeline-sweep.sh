#!/usr/bin/env bash
# maint/diag/pipeline-sweep.sh OUTDIR: the CUDA pipeline (MPIACC_IPC=0, the path between
# nodes) at each staging chunk size and depth, with MPICH's host-to-host and the manual
# 256 KiB pipeline measured beside it in the same process, interleaved over rounds.
# Why: issue 4 asks this path for >= 90% of MPICH host-to-host from 4 MiB and never less
# than manual staging. Session 20's run 2 had D->D at 0.77 / 0.66 of the 256 KiB manual
# pipeline (16 / 64 MiB), and MPICH alone on the development machine moved 16 MiB at
# 10-12.6 GB/s through a ring of 2-8 MiB but 4-5.6 through one of 32 MiB, whatever the
# message size: the staging ring (depth x chunk, on each side) may matter more than the
# chunk. Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/pipeline-sweep.sh.
# SWEEP_CHUNKS (default "512K 1M 2M"), SWEEP_DEPTHS ("2 4"), SWEEP_ROUNDS (3).
set -uo pipefail
out=${1:?OUTDIR}
rounds=${SWEEP_ROUNDS:-3}
csv=$out/pipeline-sweep.csv
: >"$csv"
for round in $(seq 1 "$rounds"); do
  for chunk in ${SWEEP_CHUNKS:-512K 1M 2M}; do
    for depth in ${SWEEP_DEPTHS:-2 4}; do
      label=c$chunk-d$depth
      echo "=== round $round $label"
      env MPIACC_IPC=0 MPIACC_CHUNK_SIZE=$chunk MPIACC_PIPELINE_DEPTH=$depth timeout 120 \
        $MPIEXEC -n 2 bench/pt2pt --rounds 1 --watchdog 20 --sizes 4M,16M,64M \
        --dirs D-\>D,D-\>H,H-\>D,H-\>H --configs mpich-host,pipeline,mpiacc --label "$label" \
        --csv "$out/sweep-$round-$label.csv" >/dev/null
      grep -v '^#' "$out/sweep-$round-$label.csv" | sed "s/^/$round,$label,/" >>"$csv"
      rm -f "$out/sweep-$round-$label.csv"
    done
  done
done
echo "=== medians over $rounds rounds: bandwidth GB/s; mpich-host and pipeline are the anchors of each process"
/usr/bin/python3 - "$csv" <<'PY'
import csv, statistics, sys
head, data = None, {}
for r in csv.reader(open(sys.argv[1])):
    if r[2] == 'config':
        head = r[2:]
        continue
    rec = dict(zip(head, r[2:]))
    base = rec['config'].split('-c')[0]  # mpich-host, pipeline or mpiacc, label dropped
    data.setdefault((r[1], base, rec['direction'], int(rec['size'])), []).append(float(rec['bw_GBs']))
labels = sorted({k[0] for k in data})
for d in ('D->D', 'D->H', 'H->D'):
    print(f'-- {d}: per setting, mpiacc / mpich-host / pipeline (GB/s), then mpiacc over each anchor')
    for size in sorted({k[3] for k in data}):
        for lab in labels:
            v = {b: data.get((lab, b, 'H->H' if b == 'mpich-host' else d, size))
                 for b in ('mpiacc', 'mpich-host', 'pipeline')}
            if not all(v.values()):
                continue
            m = {b: statistics.median(x) for b, x in v.items()}
            print(f'{size:>9} {lab:<12} {m["mpiacc"]:7.2f} {m["mpich-host"]:7.2f} {m["pipeline"]:7.2f}'
                  f'   x{m["mpiacc"] / m["mpich-host"]:.2f} host  x{m["mpiacc"] / m["pipeline"]:.2f} pipeline')
PY
