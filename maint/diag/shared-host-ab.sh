#!/usr/bin/env bash
# maint/diag/shared-host-ab.sh OUTDIR: cl_mem <-> host bandwidth on the NVIDIA platform,
# SHARED mode (a host receiver's CPU copies out of the sender's shared slot; a host
# sender's CPU copies into a shared slot of its own, which the receiver's device reads)
# against the pipeline (each chunk through MPICH, CMA on one host), with MPICH's host-to-host and
# manual staging beside each, interleaved over rounds so that drift hits both alike.
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/shared-host-ab.sh.
set -uo pipefail
out=${1:?OUTDIR}
rounds=${AB_ROUNDS:-3}
csv=$out/shared-host-ab.csv
: >"$csv"
for round in $(seq 1 "$rounds"); do
  for shared in 1 0; do
    label=shm$shared
    echo "=== round $round MPIACC_SHARED_STAGING=$shared"
    env MPIACC_OPENCL_PLATFORM=${AB_PLATFORM:-NVIDIA} MPIACC_SHARED_STAGING=$shared timeout 120 \
      $MPIEXEC -n 2 bench/pt2pt_opencl --iters 40 --bw-iters 7 --min-iters 2 --min-time 0.01 --rounds 1 \
      --watchdog 20 --min-size 256K --max-size 64M --dirs H-\>H,D-\>H,H-\>D --configs mpich-host,staged,mpiacc \
      --label "$label" --csv "$out/ab-$round-$shared.csv"
    grep -v '^#' "$out/ab-$round-$shared.csv" | sed "s/^/$round,$shared,/" >>"$csv"
    rm -f "$out/ab-$round-$shared.csv"
  done
done
echo "=== medians over $rounds rounds: bandwidth GB/s (columns: size, then config/shared)"
/usr/bin/python3 - "$csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
head = None
data = {}
for r in rows:
    if r[2] == 'config':
        head = r[2:]
        continue
    rec = dict(zip(head, r[2:]))
    key = (rec['config'], rec['direction'], r[1], int(rec['size']))
    data.setdefault(key, []).append(float(rec['bw_GBs']))
configs = sorted({(k[0], k[1], k[2]) for k in data})
sizes = sorted({k[3] for k in data})
print('size      ' + ' '.join(f'{c}/{d}/shm{s}'[:24].rjust(24) for c, d, s in configs))
for size in sizes:
    cells = []
    for c, d, s in configs:
        v = data.get((c, d, s, size))
        cells.append(f'{statistics.median(v):24.2f}' if v else ' ' * 24)
    print(f'{size:<9} ' + ' '.join(cells))
EOF
