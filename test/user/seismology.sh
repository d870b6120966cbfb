#!/bin/sh
# apps/seismology, small and quick, in OpenCL (seismology, on PoCL) and in CUDA
# (seismology_cuda, where a CUDA device is). For each: the three variants in one run, each
# checked against the serial reference, on 1, 2 and 4 ranks (22 x 12 x 14 cells: slabs of
# 22, 11 and 6 or 5 columns), and all of them give the same wavefield bit for bit. mpi-acc
# with --async (no host wait: the sends are ordered by the kernel's event, or by the stream)
# matches the reference on a grid large enough that unordered sends read stale faces on PoCL
# (64 x 32 x 32: they did when the event and queue attributes were left out). The CSV has a
# row per variant; the mpi-acc main loop has no copy call (clEnqueueRead/Write, cudaMemcpy),
# which needs no device; a bad option gets one message and the usage. Last, the two programs
# give the same wavefield bit for bit. Without a program built, or without a device (exit
# 77), its cases skip by name.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPIEXEC.
echo "1..17"
: "${MPIACC_OPENCL_PLATFORM=Portable}"
export MPIACC_OPENCL_PLATFORM
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-seismology.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
size="--nx 22 --ny 12 --nz 14 --steps 40 --every 4"

. "$top_srcdir/test/user/app_tap.sh"

# ranks RANKS [OPTIONS]: every variant of $prog checked; the output goes to $tmp/$base-RANKS.out.
ranks() {
  name="${base}_every_variant_matches_the_serial_reference_on_$1_ranks"
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
    return
  fi
  r=$1
  shift
  # shellcheck disable=SC2086 # $size is a list of options
  out=$(cd "$tmp" && timeout -k 10 120 "$MPIEXEC" -n "$r" "$prog" $size --check "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" >"$tmp/$base-$r.out"
  if [ $rc -eq 77 ]; then
    skip="no $api device"
    ok "$name" "SKIP $skip"
    return
  fi
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  for v in mpi-gpu mpi-gpu-adv mpi-acc; do
    [ -z "$why" ] &&
      ! printf '%s\n' "$out" | grep -Eq "^$base: $v, $r ranks, 22x12x14 cells, 40 steps: .* check OK: norm [0-9.e+]+, rel" &&
      why="no 'check OK' line for $v"
  done
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
}

# The wavefield hashes that $1 printed on 1, 2 and 4 ranks, one a line.
hashes() {
  cat "$tmp/$1-1.out" "$tmp/$1-2.out" "$tmp/$1-4.out" 2>/dev/null |
    sed -n "s/^$1: .* wavefield fnv1a \\(0x[0-9a-f]*\\)\$/\\1/p"
}

# The lines between the "main loop: begin" and "main loop: end" markers, as README.md counts them.
loop() { sed -n '/main loop: begin/,/main loop: end/p' "$top_srcdir/apps/seismology/$1"; }

# suite API PROGRAM LOOP_SUFFIX COPY_CALLS COPY_RE STAGING_CALL: the eight cases of one program.
suite() {
  api=$1 base=$2 suffix=$3 copies=$4 copy_re=$5 staging=$6
  prog=$top_builddir/apps/seismology/$base
  skip=""
  [ -x "$prog" ] || skip="not built ($api is not configured)"

  ranks 1
  ranks 2 --csv "$tmp/$base-csv/"
  ranks 4

  name=${base}_mpi_acc_async_sends_after_the_kernel_event_without_a_host_wait
  [ "$api" = CUDA ] && name=${base}_mpi_acc_async_sends_after_the_kernels_on_its_stream_without_a_host_wait
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
  else
    out=$(cd "$tmp" && timeout -k 10 120 "$MPIEXEC" -n 2 "$prog" --nx 64 --ny 32 --nz 32 --steps 30 --every 3 --check \
      --variant mpi-acc --async 2>&1)
    rc=$?
    if [ $rc -eq 0 ] &&
      printf '%s\n' "$out" | grep -Eq "^$base: mpi-acc-async, 2 ranks, 64x32x32 cells, 30 steps: .* check OK: "; then
      ok "$name"
    else
      not_ok "$name" "exit $rc, or no 'check OK' line" "$out"
    fi
  fi

  name=${base}_variants_and_rank_counts_give_the_same_wavefield_bit_for_bit
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
  else
    h=$(hashes "$base")
    if [ "$(printf '%s\n' "$h" | wc -l)" = 9 ] && [ "$(printf '%s\n' "$h" | sort -u | wc -l)" = 1 ]; then
      ok "$name" "$(printf '%s\n' "$h" | head -n 1)"
    else
      not_ok "$name" "hashes: $(echo $h)" "$(cat "$tmp/$base-4.out")"
    fi
  fi

  name=${base}_csv_has_a_row_of_times_per_variant
  if [ -n "$skip" ]; then
    ok "$name" "SKIP $skip"
  else
    csv=$(ls "$tmp/$base-csv/$base"-*.csv 2>/dev/null | head -n 1)
    why=""
    [ -n "$csv" ] || why="no CSV in the folder given"
    header=variant,precision,ranks,nx,ny,nz,steps,every,compute_us,marshal_us,copy_us,comm_us,total_us,check
    [ -z "$why" ] && ! grep -qx "$header,norm_rel_diff,field_rel_diff,trace_rel_diff" "$csv" && why="no CSV header"
    for v in mpi-gpu mpi-gpu-adv mpi-acc; do
      [ -z "$why" ] && ! grep -Eq "^$v,float,2,22,12,14,40,4(,[0-9.]+){5},ok,0,0,0\$" "$csv" && why="no row for $v"
    done
    if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$(cat "$csv" 2>/dev/null)"; fi
  fi

  name=${base}_mpi_acc_main_loop_calls_no_$copies
  if loop "loop_mpi_acc$suffix.c" | grep -q MPI_Isend && ! loop "loop_mpi_acc$suffix.c" | grep -q "$copy_re" &&
    loop "loop_mpi_gpu$suffix.c" | grep -q "$staging" && loop "loop_mpi_gpu_adv$suffix.c" | grep -q "$staging"; then
    ok "$name"
  else
    not_ok "$name" "markers missing, or a copy call in the mpi-acc loop" "$(loop "loop_mpi_acc$suffix.c")"
  fi

  bad_option_case "$prog" "$base" "$skip"
}

suite OpenCL seismology "" clEnqueueRead_or_clEnqueueWrite 'clEnqueue\(Read\|Write\)' clEnqueueReadBuffer
opencl_skip=$skip
suite CUDA seismology_cuda _cuda cudaMemcpy cudaMemcpy 'cudaMemcpy('
cuda_skip=$skip

# One arithmetic (physics.h) rounded the same way on both: the same bits.
name=seismology_cuda_and_opencl_give_the_same_wavefield_bit_for_bit
if [ -n "$cuda_skip$opencl_skip" ]; then
  ok "$name" "SKIP ${cuda_skip:-$opencl_skip}"
else
  h=$( (hashes seismology && hashes seismology_cuda) | sort -u)
  if [ "$(hashes seismology_cuda | wc -l)" = 9 ] && [ "$(printf '%s\n' "$h" | wc -l)" = 1 ]; then
    ok "$name" "$h"
  else
    not_ok "$name" "hashes: $(echo $h)" "$(cat "$tmp/seismology-4.out" "$tmp/seismology_cuda-4.out")"
  fi
fi
