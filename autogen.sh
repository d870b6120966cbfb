#!/bin/sh
# Generates configure and Makefile.in (maintainers only; `make dist` tarballs ship them).
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi
