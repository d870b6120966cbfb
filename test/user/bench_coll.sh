#!/bin/sh
# bench/coll, quick and tiny, on 2 ranks: host buffers and OpenCL (PoCL in CI; the kind is
# left out, named, where no OpenCL platform is found). Every collective's host, staged and
# mpiacc rows validate, the OpenCL mpiacc rows with their ratio to staging; the run is made
# with --require-mpiacc, so a refused collective fails it; a bad option gets one message
# and the usage. The GPU machine runs the real sweep (maint/gpu-check). TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..3"
prog=$top_builddir/bench/coll
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-coll.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
ops="allreduce reduce bcast allgather alltoall reduce_scatter"
sizes="8 4096 65536"
# --label '': rows read mpiacc even where MPIACC_IPC=0 is set.
run() { timeout -k 10 120 "$MPIEXEC" -n 2 "$prog" --quick --min-time 0.002 --iters 20 --label '' "$@"; }

# Which kinds to run: OpenCL where it is built and a platform with a device answers.
kinds=host
cl_note="OpenCL not built"
if "$prog" --help 2>/dev/null | grep -q '^  kinds built: .*opencl'; then
  out=$(cd "$tmp" && run --kinds opencl --ops bcast --sizes 8 --configs host --csv "$tmp/probe.csv" 2>&1)
  if [ $? -eq 0 ]; then
    kinds=host,opencl
    cl_note=""
  else
    cl_note="no OpenCL device: $(printf '%s\n' "$out" | grep -m 1 'opencl:' | sed 's/^coll: rank [0-9]*: //')"
  fi
fi

# rows CSV KIND CONFIG STATUS: how many rows of that kind and configuration have the status,
# each with a time and both bandwidths when the status is ok.
rows() {
  if [ "$4" = ok ]; then
    grep -Ec "^[a-z_]+,$2,$3,2,[0-9]+,[0-9.]+,[0-9.e+-]+,[0-9.e+-]+,[0-9.]*,ok\$" "$1"
  else
    grep -Ec "^[a-z_]+,$2,$3,2,[0-9]+,,,,,$4\$" "$1"
  fi
}

mkdir -p "$tmp/out"
out=$(cd "$tmp" && run --kinds "$kinds" --sizes 8,4K,64K --require-mpiacc --csv "$tmp/out/" 2>&1)
rc=$?
csv=$(ls "$tmp"/out/coll-*.csv 2>/dev/null | head -n 1)
want=$(($(echo $ops | wc -w) * $(echo $sizes | wc -w))) # rows per kind and configuration
why=""
[ "$rc" = 0 ] || why="exit $rc"
[ -z "$why" ] && [ -z "$csv" ] && why="no CSV in the folder given"
[ -z "$why" ] && ! grep -qx 'op,kind,config,ranks,size,us,algbw_GBs,busbw_GBs,x_staged,status' "$csv" && why="no CSV header"
[ -z "$why" ] && grep -q 'MISMATCH\|VERIFY FAILED' "$csv" "$tmp"/out/* && why="a mismatch"
[ -z "$why" ] && ! grep -q '^# verify: 0 mismatched floats, 0 failed checks' "$csv" && why="no clean verify line"
for pair in host,host host,mpiacc $([ "$kinds" = host ] || echo opencl,staged opencl,host); do
  [ -z "$why" ] && [ "$(rows "$csv" "${pair%,*}" "${pair#*,}" ok)" != "$want" ] &&
    why="not $want validated rows of $pair"
done
mode=""
if [ -z "$why" ] && [ "$kinds" != host ]; then
  if [ "$(rows "$csv" opencl mpiacc ok)" = "$want" ]; then
    mode="OpenCL mpiacc rows validated"
    [ "$(grep -Ec '^[a-z_]+,opencl,mpiacc,2,[0-9]+,[0-9.]+,[0-9.e+-]+,[0-9.e+-]+,[0-9.]+,ok$' "$csv")" = "$want" ] ||
      why="OpenCL mpiacc rows without x_staged"
  else
    why="not $want validated rows of opencl,mpiacc"
  fi
fi
if [ -z "$why" ]; then
  echo "ok 1 - coll_validates_every_collective_on_host_and_opencl_buffers # ${mode:-host only}${cl_note:+; $cl_note}"
else
  echo "not ok 1 - coll_validates_every_collective_on_host_and_opencl_buffers"
  echo "# $why"
  printf '%s\n' "$out" | tail -n 15 | sed 's/^/# /'
fi

# --require-mpiacc: a run with refused rows fails, one without passes.
name=coll_require_mpiacc_fails_the_run_exactly_when_mpiacc_is_refused
if [ "$kinds" = host ]; then
  echo "ok 2 - $name # SKIP ${cl_note}"
else
  out=$(cd "$tmp" && run --kinds opencl --ops allreduce --sizes 8 --configs mpiacc --require-mpiacc \
    --csv "$tmp/require.csv" 2>&1)
  rc=$?
  if grep -q ',refused$' "$tmp/require.csv" 2>/dev/null; then expect=1; else expect=0; fi
  if [ "$rc" = "$expect" ] && grep -q '^allreduce,opencl,mpiacc,2,8,' "$tmp/require.csv"; then
    echo "ok 2 - $name # exit $rc"
  else
    echo "not ok 2 - $name"
    echo "# exit $rc, expected $expect"
    printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
  fi
fi

mkdir -p "$tmp/bad"
out=$(cd "$tmp/bad" && timeout -k 10 60 "$MPIEXEC" -n 2 "$prog" --sizes 0 2>&1)
rc=$?
if [ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | grep -c 'bad option --sizes 0')" = 1 ] &&
  printf '%s\n' "$out" | grep -q '^usage: mpiexec -n N coll' && [ -z "$(ls "$tmp/bad")" ]; then
  echo "ok 3 - coll_names_a_bad_option_once_and_prints_its_usage"
else
  echo "not ok 3 - coll_names_a_bad_option_once_and_prints_its_usage"
  echo "# exit $rc"
  printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
fi
