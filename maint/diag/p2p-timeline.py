#!/usr/bin/env python3
"""Reads the two files maint/diag/p2p-timeline.c wrote for a ping-pong and prints where a
one-way message spends its time: per top-level call, the calls made inside it (median us
per call and calls per call), then the median timeline of one message from the sender's
MPI_Send to the receiver's MPI_Recv return, and one message's events in full.

    python3 maint/diag/p2p-timeline.py timeline.0.tsv timeline.1.tsv
    python3 maint/diag/p2p-timeline.py --each timeline.0.tsv timeline.1.tsv

--each (for files written with TIMELINE_SLOW_US, which keeps only slow calls, so that the
two ranks' calls no longer pair up) prints each rank's breakdown, then every kept call with
its events, in us after the call's start, and the time outside wrapped calls.
"""
import collections
import statistics
import sys


def load(path):
    calls = collections.OrderedDict()  # seq -> {"name", "start", "end", "events": [...]}
    inner = collections.defaultdict(list)
    for line in open(path):
        seq, name, start, dur, aux = line.rstrip("\n").split("\t")
        seq, start, dur, aux = int(seq), float(start), float(dur), int(aux)
        if aux == -1:
            calls[seq] = {"name": name, "start": start, "end": start + dur, "events": []}
        else:
            inner[seq].append((start, dur, name, aux))
    for seq, c in calls.items():
        c["events"] = sorted(inner.get(seq, []))
    return calls


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def breakdown(rank, calls):
    by_top = collections.defaultdict(list)
    for c in calls.values():
        by_top[c["name"]].append(c)
    for top, cs in by_top.items():
        total = [c["end"] - c["start"] for c in cs]
        names = sorted({e[2] for c in cs for e in c["events"]})
        print(f"rank {rank} {top}: {len(cs)} calls, median {med(total):.2f} us")
        wrapped = []
        for n in names:
            if n == "involuntary_ctxsw":  # the shim's record of a call the thread was switched out in
                per_call = [sum(e[3] for e in c["events"] if e[2] == n) for c in cs]
                hit = [c["end"] - c["start"] for c in cs if any(e[2] == n for e in c["events"])]
                print(f"    {'involuntary context switches':28s} {statistics.mean(per_call):6.2f} a call, in "
                      f"{len(hit)} calls of median {med(hit):.2f} us")
                continue
            per_call_us = [sum(e[1] for e in c["events"] if e[2] == n) for c in cs]
            per_call_n = [sum(1 for e in c["events"] if e[2] == n) for c in cs]
            print(f"    {n:28s} {statistics.mean(per_call_n):6.2f} calls  {statistics.mean(per_call_us):7.2f} us")
        for c in cs:
            wrapped.append(sum(e[1] for e in c["events"] if e[2] != "involuntary_ctxsw"))
        print(f"    {'(outside wrapped calls)':28s}              {statistics.mean(total) - statistics.mean(wrapped):7.2f} us")


def first(events, pred):
    for e in events:
        if pred(e):
            return e
    return None


