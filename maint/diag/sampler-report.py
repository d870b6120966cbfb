#!/usr/bin/env python3
"""Self and inclusive profiles from maint/diag/sampler.c's samples files.

    maint/diag/sampler-report.py SAMPLES [LIBDIR ...] [--top N] [--stacks N]

Each address is placed in the library /proc/self/maps named for it, and named by the
nearest preceding function symbol of a copy of that library found by base name in the
LIBDIRs (then /usr/lib/x86_64-linux-gnu). Copies must be the same builds as on the
machine that sampled (Debian's .debs are; carry a libmpiacc built here). A library with
no copy here (the NVIDIA driver's) is reported by name alone; one stripped of local
symbols names the nearest exported function, which may not be the one that ran.
Needs readelf and nm (binutils)."""
import argparse
import bisect
import collections
import os
import subprocess


def read_samples(path):
    maps, samples = [], []
    with open(path) as f:
        for line in f:
            if line.startswith('M '):
                fields = line[2:].split()
                if len(fields) >= 6:
                    lo, hi = (int(x, 16) for x in fields[0].split('-'))
                    maps.append((lo, hi, int(fields[2], 16), fields[5]))
            elif line.startswith('S'):
                samples.append([int(x, 16) for x in line.split()[1:]])
    maps.sort()
    return maps, samples


class Symbolizer:
    def __init__(self, maps, libdirs):
        self.maps = maps
        self.starts = [m[0] for m in maps]
        self.libdirs = libdirs
        self.loads, self.tables, self.names = {}, {}, {}

    def local_copy(self, path):
        for d in self.libdirs:
            p = os.path.join(d, os.path.basename(path))
            if os.path.exists(p):
                return p
        return None

    def segments(self, lib):
        if lib not in self.loads:
            out = subprocess.run(['readelf', '-lW', lib], capture_output=True, text=True).stdout
            self.loads[lib] = [(int(t[1], 16), int(t[2], 16), int(t[4], 16))
                               for t in (l.split() for l in out.splitlines()) if t and t[0] == 'LOAD']
        return self.loads[lib]

    def table(self, lib):
        if lib not in self.tables:
            entries = []
            for dynamic in ([], ['-D']):  # the full table, else the dynamic one
                out = subprocess.run(['nm', '-C', '--defined-only'] + dynamic + [lib],
                                     capture_output=True, text=True).stdout
                for line in out.splitlines():
                    t = line.split(' ', 2)
                    if len(t) == 3 and t[1] in 'TtWw':
                        entries.append((int(t[0], 16), t[2]))
                if entries:
                    break
            entries.sort()
            self.tables[lib] = ([e[0] for e in entries], [e[1] for e in entries])
        return self.tables[lib]

    def name(self, addr):
        if addr in self.names:
            return self.names[addr]
        i = bisect.bisect_right(self.starts, addr) - 1
        result = '?'
        if i >= 0 and self.maps[i][0] <= addr < self.maps[i][1]:
            lo, _, offset, path = self.maps[i]
            base = os.path.basename(path)
            result = base
            lib = self.local_copy(path)
            if lib:
                file_offset = addr - lo + offset
                vaddr = file_offset
                for seg_offset, seg_vaddr, seg_size in self.segments(lib):
                    if seg_offset <= file_offset < seg_offset + seg_size:
                        vaddr = file_offset - seg_offset + seg_vaddr
                addrs, names = self.table(lib)
                j = bisect.bisect_right(addrs, vaddr) - 1
                if j >= 0:
                    result = base.split('.so')[0] + ':' + names[j]
        self.names[addr] = result
        return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('samples')
    ap.add_argument('libdirs', nargs='*')
    ap.add_argument('--top', type=int, default=30)
    ap.add_argument('--stacks', type=int, default=0, help='also the N commonest 4-frame stacks')
    a = ap.parse_args()
    maps, samples = read_samples(a.samples)
    sym = Symbolizer(maps, a.libdirs + ['/usr/lib/x86_64-linux-gnu'])
    own, incl, stacks = collections.Counter(), collections.Counter(), collections.Counter()
    for s in samples:
        names = [sym.name(x) for x in s]
        own[names[0]] += 1
        for n in set(names):
            incl[n] += 1
        stacks[' <- '.join(n[:70] for n in names[:4])] += 1
    n = max(1, len(samples))
    print(f'{a.samples}: {len(samples)} samples')
    for title, counter, top in (('self', own, a.top), ('inclusive', incl, a.top), ('stacks', stacks, a.stacks)):
        if top <= 0:
            continue
        print(f'-- {title}')
        for name, c in counter.most_common(top):
            print(f'{100 * c / n:6.1f}%  {name[:160]}')


if __name__ == '__main__':
    main()
