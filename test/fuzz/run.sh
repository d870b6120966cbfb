#!/bin/sh
# The flattener's libFuzzer target (test/fuzz/flat_type_fuzz.cc) for a bounded time, from
# a fixed seed: any datatype the input bytes build must pack and unpack as MPICH does.
# A failing input is kept beside the binary (crash-*); run the binary on it to repeat.
# Skips by name where configure found no clang with libFuzzer. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir.
name=flat_type_fuzz_packs_every_built_type_as_mpich_does
echo "1..1"
fuzz="$top_builddir/test/fuzz/flat_type_fuzz"
if [ ! -x "$fuzz" ]; then
  echo "ok 1 - $name # SKIP no clang with libFuzzer (configure's FUZZ_CXX)"
  exit 0
fi
log="$top_builddir/test/fuzz/flat_type_fuzz.out"
# MPICH keeps memory until exit that LeakSanitizer would report.
if ASAN_OPTIONS=detect_leaks=0 "$fuzz" -seed=1 -max_total_time="${MPIACC_FUZZ_SECONDS:-20}" -max_len=512 -timeout=20 \
  -artifact_prefix="$top_builddir/test/fuzz/" >"$log" 2>&1; then
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log")
  echo "ok 1 - $name # ${runs:-?} inputs"
else
  echo "not ok 1 - $name"
  tail -n 30 "$log" | sed 's/^/# /'
fi
