#!/bin/sh
# bench/datatype away from a GPU: it says that no CUDA device is usable and exits 1 without
# writing a CSV, and a bad option gets one message and the usage (exit 2). The benchmark
# itself runs on the GPU machine (maint/gpu-check). TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..2"
prog=$top_builddir/bench/datatype
if [ ! -x "$prog" ]; then
  echo "ok 1 - datatype_without_a_gpu_says_so_and_writes_no_csv # SKIP bench/datatype not built (needs nvcc)"
  echo "ok 2 - datatype_names_a_bad_option_once_and_prints_its_usage # SKIP bench/datatype not built (needs nvcc)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-datatype.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# An empty CUDA_VISIBLE_DEVICES hides every device, on the GPU machine too.
out=$(cd "$tmp" && CUDA_VISIBLE_DEVICES= timeout -k 10 60 "$MPIEXEC" -n 2 "$prog" --quick 2>&1)
rc=$?
if [ "$rc" = 1 ] && printf '%s\n' "$out" | grep -q 'rank 0: no usable CUDA device' && [ -z "$(ls "$tmp")" ]; then
  echo "ok 1 - datatype_without_a_gpu_says_so_and_writes_no_csv"
else
  echo "not ok 1 - datatype_without_a_gpu_says_so_and_writes_no_csv"
  echo "# exit $rc; files: $(ls "$tmp" | tr '\n' ' ')"
  printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
fi
out=$(cd "$tmp" && timeout -k 10 60 "$MPIEXEC" -n 2 "$prog" --sizes 100 2>&1)
rc=$?
if [ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | grep -c 'bad option --sizes 100')" = 1 ] &&
  printf '%s\n' "$out" | grep -q '^usage: mpiexec -n 2 datatype' && [ -z "$(ls "$tmp")" ]; then
  echo "ok 2 - datatype_names_a_bad_option_once_and_prints_its_usage"
else
  echo "not ok 2 - datatype_names_a_bad_option_once_and_prints_its_usage"
  echo "# exit $rc"
  printf '%s\n' "$out" | tail -n 5 | sed 's/^/# /'
fi
