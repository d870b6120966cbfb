#!/bin/sh
# bench/contention, tiny, on 2 ranks: where no CUDA device is (CI), it says "no CUDA device"
# and exits 77, and its measuring cases skip by that name; on a GPU, every pairing of task 0
# (mpiacc, mpiacc-stream, staged, pipeline) and task 1 (six kinds of local work) has a CSV
# row whose message arrived intact, the verdict lines are printed and written, and a run with
# MPIACC_IPC=0 labels MPI-ACC's rows -noipc. A bad option gets one message and the usage,
# GPU or not. The GPU machine runs the real size (4 MiB, 100 iterations). TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..5"
prog=$top_builddir/bench/contention
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-contention.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# A 64 KiB message in 16 KiB chunks (the hand pipeline has four), 4 units of work an iteration.
tiny="--size 64K --chunk 16K --iters 3 --local-iters 3 --rounds 1 --array-bytes 1M --units 4"
# shellcheck disable=SC2086 # $tiny is a list of options
run() { (cd "$tmp" && timeout -k 10 120 "$MPIEXEC" -n 2 "$prog" $tiny "$@" 2>&1); }

n=0
ok() { n=$((n + 1)); echo "ok $n - $1${2:+ # $2}"; }
not_ok() { # NAME WHY OUTPUT
  n=$((n + 1))
  echo "not ok $n - $1"
  echo "# $2"
  printf '%s\n' "$3" | tail -n 15 | sed 's/^/# /'
}

skip=""
[ -x "$prog" ] || skip="not built (CUDA kernels are not configured)"

name=contention_without_a_cuda_device_says_so_and_exits_77
rc=0
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  mkdir -p "$tmp/out"
  out=$(run --csv "$tmp/out/")
  rc=$?
  if [ $rc -eq 77 ]; then
    if printf '%s\n' "$out" | grep -q '^contention: rank [01]: no CUDA device (cudaGetDeviceCount: '; then
      ok "$name"
    else
      not_ok "$name" "exit 77 without the message" "$out"
    fi
    skip="no CUDA device"
  elif [ $rc -eq 0 ]; then
    ok "$name" "SKIP a CUDA device is present"
  else
    not_ok "$name" "exit $rc" "$out"
    skip="the run failed (exit $rc)"
  fi
fi

name=contention_every_pairing_has_a_row_and_its_messages_arrived_intact
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  csv=$(ls "$tmp"/out/contention-*.csv 2>/dev/null | head -n 1)
  why=""
  [ -n "$csv" ] || why="no CSV in the folder given"
  header=config,local,size,iters,local_iters,units,t0_alone_us,t0_together_us,task0_slowdown_pct
  [ -z "$why" ] && ! grep -qx "$header,t1_alone_us,t1_together_us,task1_slowdown_pct,status" "$csv" && why="no CSV header"
  for c in mpiacc mpiacc-stream staged pipeline; do
    for l in compute global shared d2h h2d compute-legacy; do
      [ -z "$why" ] && ! grep -Eq "^$c,$l,65536,3,3,4(,-?[0-9.]+){6},ok\$" "$csv" && why="no ok row for $c beside $l"
    done
  done
  [ -z "$why" ] && ! grep -qx '# verify: 0 mismatched bytes, 0 failed checks' "$csv" && why="no clean verify line"
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
fi

name=contention_prints_and_writes_a_verdict_per_goal
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  why=""
  for goal in "global: task 0 slowed" "compute: task 0 slowed" "shared: task 0 slowed" "d2h: the copy loop slowed" \
    "h2d: the copy loop slowed"; do
    [ -z "$why" ] && ! printf '%s\n' "$out" | grep -Eq "^verdict: (PASS|MISS) mpiacc beside $goal " &&
      why="no verdict line for $goal"
    [ -z "$why" ] && ! grep -Eq "^# summary: verdict: (PASS|MISS) mpiacc beside $goal " "$csv" &&
      why="no verdict for $goal in the CSV"
  done
  [ -z "$why" ] && ! printf '%s\n' "$out" | grep -Eq '^verdicts: [0-9]+ PASS, [0-9]+ MISS$' && why="no verdict count"
  [ -z "$why" ] && ! printf '%s\n' "$out" | grep -q '^info: beside compute-legacy ' && why="no legacy-stream line"
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
fi

name=contention_with_mpiacc_ipc_off_labels_the_mpiacc_rows_noipc
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  mkdir -p "$tmp/noipc"
  out=$(MPIACC_IPC=0 run --configs mpiacc,mpiacc-stream,staged --locals d2h --csv "$tmp/noipc/")
  rc=$?
  csv=$(ls "$tmp"/noipc/contention-*.csv 2>/dev/null | head -n 1)
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  for c in mpiacc-noipc mpiacc-stream-noipc staged; do
    [ -z "$why" ] && ! grep -Eq "^$c,d2h,65536,3,3,4(,-?[0-9.]+){6},ok\$" "$csv" && why="no ok row for $c"
  done
  [ -z "$why" ] && ! grep -qx '# verify: 0 mismatched bytes, 0 failed checks' "$csv" && why="no clean verify line"
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
fi

name=contention_names_a_bad_option_once_and_prints_its_usage
if [ ! -x "$prog" ]; then
  ok "$name" "SKIP not built (CUDA kernels are not configured)"
else
  out=$(run --locals compute,stream0)
  rc=$?
  if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c '^contention: bad option --locals compute,stream0$')" = 1 ] &&
    printf '%s\n' "$out" | grep -q '^usage: mpiexec -n 2 contention '; then
    ok "$name"
  else
    not_ok "$name" "exit $rc" "$out"
  fi
fi
