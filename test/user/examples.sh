#!/bin/sh
# The example programs, run as their comments say: each must print its OK line. One that
# cannot run here (no device of its kind: exit 77) or was not built (its kind not
# configured) skips by name. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..3"
n=0
example() { # NAME RANKS OK-LINE-REGEX
  n=$((n + 1))
  prog="$top_builddir/examples/$1"
  name="example_$1_runs_and_checks_its_data"
  if [ ! -x "$prog" ]; then
    echo "ok $n - $name # SKIP not built (its device kind is not configured)"
    return
  fi
  out=$(timeout -k 10 120 "$MPIEXEC" -n "$2" "$prog" 2>&1)
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "ok $n - $name # SKIP $(printf '%s\n' "$out" | sed -n "s/^$1: \(.*\); nothing to show$/\1/p" | head -n 1)"
  elif [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -Eqx "$3"; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name"
    echo "# exit $rc"
    printf '%s\n' "$out" | tail -n 15 | sed 's/^/# /'
  fi
}
example attr_send 2 'attr_send: host -> (opencl|host) 1048576 bytes OK'
example opencl_pipeline 2 'opencl_pipeline: 8 messages of 1048576 bytes OK'
example cuda_halo_stream 2 'cuda_halo_stream: 2 ranks, 10 steps OK'