def timeline(send_calls, recv_calls, label):
    """Pairs the sender's MPI_Send with the receiver's MPI_Recv of the same sequence number."""
    rows = collections.defaultdict(list)
    example = None
    pairs = []
    for seq, s in send_calls.items():
        r = recv_calls.get(seq)
        if s["name"] != "MPI_Send" or not r or r["name"] != "MPI_Recv":
            continue
        t0 = s["start"]
        marks = {}
        env = first(s["events"], lambda e: e[2] in ("PMPI_Isend", "PMPI_Send"))
        if env:
            marks["sender: envelope post starts"] = env[0] - t0
            marks["sender: envelope post returns"] = env[0] + env[1] - t0
        marks["receiver: MPI_Recv entered"] = r["start"] - t0
        match = first(r["events"], lambda e: e[2] in ("PMPI_Test", "PMPI_Request_get_status", "PMPI_Improbe",
                                                        "PMPI_Testsome") and e[3] > 0)
        if match:
            marks["receiver: envelope matched (test returns)"] = match[0] + match[1] - t0
        cp = first(r["events"], lambda e: e[2] == "cudaMemcpyAsync")
        if cp:
            marks["receiver: cudaMemcpyAsync starts"] = cp[0] - t0
            marks["receiver: cudaMemcpyAsync returns"] = cp[0] + cp[1] - t0
            done = first(r["events"], lambda e: e[2] in ("cudaEventQuery", "cudaStreamQuery") and e[3] == 1
                         and e[0] >= cp[0])
            if done:
                marks["receiver: copy seen done (query returns)"] = done[0] + done[1] - t0
                rows["receiver: queries until done"].append(
                    sum(1 for e in r["events"] if e[2] in ("cudaEventQuery", "cudaStreamQuery") and cp[0] <= e[0] <= done[0]))
            fin = first(r["events"], lambda e: e[2] in ("PMPI_Isend", "PMPI_Send") and e[0] >= cp[0])
            if fin:
                marks["receiver: FIN post starts"] = fin[0] - t0
        marks["receiver: MPI_Recv returns"] = r["end"] - t0
        marks["sender: MPI_Send returns"] = s["end"] - t0
        for k, v in marks.items():
            rows[k].append(v)
        pairs.append((r["end"] - t0, seq))
    if not pairs:
        return
    print(f"\n{label}: {len(pairs)} messages; median us after the sender's MPI_Send entry")
    order = [k for k in rows if k != "receiver: queries until done"]
    order.sort(key=lambda k: med(rows[k]))
    for k in order:
        print(f"    {k:44s} {med(rows[k]):8.2f}")
    if rows["receiver: queries until done"]:
        print(f"    {'receiver: queries until done':44s} {med(rows['receiver: queries until done']):8.1f}")
    pairs.sort()
    _, seq = pairs[len(pairs) // 2]
    s, r = send_calls[seq], recv_calls[seq]
    t0 = s["start"]
    print(f"  the median message (seq {seq}), every event:")
    evs = [(e[0], "S", e) for e in s["events"]] + [(e[0], "R", e) for e in r["events"]]
    for _, side, e in sorted(evs):
        print(f"    {side} {e[0] - t0:8.2f} +{e[1]:6.2f}  {e[2]}{'' if e[3] == 0 else f' -> {e[3]}'}")


POLLS = {"PMPI_Improbe", "PMPI_Iprobe", "PMPI_Test", "PMPI_Testsome", "PMPI_Request_get_status", "cudaEventQuery",
         "cudaStreamQuery"}


def each(rank, calls):
    for seq, c in calls.items():
        t0 = c["start"]
        wrapped = sum(e[1] for e in c["events"] if e[2] != "involuntary_ctxsw")
        print(f"\nrank {rank} call {seq} {c['name']}: {c['end'] - t0:.1f} us, "
              f"{c['end'] - t0 - wrapped:.1f} outside wrapped calls")
        # A run of polling calls (thousands long in a stalled call) prints as one line:
        # its first start, the time inside them, how many of each, and how many said yes.
        run = []

        def flush():
            if not run:
                return
            counts = collections.Counter(e[2] for e in run)
            what = ", ".join(f"{n} {k}" for k, n in counts.items())
            yes = sum(1 for e in run if e[3] > 0)
            print(f"    {run[0][0] - t0:10.2f} +{sum(e[1] for e in run):9.2f}  polling: {what}; {yes} found something")
            run.clear()

        for ev in c["events"]:
            start, dur, name, aux = ev
            if name in POLLS:
                run.append(ev)
                continue
            flush()
            print(f"    {start - t0:10.2f} +{dur:9.2f}  {name}{'' if aux == 0 else f' -> {aux}'}")
        flush()


def main():
    args = sys.argv[1:]
    listing = bool(args) and args[0] == "--each"
    if listing:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    c0, c1 = load(args[0]), load(args[1])
    breakdown(0, c0)
    breakdown(1, c1)
    if listing:
        each(0, c0)
        each(1, c1)
        return
    timeline(c0, c1, "rank 0 -> rank 1")
    timeline(c1, c0, "rank 1 -> rank 0")


if __name__ == "__main__":
    main()
