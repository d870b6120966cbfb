#!/bin/sh
# apps/stencil2d, small and quick, in OpenCL (stencil2d, on PoCL) and in CUDA (stencil2d_cuda,
# where a CUDA device is). For each: both variants in one run, each checked against the
# serial reference, on process grids 1x1, 1x2, 2x1 and 2x2 (uneven tiles: 37 x 29 cells); def
# and mpi-acc give the same grid bit for bit; the CSV has a row per variant; the mpi-acc main
# loop has no copy call (clEnqueueRead/Write, cudaMemcpy), which needs no device; a bad option
# gets one message and the usage. Last, the two programs give the same grid bit for bit.
# Without a program built, or without a device (exit 77), its cases skip by name.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPIEXEC.
echo "1..17"
: "${MPIACC_OPENCL_PLATFORM=Portable}"
export MPIACC_OPENCL_PLATFORM
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-stencil2d.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/test/user/app_tap.sh"

# grid RANKS PGRID [OPTIONS]: both variants of $prog checked; the output goes to $tmp/$base-PGRID.out.
grid() {
  name="${base}_def_and_mpi_acc_match_the_serial_reference_on_a_$2_process_grid"
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
    return
  fi
  ranks=$1 pgrid=$2
  shift 2
  out=$(cd "$tmp" && timeout -k 10 120 "$MPIEXEC" -n "$ranks" "$prog" --rows 37 --cols 29 --iters 6 --pgrid "$pgrid" \
    --check "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" >"$tmp/$base-$pgrid.out"
  if [ $rc -eq 77 ]; then
    skip="no $api device"
    ok "$name" "SKIP $skip"
    return
  fi
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  for v in def mpi-acc; do
    [ -z "$why" ] && ! printf '%s\n' "$out" | grep -Eq "^$base: $v, $ranks ranks \\($pgrid\\), 37x29 floats, 6 iters: .* check OK: max abs diff" &&
      why="no 'check OK' line for $v"
  done
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
}

# The hashes of the 2x2 grid's final grid that $1 printed, one a line.
hashes() { sed -n "s/^$1: \\(def\\|mpi-acc\\), 4 ranks.*grid fnv1a \\(0x[0-9a-f]*\\)\$/\\2/p" "$tmp/$1-2x2.out" 2>/dev/null; }

# The lines between the "main loop: begin" and "main loop: end" markers, as README.md counts them.
loop() { sed -n '/main loop: begin/,/main loop: end/p' "$top_srcdir/apps/stencil2d/$1"; }

# suite API PROGRAM LOOP_SUFFIX COPY_CALLS COPY_RE STAGING_CALL: the eight cases of one program.
suite() {
  api=$1 base=$2 suffix=$3 copies=$4 copy_re=$5 staging=$6
  prog=$top_builddir/apps/stencil2d/$base
  skip=""
  [ -x "$prog" ] || skip="not built ($api is not configured)"

  grid 1 1x1
  grid 2 1x2
  grid 2 2x1 --csv "$tmp/$base-csv/"
  grid 4 2x2

  name=${base}_def_and_mpi_acc_give_the_same_grid_bit_for_bit
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
  else
    h=$(hashes "$base")
    if [ "$(printf '%s\n' "$h" | wc -l)" = 2 ] && [ "$(printf '%s\n' "$h" | sort -u | wc -l)" = 1 ]; then
      ok "$name" "2x2, $(printf '%s\n' "$h" | head -n 1)"
    else
      not_ok "$name" "hashes: $(echo $h)" "$(cat "$tmp/$base-2x2.out")"
    fi
  fi

  name=${base}_csv_has_a_row_of_times_per_variant
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
  else
    csv=$(ls "$tmp/$base-csv/$base"-*.csv 2>/dev/null | head -n 1)
    why=""
    [ -n "$csv" ] || why="no CSV in the folder given"
    [ -z "$why" ] && ! grep -qx 'variant,precision,ranks,pgrid,rows,cols,iters,compute_us,comm_us,total_us,check,max_abs_diff' \
      "$csv" && why="no CSV header"
    for v in def mpi-acc; do
      [ -z "$why" ] && ! grep -Eq "^$v,float,2,2x1,37,29,6,[0-9.]+,[0-9.]+,[0-9.]+,ok,0\$" "$csv" && why="no row for $v"
    done
    if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$(cat "$csv" 2>/dev/null)"; fi
  fi

  name=${base}_mpi_acc_main_loop_calls_no_$copies
  if loop "loop_mpi_acc$suffix.c" | grep -q MPI_Isend && ! loop "loop_mpi_acc$suffix.c" | grep -q "$copy_re" &&
    loop "loop_def$suffix.c" | grep -q "$staging"; then
    ok "$name"
  else
    not_ok "$name" "markers missing, or a copy call in the mpi-acc loop" "$(loop "loop_mpi_acc$suffix.c")"
  fi

  bad_option_case "$prog" "$base" "$skip"
}

suite OpenCL stencil2d "" clEnqueueRead_or_clEnqueueWrite 'clEnqueue\(Read\|Write\)' clEnqueueReadBufferRect
opencl_skip=$skip
suite CUDA stencil2d_cuda _cuda cudaMemcpy cudaMemcpy cudaMemcpy2D
cuda_skip=$skip

# One arithmetic (stencil_cell.h) rounded the same way on both: the same bits.
name=stencil2d_cuda_and_opencl_give_the_same_grid_bit_for_bit
if [ -n "$cuda_skip$opencl_skip" ]; then
  ok "$name" "SKIP ${cuda_skip:-$opencl_skip}"
else
  h=$( (hashes stencil2d && hashes stencil2d_cuda) | sort -u)
  if [ "$(hashes stencil2d_cuda | wc -l)" = 2 ] && [ "$(printf '%s\n' "$h" | wc -l)" = 1 ]; then
    ok "$name" "2x2, $h"
  else
    not_ok "$name" "hashes: $(echo $h)" "$(cat "$tmp/stencil2d-2x2.out" "$tmp/stencil2d_cuda-2x2.out")"
  fi
fi
