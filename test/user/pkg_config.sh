#!/bin/sh
# The README's pkg-config line, as written there, against a fresh install: `make install`
# into a staging directory (DESTDIR), found through pkg-config (with --define-prefix, so
# that the staged copy answers for the configured prefix), builds examples/attr_send.c
# with MPICH's mpicc, and the program runs without the build tree on LD_LIBRARY_PATH: the rpath in
# `pkg-config --libs mpiacc` finds the installed libmpiacc.so.0. TAP output.
# Environment (Makefile.am, AM_TESTS_ENVIRONMENT): top_srcdir, top_builddir, MPICC, MPIEXEC.
echo "1..2"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpiacc-pkg-config.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
skip_all() {
  echo "ok 1 - readme_pkg_config_line_builds_attr_send_against_the_install # SKIP $1"
  echo "ok 2 - attr_send_built_by_pkg_config_finds_the_installed_library_at_run_time # SKIP $1"
  exit 0
}
real_pkg_config=$(command -v pkg-config) || skip_all "no pkg-config"
line=$(sed -n 's/^ *\(mpicc .*pkg-config --libs mpiacc.*examples\/attr_send\.c.*\)$/\1/p;s/^ *\(mpicc .*examples\/attr_send\.c.*pkg-config --libs mpiacc.*\)$/\1/p' \
  "$top_srcdir/README.md" | head -n 1)
case "$line" in *OpenCL*) "$real_pkg_config" --exists OpenCL || skip_all "no OpenCL.pc" ;; esac

# The install, as `make install` makes it (staged: nothing outside $tmp is touched).
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top_builddir" install DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1; then
  echo "not ok 1 - readme_pkg_config_line_builds_attr_send_against_the_install"
  sed 's/^/# /' "$tmp/install.log" | tail -n 20
  echo "not ok 2 - attr_send_built_by_pkg_config_finds_the_installed_library_at_run_time # make install failed"
  exit 0
fi
pc=$(find "$tmp/stage" -name mpiacc.pc | head -n 1)
mkdir -p "$tmp/bin" "$tmp/work/examples"
printf '#!/bin/sh\nexec "%s" --define-prefix "$@"\n' "$real_pkg_config" >"$tmp/bin/pkg-config"
# The MPICH configure found (Hydra finds its proxy next to its own path: exec, no link).
printf '#!/bin/sh\nexec "%s" "$@"\n' "$MPICC" >"$tmp/bin/mpicc"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$MPIEXEC" >"$tmp/bin/mpiexec"
chmod +x "$tmp/bin/pkg-config" "$tmp/bin/mpicc" "$tmp/bin/mpiexec"
cp "$top_srcdir/examples/attr_send.c" "$tmp/work/examples/"

# The library path without the folders that hold a libmpiacc (the build tree's): the
# program must find the installed one by its rpath. Others stay, for an MPICH installed
# off the default path.
keep=""
old_ifs=$IFS
IFS=:
for d in ${LD_LIBRARY_PATH:-}; do
  [ -e "$d/libmpiacc.so.0" ] || keep="${keep:+$keep:}$d"
done
IFS=$old_ifs

cd "$tmp/work" || exit 1
PATH="$tmp/bin:$PATH" PKG_CONFIG_PATH="$(dirname "$pc")" \
  timeout -k 10 120 env -u LD_PRELOAD LD_LIBRARY_PATH="$keep" sh -c "$line" >"$tmp/run.log" 2>&1
rc=$?
if [ -n "$line" ] && [ -x attr_send ]; then
  echo "ok 1 - readme_pkg_config_line_builds_attr_send_against_the_install"
else
  echo "not ok 1 - readme_pkg_config_line_builds_attr_send_against_the_install"
  echo "# README line: ${line:-(none found)}"
  sed 's/^/# /' "$tmp/run.log" | tail -n 20
fi
lib=$(env LD_LIBRARY_PATH="$keep" ldd ./attr_send 2>/dev/null | sed -n 's/^[[:space:]]*libmpiacc\.so\.0 => \([^ ]*\).*/\1/p')
if [ $rc -eq 0 ] && grep -Eqx 'attr_send: host -> (opencl|host) 1048576 bytes OK' "$tmp/run.log" &&
  case "$lib" in "$tmp/stage/"*) true ;; *) false ;; esac; then
  echo "ok 2 - attr_send_built_by_pkg_config_finds_the_installed_library_at_run_time"
else
  echo "not ok 2 - attr_send_built_by_pkg_config_finds_the_installed_library_at_run_time"
  echo "# exit $rc; libmpiacc.so.0 => ${lib:-not found}"
  sed 's/^/# /' "$tmp/run.log" | tail -n 20
fi
