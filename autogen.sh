#!/bin/sh
# Generates configure and Makefile.in (maintainers only; `make dist` tarballs ship them).
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi
# automake's TAP driver is not installed by --add-missing; the test harness needs it.
cp "$(automake --print-libdir)/tap-driver.sh" build-aux/
