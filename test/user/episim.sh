#!/bin/sh
# apps/episim, small and quick. The three GPU variants (basic, advanced, mpi-acc) in one run,
# each checked against the serial reference, on 1, 2 and 4 ranks, where a CUDA device is
# (else they skip by name). The cpu variant (the same exchange, computeInteractions on the
# CPU) checked the same way everywhere; fragments of 32 visits, so that every source sends
# many and the persistent receives are restarted. Every variant and rank count gives the same
# counts bit for bit, and so do fragment sizes from one visit to more than a day's; ranks
# that own no location or no person take part all the same. The CSV has a row per variant;
# the mpi-acc main loop has no cudaMemcpy and no event (which needs no device); a bad option gets one
# message and the usage.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPIEXEC.
echo "1..12"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-episim.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
size="--persons 3000 --locations 300 --days 12 --fragment 512"
prog=$top_builddir/apps/episim/episim
base=episim

. "$top_srcdir/test/user/app_tap.sh"

built=""
[ -x "$prog" ] || built="not built (CUDA is not configured)"
gpu_skip=$built

# run NAME RANKS VARIANTS OUTPUT [OPTIONS]: $prog --check on RANKS ranks; each of VARIANTS
# must print a 'check OK' line. The output goes to $tmp/OUTPUT.out. A GPU run that finds no
# device sets gpu_skip.
run() {
  name=$1 r=$2 variants=$3 file=$4
  shift 4
  if [ -n "$built" ]; then
    ok "$name" "SKIP $built"
    return
  fi
  case $variants in cpu) ;; *) if [ -n "$gpu_skip" ]; then
    ok "$name" "SKIP $gpu_skip"
    return
  fi ;; esac
  # shellcheck disable=SC2086 # $size is a list of options
  out=$(cd "$tmp" && timeout -k 10 180 "$MPIEXEC" -n "$r" "$prog" $size --check "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" >"$tmp/$file.out"
  if [ $rc -eq 77 ]; then
    gpu_skip="no CUDA device"
    ok "$name" "SKIP $gpu_skip"
    return
  fi
  why=""
  [ $rc -eq 0 ] || why="exit $rc"
  for v in $variants; do
    [ -z "$why" ] &&
      ! printf '%s\n' "$out" | grep -Eq "^$base: $v, $r ranks, [0-9]+ persons, [0-9]+ locations, [0-9]+ days: .* check OK: " &&
      why="no 'check OK' line for $v"
  done
  if [ -z "$why" ]; then ok "$name"; else not_ok "$name" "$why" "$out"; fi
}

for r in 1 2 4; do
  run "${base}_every_gpu_variant_matches_the_serial_reference_on_${r}_ranks" $r "basic advanced mpi-acc" gpu-$r
done
for r in 1 2 4; do
  run "${base}_cpu_variant_matches_the_serial_reference_on_${r}_ranks" $r cpu cpu-$r --variant cpu
done

# The counts' hashes of the named outputs, one a line.
hashes() {
  for f in "$@"; do cat "$tmp/$f.out" 2>/dev/null; done | sed -n "s/^$base: .* counts fnv1a \\(0x[0-9a-f]*\\)\$/\\1/p"
}

name=${base}_variants_and_rank_counts_give_the_same_counts_bit_for_bit
if [ -n "$built" ]; then
  ok "$name" "SKIP $built"
else
  h=$(hashes cpu-1 cpu-2 cpu-4 gpu-1 gpu-2 gpu-4)
  want=3
  [ -z "$gpu_skip" ] && want=12
  if [ "$(printf '%s\n' "$h" | wc -l)" = $want ] && [ "$(printf '%s\n' "$h" | sort -u | wc -l)" = 1 ]; then
    ok "$name" "$(printf '%s\n' "$h" | head -n 1)${gpu_skip:+, cpu variant only: $gpu_skip}"
  else
    not_ok "$name" "hashes: $(echo $h)" "$(cat "$tmp/cpu-4.out" "$tmp/gpu-4.out" 2>/dev/null)"
  fi
fi

name=${base}_fragment_size_does_not_change_the_counts
if [ -n "$built" ]; then
  ok "$name" "SKIP $built"
else
  why=""
  for f in 16 1048576; do
    out=$(cd "$tmp" && timeout -k 10 180 "$MPIEXEC" -n 2 "$prog" --persons 3000 --locations 300 --days 12 \
      --variant cpu --fragment $f 2>&1)
    rc=$?
    [ $rc -eq 0 ] || why="exit $rc with --fragment $f"
    printf '%s\n' "$out" >"$tmp/frag-$f.out"
  done
  h=$(hashes cpu-2 frag-16 frag-1048576)
  if [ -z "$why" ] && [ "$(printf '%s\n' "$h" | wc -l)" = 3 ] && [ "$(printf '%s\n' "$h" | sort -u | wc -l)" = 1 ]; then
    ok "$name"
  else
    not_ok "$name" "${why:-hashes: $(echo $h)}" "$(cat "$tmp/frag-16.out")"
  fi
fi

# 4 ranks, 3 locations and 3 persons: one rank owns no location, one owns no person.
run "${base}_ranks_without_locations_or_persons_still_match_the_reference" 4 cpu empty --variant cpu \
  --persons 3 --locations 3 --days 4

name=${base}_csv_has_a_row_of_times_per_variant
if [ -n "$built" ]; then
  ok "$name" "SKIP $built"
else
  variant=all rows="basic advanced mpi-acc"
  if [ -n "$gpu_skip" ]; then variant=cpu rows=cpu; fi
  # shellcheck disable=SC2086 # $size is a list of options
  out=$(cd "$tmp" && timeout -k 10 180 "$MPIEXEC" -n 2 "$prog" $size --check --variant $variant --csv "$tmp/csv/" 2>&1)
  csv=$(ls "$tmp/csv/$base"-*.csv 2>/dev/null | head -n 1)
  why=""
  [ -n "$csv" ] || why="no CSV in the folder given"
  header=variant,ranks,persons,locations,days,seed,fragment_bytes,visits_us,interactions_us,unpack_us,comm_us,total_us
  [ -z "$why" ] && ! grep -qx "$header,infected,peak_infectious,check,counts_fnv1a" "$csv" && why="no CSV header"
  for v in $rows; do
    [ -z "$why" ] && ! grep -Eq "^$v,2,3000,300,12,1,512(,[0-9.]+){5},[0-9]+,[0-9]+,ok,0x[0-9a-f]{16}\$" "$csv" &&
      why="no row for $v"
  done
  if [ -z "$why" ]; then ok "$name" "${gpu_skip:+cpu row only: $gpu_skip}"; else not_ok "$name" "$why" "$out $(cat "$csv" 2>/dev/null)"; fi
fi

# The lines between the "main loop: begin" and "main loop: end" markers, as README.md counts them.
loop() { sed -n '/main loop: begin/,/main loop: end/p' "$top_srcdir/apps/episim/$1"; }
name=${base}_mpi_acc_main_loop_calls_no_cudaMemcpy_and_waits_for_no_event
if loop loop_mpi_acc.c | grep -q compute_visits && ! loop loop_mpi_acc.c | grep -q 'cudaMemcpy\|cudaEvent' &&
  loop loop_basic.c | grep -q 'cudaMemcpy(' && loop loop_advanced.c | grep -q 'cudaMemcpyAsync('; then
  ok "$name"
else
  not_ok "$name" "markers missing, or a copy call in the mpi-acc loop" "$(loop loop_mpi_acc.c)"
fi

bad_option_case "$prog" "$base" "$built"
