#!/usr/bin/env python3
"""How long each step between two probe points took, from the files a probe build of
libmpiacc wrote (src/util/probe.h; maint/diag/probe-timeline.sh runs one).

    maint/diag/probe-report.py DIR [--skip N] [--min-share F]

DIR holds probes.RANK.tsv. The records of all ranks are merged in time order (one host's
CLOCK_MONOTONIC), and each pair of consecutive records is one step, named "RANK:from ->
RANK:to"; a step is printed with how often it occurred and its median, 10th and 90th
percentile in us, in the order the steps first occurred. Each rank's records alone follow
(the steps of one rank, whatever the other did meanwhile). --skip drops each rank's first N
records (warm-up); --min-share hides steps seen less often than that share of the
commonest one (default 0.2). In a ping-pong, one message's critical path is the chain of
steps from the sender's send.entry to the receiver's recv.return. Where the records say
on which CPU each probe ran (a third column), the report ends with each rank's commonest
CPUs and that CPU's hyperthread siblings (read on the machine the report runs on): two
busy-polling ranks on one core slow each other."""
import argparse
import collections
import glob
import os
import statistics


def load(path, skip):
    recs = []
    rank = int(os.path.basename(path).split('.')[1])
    for line in open(path):
        if line.startswith('#'):
            continue
        cols = line.rstrip('\n').split('\t')
        cpu = int(cols[2]) if len(cols) > 2 else -1
        recs.append((int(cols[0]), rank, cols[1], cpu))
    return recs[skip:]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--skip', type=int, default=0)
    ap.add_argument('--min-share', type=float, default=0.2)
    a = ap.parse_args()
    recs = []
    for p in sorted(glob.glob(os.path.join(a.dir, 'probes.*.tsv'))):
        recs += load(p, a.skip)
    if not recs:
        print('probe-report: no records in', a.dir)
        return
    recs.sort()
    print('-- both ranks merged')
    report(zip(recs, recs[1:]), a.min_share)
    ranks = sorted({x[1] for x in recs})
    for rank in ranks:
        mine = [x for x in recs if x[1] == rank]
        print('-- rank %d alone' % rank)
        report(zip(mine, mine[1:]), a.min_share)
    cpus(recs, ranks)


def siblings(cpu):
    try:
        return open('/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list' % cpu).read().strip()
    except OSError:
        return '?'


def cpus(recs, ranks):
    if all(x[3] < 0 for x in recs):
        return
    print('-- cpus (probes run there, commonest first; hyperthread siblings)')
    for rank in ranks:
        seen = collections.Counter(x[3] for x in recs if x[1] == rank)
        total = sum(seen.values())
        print('rank %d: %s' % (rank, ', '.join('cpu %d %.1f%% [siblings %s]' % (c, 100.0 * k / total, siblings(c))
                                               for c, k in seen.most_common(3))))


def report(pairs, min_share):
    steps = collections.OrderedDict()
    for (t0, r0, n0, _), (t1, r1, n1, _) in pairs:
        steps.setdefault('%d:%s -> %d:%s' % (r0, n0, r1, n1), []).append((t1 - t0) / 1000.0)
    most = max(len(v) for v in steps.values())
    print('%-62s %7s %8s %8s %8s' % ('step', 'count', 'median', 'p10', 'p90'))
    for name, dts in steps.items():
        if len(dts) < min_share * most:
            continue
        print('%-62s %7d %8.2f %8.2f %8.2f' % (name, len(dts), statistics.median(dts), pct(dts, 0.1), pct(dts, 0.9)))


if __name__ == '__main__':
    main()
