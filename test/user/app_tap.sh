# TAP pieces the tests of the applications under apps/ share (sourced: test/user/stencil2d.sh,
# test/user/seismology.sh). Needs $MPIEXEC and $tmp.

n=0
ok() { n=$((n + 1)); echo "ok $n - $1${2:+ # $2}"; }
not_ok() { # NAME WHY OUTPUT
  n=$((n + 1))
  echo "not ok $n - $1"
  echo "# $2"
  printf '%s\n' "$3" | tail -n 10 | sed 's/^/# /'
}

# bad_option_case PROGRAM BASE SKIP_WHY: an unknown --variant gets exit 2, one message naming
# the option, and the usage.
bad_option_case() {
  name=${2}_names_a_bad_option_once_and_prints_its_usage
  if [ ! -x "$1" ]; then
    ok "$name" "SKIP $3"
    return
  fi
  out=$(cd "$tmp" && timeout -k 10 60 "$MPIEXEC" -n 2 "$1" --variant fast 2>&1)
  rc=$?
  if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | grep -c "^$2: bad option --variant fast")" = 1 ] &&
    printf '%s\n' "$out" | grep -q "^usage: mpiexec -n N $2 "; then
    ok "$name"
  else
    not_ok "$name" "exit $rc" "$out"
  fi
}
