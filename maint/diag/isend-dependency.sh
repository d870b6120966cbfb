#!/usr/bin/env bash
# maint/diag/isend-dependency.sh OUTDIR: what an MPI_Isend with a pending stream or event
# spends its time on, by message size, under maint/diag/p2p-timeline.
# test/gpu/cuda_stream's case 2 (issue 4: such a call returns in under 50 us) read the
# fastest of five 64 MiB calls at 14-58 us on two H200s in session 25, 4 KiB at 4.5-11
# us: something in the call grows with the size or the kernel queued before it. This runs
# cuda_stream (IPC on) with every MPI_Isend recorded and prints, for rank 0's calls of 10
# us or more, each CUDA and PMPI call inside them.
# Run through maint/gpu-check: GPU_CHECK_SCRIPT=maint/diag/isend-dependency.sh.
set -uo pipefail
out=${1:?OUTDIR}
source "$(dirname "$0")/diag-log.sh"
diag_log isend-dependency
timeline_shim || exit 1
rm -rf /tmp/tl-isend && mkdir -p /tmp/tl-isend
TIMELINE_TOPS=MPI_Isend TIMELINE_SKIP=0 TIMELINE_CALLS=100000 TIMELINE_DIR=/tmp/tl-isend timeout 120 \
  $MPIEXEC -n 2 env LD_PRELOAD=/tmp/p2p-timeline.so test/gpu/cuda_stream 2>&1 | grep -E '^(not )?ok|pending|^#.*us'
python3 - "$diag/p2p-timeline.py" /tmp/tl-isend/timeline.0.tsv <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tl", sys.argv[1])
tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
calls = tl.load(sys.argv[2])
# Every call in order, one line each (the test's timed ones are the largest of each group
# of trials): its length, the time inside wrapped calls, the longest of those, and any
# involuntary context switch; then the calls of 10 us or more in full.
print("seq   us      inside  longest inner call")
for seq, c in calls.items():
    dur = c["end"] - c["start"]
    inner = [e for e in c["events"] if e[2] != "involuntary_ctxsw"]
    inside = sum(e[1] for e in inner)
    top = max(inner, key=lambda e: e[1]) if inner else None
    sw = sum(e[3] for e in c["events"] if e[2] == "involuntary_ctxsw")
    print(f"{seq:4d} {dur:7.1f} {inside:7.1f}  " + (f"{top[2]} {top[1]:.1f}" if top else "-") +
          (f"  ctxsw {sw}" if sw else ""))
for seq, c in calls.items():
    dur = c["end"] - c["start"]
    if dur < 10:
        continue
    print(f"MPI_Isend seq {seq}: {dur:.1f} us")
    for start, d, name, aux in c["events"]:
        print(f"    {start - c['start']:8.2f} +{d:7.2f}  {name}{'' if aux == 0 else f' -> {aux}'}")
PY
