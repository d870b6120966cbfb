#!/bin/sh
# maint/test-summary, as `make check` (check-local) and then the README's command call it
# on one log: the skip list once, with a count of the names it leaves out, and the
# closing line last both times. TAP output. Environment: top_srcdir.
echo "1..2"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-summary.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/test/gpu"
printf '# TOTAL: 70\n# PASS:  10\n# SKIP:  60\n# XFAIL: 0\n# FAIL:  0\n# XPASS: 0\n# ERROR: 0\n' >"$tmp/test-suite.log"
i=1
while [ $i -le 60 ]; do
  echo "SKIP: test/gpu/fake $i - case_$i # SKIP no CUDA device"
  i=$((i + 1))
done >"$tmp/test/gpu/fake.log"
first=$(sh "$top_srcdir/maint/test-summary" "$tmp/test-suite.log")
second=$(sh "$top_srcdir/maint/test-summary" "$tmp/test-suite.log")
closing="10 passed, 0 failed, 60 skipped"
[ "$(printf '%s\n' "$first" | head -n 1)" = "Skipped (60):" ] &&
  [ "$(printf '%s\n' "$first" | grep -c '^  test/gpu/fake [0-9]* - case_')" = 50 ] &&
  printf '%s\n' "$first" | grep -qx "  ... and 10 more: grep -h '^SKIP:' test/\*/\*.log" &&
  [ "$(printf '%s\n' "$first" | tail -n 1)" = "$closing" ]
r=$?
[ $r = 0 ] && echo "ok 1 - summary_names_50_skips_and_counts_the_rest" ||
  { echo "not ok 1 - summary_names_50_skips_and_counts_the_rest"; printf '%s\n' "$first" | sed 's/^/# /'; }
[ "$second" = "$closing" ]
r=$?
[ $r = 0 ] && echo "ok 2 - summary_called_again_on_the_same_log_prints_the_closing_line_alone" ||
  { echo "not ok 2 - summary_called_again_on_the_same_log_prints_the_closing_line_alone"; printf '%s\n' "$second" | sed 's/^/# /'; }
