#!/bin/sh
# apps/stencil2d on PoCL, small and quick: both variants in one run, each checked against the
# serial reference, on process grids 1x1, 1x2, 2x1 and 2x2 (uneven tiles: 37 x 29 cells);
# def and mpi-acc give the same grid bit for bit; the CSV has a row per variant; the mpi-acc
# main loop calls no clEnqueueRead or clEnqueueWrite; a bad option gets one message and the
# usage. Without OpenCL built, or without a platform (exit 77), the cases skip by name.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPIEXEC.
echo "1..8"
prog=$top_builddir/apps/stencil2d/stencil2d
: "${MPIACC_OPENCL_PLATFORM=Portable}"
export MPIACC_OPENCL_PLATFORM
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-stencil2d.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
skip=""
[ -x "$prog" ] || skip="not built (OpenCL is not configured)"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1${2:+ # $2}"; }
not_ok() { # NAME WHY OUTPUT
  n=$((n + 1))
  echo "not ok $n - $1"
  echo "# $2"
  printf '%s\n' "$3" | tail -n 10 | sed 's/^/# /'
}

# grid RANKS PGRID [OPTIONS]: both variants checked; the output goes to $tmp/PGRID.out.
grid() {
  name="stencil2d_def_and_mpi_acc_match_the_serial_reference_on_a_$2_process_grid"
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
    return
  fi
  ranks=$1 pgrid=$2
  shift 2
  out=$(cd "$tmp" && timeout -k 10 120 "$MPIEXEC" -n "$ranks" "$prog" --rows 37 --cols 29 --iters 6 --pgrid "$pgrid" \
    --check "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" >"$tmp/$pgrid.out"
  if [ $rc -eq 77 ]; then
    skip=$(printf '%s\n' "$out" | sed -n 's/^stencil2d: \(.*\); nothing to show$/\1/p' | head -n 1)
    ok "$name" "SKIP ${skip:=no OpenCL platform}"
    return
  fi
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  for v in def mpi-acc; do
    [ -z "$why" ] && ! printf '%s\n' "$out" | grep -Eq "^stencil2d: $v, $ranks ranks \\($pgrid\\), 37x29 floats, 6 iters: .* check OK: max abs diff" &&
      why="no 'check OK' line for $v"
  done
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
}

grid 1 1x1
grid 2 1x2
grid 2 2x1 --csv "$tmp/csv/"
grid 4 2x2

name=stencil2d_def_and_mpi_acc_give_the_same_grid_bit_for_bit
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  hashes=$(sed -n 's/^stencil2d: \(def\|mpi-acc\), 4 ranks.*grid fnv1a \(0x[0-9a-f]*\)$/\2/p' "$tmp/2x2.out")
  if [ "$(printf '%s\n' "$hashes" | wc -l)" = 2 ] && [ "$(printf '%s\n' "$hashes" | sort -u | wc -l)" = 1 ]; then
    ok "$name" "2x2, $(printf '%s\n' "$hashes" | head -n 1)"
  else
    not_ok "$name" "hashes: $(echo $hashes)" "$(cat "$tmp/2x2.out")"
  fi
fi

name=stencil2d_csv_has_a_row_of_times_per_variant
if [ -n "$skip" ]; then
  ok "$name" "SKIP $skip"
else
  csv=$(ls "$tmp"/csv/stencil2d-*.csv 2>/dev/null | head -n 1)
  why=""
  [ -n "$csv" ] || why="no CSV in the folder given"
  [ -z "$why" ] && ! grep -qx 'variant,precision,ranks,pgrid,rows,cols,iters,compute_us,comm_us,total_us,check,max_abs_diff' \
    "$csv" && why="no CSV header"
  for v in def mpi-acc; do
    [ -z "$why" ] && ! grep -Eq "^$v,float,2,2x1,37,29,6,[0-9.]+,[0-9.]+,[0-9.]+,ok,0\$" "$csv" && why="no row for $v"
  done
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$(cat "$csv" 2>/dev/null)"; fi
fi

# The lines between the "main loop: begin" and "main loop: end" markers, as README.md counts them.
loop() { sed -n '/main loop: begin/,/main loop: end/p' "$top_srcdir/apps/stencil2d/$1"; }
name=stencil2d_mpi_acc_main_loop_calls_no_clEnqueueRead_or_clEnqueueWrite
if loop loop_mpi_acc.c | grep -q MPI_Isend && ! loop loop_mpi_acc.c | grep -q 'clEnqueue\(Read\|Write\)' &&
  loop loop_def.c | grep -q 'clEnqueueReadBufferRect'; then
  ok "$name"
else
  not_ok "$name" "markers missing, or a copy call in the mpi-acc loop" "$(loop loop_mpi_acc.c)"
fi

name=stencil2d_names_a_bad_option_once_and_prints_its_usage
if [ ! -x "$prog" ]; then
  ok "$name" "SKIP $skip"
else
  out=$(cd "$tmp" && timeout -k 10 60 "$MPIEXEC" -n 2 "$prog" --variant fast 2>&1)
  rc=$?
  if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c 'bad option --variant fast')" = 1 ] &&
    printf '%s\n' "$out" | grep -q '^usage: mpiexec -n N stencil2d'; then
    ok "$name"
  else
    not_ok "$name" "exit $rc" "$out"
  fi
fi
