# Sourced by maint/diag's scripts after they set `out` (the OUTDIR they were given).
# Sets `diag`, this folder (p2p-timeline.py and the other tools lie here).
diag=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# diag_log NAME [WHAT]: from here on the script's output also goes to $out/NAME.txt,
# after a line saying when, where and (WHAT) with what it ran.
diag_log() {
  exec > >(tee -a "$out/$1.txt") 2>&1
  echo "== $(date -u +%FT%TZ) $(pwd)${2:+ $2}"
}

# timeline_shim: builds /tmp/p2p-timeline.so, the LD_PRELOAD shim of p2p-timeline.c.
timeline_shim() {
  $MPICC -shared -fPIC -I/usr/local/cuda/include -I"$diag" -o /tmp/p2p-timeline.so "$diag/p2p-timeline.c" -ldl
}
