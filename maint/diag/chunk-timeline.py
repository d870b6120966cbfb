#!/usr/bin/env python3
"""Where a staged (pipeline-mode) transfer waits, from MPIACC_VERBOSE=3's chunk records.

    MPIACC_VERBOSE=3 mpiexec -n 2 bench/pt2pt ... 2> trace.txt
    python3 maint/diag/chunk-timeline.py trace.txt [--gap-us 2000]

Both ranks' "[mpiacc-chunk RANK] T_US EVENT TRANSFER CHUNK" lines go in one file (their
clocks are the host's CLOCK_MONOTONIC). The timeline is cut into busy periods wherever
no event happened for --gap-us; for each period with at least 8 chunks it prints how long
the stages took (medians and 90th percentiles, in us), how many chunk sends were in flight
on the sender over time, and the share of the period in which none was: time the network
(MPICH) sat idle waiting for a device copy, a CTS or a slot. Transfer ids are per sender,
so chunks are keyed by (sending rank, transfer, chunk): send events belong to the rank
that recorded them, receive events to the other rank (traces of two ranks only)."""
import argparse
import collections
import re
import statistics
import sys

LINE = re.compile(r"\[mpiacc-chunk (\d+)\] ([0-9.]+) (\w+) (\d+) (\d+)")
SEND = {"cts_seen", "send_copy_start", "send_copy_done", "send_post", "send_done"}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else float("nan")


def stage(name, xs):
    if xs:
        print(f"  {name:34s} n={len(xs):5d}  median {statistics.median(xs):9.1f}  p90 {pct(xs, 90):9.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--gap-us", type=float, default=2000.0)
    a = ap.parse_args()
    events = []
    for line in open(a.trace, errors="replace"):
        m = LINE.search(line)
        if m:
            events.append((float(m.group(2)), int(m.group(1)), m.group(3), int(m.group(4)), int(m.group(5))))
    if not events:
        sys.exit("chunk-timeline: no [mpiacc-chunk] lines (run with MPIACC_VERBOSE=3)")
    events.sort()
    ranks = sorted({e[1] for e in events})
    if len(ranks) != 2:
        sys.exit(f"chunk-timeline: traces of two ranks only (found ranks {ranks})")
    other = {ranks[0]: ranks[1], ranks[1]: ranks[0]}
    periods, cur = [], [events[0]]
    for e in events[1:]:
        if e[0] - cur[-1][0] > a.gap_us:
            periods.append(cur)
            cur = []
        cur.append(e)
    periods.append(cur)
    for n, p in enumerate(periods):
        when = collections.defaultdict(dict)  # (sender, transfer, chunk) -> event -> time
        for t, r, ev, tid, c in p:
            if ev.startswith("cts"):
                continue
            sender = r if ev in SEND else other[r]
            when[(sender, tid, c)].setdefault(ev, t)
        if len(when) < 8:
            continue
        span = p[-1][0] - p[0][0]
        transfers = {k[:2] for k in when}
        print(f"period {n}: {span / 1000:.2f} ms, {len(transfers)} transfers, {len(when)} chunks")
        d = collections.defaultdict(list)
        for k, w in when.items():
            def dt(x, y):
                if x in w and y in w:
                    d[f"{x} -> {y}"].append(w[y] - w[x])
            dt("send_copy_start", "send_copy_done")
            dt("send_copy_done", "send_post")
            dt("send_post", "send_done")
            dt("recv_post", "recv_done")
            dt("send_post", "recv_done")
            dt("recv_done", "recv_copy_done")
            dt("send_copy_start", "recv_copy_done")
        for name, xs in d.items():
            stage(name, xs)
        # Chunk sends in flight on the sender, over the period.
        marks = []
        for k, w in when.items():
            if "send_post" in w and "send_done" in w:
                marks += [(w["send_post"], 1), (w["send_done"], -1)]
        marks.sort()
        if marks:
            busy_from, level, hist = marks[0][0], 0, collections.Counter()
            last = marks[0][0]
            for t, step in marks:
                hist[level] += t - last
                last, level = t, level + step
            total = sum(hist.values())
            shares = ", ".join(f"{lv}: {100 * hist[lv] / total:.0f}%" for lv in sorted(hist))
            print(f"  chunk sends in flight (share of {total / 1000:.2f} ms from first post to last done): {shares}")


if __name__ == "__main__":
    main()
