#!/bin/sh
# bench/host_overhead, as a user runs it: its CSV lands in the current directory (or the
# folder --csv names), never in the source tree's bench/results (the reference runs),
# and its budget line says how much run-to-run spread it measured. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPIEXEC.
echo "1..2"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
before=$(ls "$top_srcdir/bench/results" "$top_builddir/bench/results" 2>/dev/null | sort)
run() { timeout -k 10 120 "$MPIEXEC" -n 2 "$top_builddir/bench/host_overhead" --iters 20 --rounds 4 --max-size 64 "$@"; }
mkdir -p "$tmp/cwd"
out=$(cd "$tmp/cwd" && run --budget-lat 50 2>&1)
after=$(ls "$top_srcdir/bench/results" "$top_builddir/bench/results" 2>/dev/null | sort)
if [ "$(ls "$tmp/cwd"/host_overhead-*.csv 2>/dev/null | wc -l)" = 1 ] && [ "$before" = "$after" ] &&
  printf '%s\n' "$out" | grep -q '^budget lat 50.0% .*spread'; then
  echo "ok 1 - host_overhead_writes_its_csv_into_the_current_directory_and_names_the_spread"
else
  echo "not ok 1 - host_overhead_writes_its_csv_into_the_current_directory_and_names_the_spread"
  ls "$tmp/cwd" | sed 's/^/# cwd: /'
  printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
fi
out=$(cd "$tmp/cwd" && run --csv "$tmp/folder/" 2>&1)
if [ "$(ls "$tmp/folder"/host_overhead-*.csv 2>/dev/null | wc -l)" = 1 ]; then
  echo "ok 2 - host_overhead_writes_its_csv_into_the_folder_given"
else
  echo "not ok 2 - host_overhead_writes_its_csv_into_the_folder_given"
  printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
fi
