#!/bin/sh
# mpiacc-tune as CI runs it: host only (one rank, no OpenCL platform matching) writing to
# the default path, and two ranks on PoCL, each within a minute; the profiles it writes
# load (mpiacc_info shows what they set, an MPI program starts without a warning); a bad
# option gets exit 2 and the usage. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_builddir, MPIEXEC.
echo "1..5"
tune=$top_builddir/mpiacc-tune
info=$top_builddir/mpiacc_info
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-tune.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
result() { # result OK NAME [DETAIL...]; OK "skip:REASON" skips
  n=$((n + 1))
  ok=$1 name=$2
  shift 2
  case "$ok" in
    0) echo "ok $n - $name" ;;
    skip:*) echo "ok $n - $name # SKIP ${ok#skip:}" ;;
    *) echo "not ok $n - $name"
       for d in "$@"; do printf '%s\n' "$d" | sed 's/^/# /'; done ;;
  esac
}

# profile_ok FILE KIND: why FILE is not a whole profile measured on KIND, or nothing.
profile_ok() {
  [ -f "$1" ] || { echo "no file $1"; return; }
  for re in '^version = 1$' '^machine = .' "^accelerator = $2 " '^date = 20[0-9-]*T[0-9:]*Z$' \
            '^chunk_size = [0-9][0-9]*$' '^pipeline_depth = [0-9][0-9]*$'; do
    grep -q "$re" "$1" || echo "no line matching '$re' in $1"
  done
}

# ---------------------------------------------------------------- host only
start=$(date +%s)
out=$(cd "$tmp" && MPIACC_OPENCL_PLATFORM="no such platform" timeout -k 10 120 "$MPIEXEC" -n 1 "$tune" 2>&1)
rc=$? secs=$(($(date +%s) - start))
host=$tmp/mpiacc-profile-$(hostname).txt
why=$(profile_ok "$host" host)
[ "$rc" = 0 ] || why="$why|exit $rc"
[ "$secs" -le 60 ] || why="$why|took $secs s"
printf '%s\n' "$out" | grep -qx "mpiacc-tune: wrote mpiacc-profile-$(hostname).txt (use it with MPIACC_PROFILE=.*)" ||
  why="$why|no line naming where it wrote"
[ -z "$why" ]
result $? mpiacc_tune_on_a_host_only_machine_writes_a_host_profile_to_the_default_path \
  "$(printf '%s' "$why" | sed 's/^|//' | tr '|' '\n')" "$out"

# ---------------------------------------------------------------- two ranks on PoCL
pocl=$tmp/pocl.txt
if ! MPIACC_OPENCL_PLATFORM=Portable "$info" --config | grep -q '^accel opencl: *available'; then
  result "skip:no PoCL platform (MPIACC_OPENCL_PLATFORM=Portable) with a device" \
    mpiacc_tune_with_two_ranks_on_pocl_measures_opencl_and_the_network
  pocl=$host
else
  start=$(date +%s)
  out=$(cd "$tmp" && MPIACC_OPENCL_PLATFORM=Portable timeout -k 10 120 "$MPIEXEC" -n 2 "$tune" --output "$pocl" 2>&1)
  rc=$? secs=$(($(date +%s) - start))
  why=$(profile_ok "$pocl" opencl)
  [ "$rc" = 0 ] || why="$why|exit $rc"
  [ "$secs" -le 60 ] || why="$why|took $secs s"
  grep -q '^# network: 8 B one way in ' "$pocl" || why="$why|no network line"
  grep -q '^# opencl (Portable Computing Language.*one event query' "$pocl" || why="$why|no OpenCL table"
  grep -q '^# host (host memory)' "$pocl" || why="$why|no host table"
  [ -z "$why" ]
  result $? mpiacc_tune_with_two_ranks_on_pocl_measures_opencl_and_the_network \
    "$(printf '%s' "$why" | sed 's/^|//' | tr '|' '\n')" "$out"
fi

# ---------------------------------------------------------------- the profiles load
why=""
for p in "$host" "$pocl"; do
  chunk=$(sed -n 's/^chunk_size = //p' "$p" 2>/dev/null)
  depth=$(sed -n 's/^pipeline_depth = //p' "$p" 2>/dev/null)
  out=$(MPIACC_PROFILE=$p "$info" --knobs 2>&1)
  printf '%s\n' "$out" | grep -qx "Profile (MPIACC_PROFILE): $p, measured on .*" || why="$why|$p: no profile line"
  printf '%s\n' "$out" | grep -qx "  sets MPIACC_CHUNK_SIZE=$chunk" || why="$why|$p: chunk $chunk not set"
  printf '%s\n' "$out" | grep -qx "  MPIACC_PIPELINE_DEPTH=$depth" || why="$why|$p: depth $depth not in effect"
  printf '%s\n' "$out" | grep -q "not used" && why="$why|$p: not used"
done
[ -z "$why" ]
result $? the_profiles_mpiacc_tune_writes_load "$(printf '%s' "$why" | sed 's/^|//' | tr '|' '\n')"

out=$(MPIACC_PROFILE=$pocl MPIACC_OPENCL_PLATFORM=Portable timeout -k 10 120 "$MPIEXEC" -n 2 \
  "$top_builddir/examples/attr_send" 2>&1)
rc=$?
[ "$rc" = 0 ] && ! printf '%s\n' "$out" | grep -q 'MPI-ACC warning'
result $? an_mpi_program_runs_under_the_profile_without_a_warning "exit $rc" "$out"

# ---------------------------------------------------------------- usage
out=$("$MPIEXEC" -n 1 "$tune" --max-size 1G 2>&1)
rc=$?
[ "$rc" = 2 ] && printf '%s\n' "$out" | grep -q 'the sizes must lie within 4K..64M' &&
  printf '%s\n' "$out" | grep -q '^usage: mpiexec -n 1|2 mpiacc-tune'
result $? mpiacc_tune_refuses_a_size_out_of_range_with_the_usage "exit $rc" "$out"
