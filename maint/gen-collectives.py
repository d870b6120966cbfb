#!/usr/bin/env python3
"""Writes src/binding/collective_wrappers.inc: the MPI_* collective entry points, from the
prototypes in MPICH's mpi_proto.h (MPICH's own bindings are generated the same way).

    python3 maint/gen-collectives.py /usr/include/x86_64-linux-gnu/mpich/mpi_proto.h \
        > src/binding/collective_wrappers.inc && clang-format -i src/binding/collective_wrappers.inc

Every blocking, nonblocking (MPI_I...), persistent (..._init) and large-count (..._c)
collective, and MPI_Reduce_local. Each describes the buffers significant at the calling
rank (coll/describe.h); one with a device buffer among them, one called while an earlier
collective on its communicator still waits for its turn (coll/issue_order.h), and every
persistent one go through a staged collective (coll/staged.h) with MPICH's nonblocking
call on host substitutes. The rest go to MPICH as they are, a blocking one as its
nonblocking form plus MPI-ACC progress (finish()). The family of a collective says which
buffers matter where."""
import re
import sys

BASES = {
    'Barrier': 'none',
    'Bcast': 'bcast',
    'Reduce': 'reduce', 'Gather': 'gather', 'Gatherv': 'gather',
    'Scatter': 'scatter', 'Scatterv': 'scatter',
    'Allreduce': 'allreduce', 'Scan': 'allreduce', 'Exscan': 'allreduce',
    'Allgather': 'allgather', 'Allgatherv': 'allgather',
    'Neighbor_allgather': 'allgather', 'Neighbor_allgatherv': 'allgather',
    'Alltoall': 'alltoall', 'Alltoallv': 'alltoall', 'Alltoallw': 'alltoall',
    'Neighbor_alltoall': 'alltoall', 'Neighbor_alltoallv': 'alltoall', 'Neighbor_alltoallw': 'alltoall',
    'Reduce_scatter': 'reduce_scatter', 'Reduce_scatter_block': 'reduce_scatter_block',
    'Reduce_local': 'local',
}

# Arguments MPICH is handed in place of the user's, in the issue function: the host
# scratch of a staged buffer, the kept duplicate of a type.
SUBSTITUTE = {
    'buffer': 'c_.host(0)', 'sendbuf': 'c_.host(0)', 'recvbuf': 'c_.host(1)',
    'datatype': 'c_.type(datatype)', 'sendtype': 'c_.type(sendtype)', 'recvtype': 'c_.type(recvtype)',
    'sendtypes': 'c_.types(0)', 'recvtypes': 'c_.types(1)', 'request': 'r_',
}

# Count and displacement arrays a nonblocking call may let go of once it returns.
ARRAYS = {'sendcounts', 'recvcounts', 'displs', 'sdispls', 'rdispls'}


def prototypes(text):
    text = re.sub(r'MPICH_ATTR_POINTER_WITH_TYPE_TAG\([^)]*\)', '', text).replace('MPICH_API_PUBLIC', '')
    for m in re.finditer(r'^int (MPI_\w+)\(([^;]*?)\)\s*;', text, re.M | re.S):
        yield m.group(1), ' '.join(m.group(2).split())


def split(name):
    """MPI_Ibcast_init_c -> ('Bcast', nonblocking, init, large) or None."""
    rest = name[4:]
    large = rest.endswith('_c')
    if large:
        rest = rest[:-2]
    init = rest.endswith('_init')
    if init:
        rest = rest[:-5]
    nonblocking = False
    if rest not in BASES and rest.startswith('I') and rest[1:].capitalize() in {b.capitalize() for b in BASES}:
        nonblocking, rest = True, rest[1].upper() + rest[2:]
    if rest not in BASES:
        return None
    return rest, nonblocking, init, large


def args_of(params):
    names = []
    for p in params.split(','):
        p = p.strip().rstrip('[]').rstrip()
        names.append(re.split(r'[\s*]+', p)[-1].rstrip('[]'))
    return names


def describe(base, family, a):
    """The describe_* call (coll/describe.h) for a collective's buffers, or None."""
    nb = 'true' if base.startswith('Neighbor') else 'false'
    none = 'kNoCounts, kNoCounts'
    if family == 'none':
        return None
    if family == 'bcast':
        return 'describe_bcast(c, buffer, count, datatype, root, &why_)'
    if family == 'reduce':
        return 'describe_reduce(c, sendbuf, recvbuf, count, datatype, root, &why_)'
    if family == 'allreduce':
        prefix = {'Allreduce': 'NONE', 'Scan': 'INCLUSIVE', 'Exscan': 'EXCLUSIVE'}[base]
        return 'describe_allreduce(c, sendbuf, recvbuf, count, datatype, Prefix::%s, &why_)' % prefix
    if family == 'reduce_scatter':
        return 'describe_reduce_scatter(c, sendbuf, recvbuf, recvcounts, datatype, &why_)'
    if family == 'reduce_scatter_block':
        return 'describe_reduce_scatter_block(c, sendbuf, recvbuf, recvcount, datatype, &why_)'
    if family == 'gather':
        rc = 'recvcount, %s' % none if 'recvcount' in a else '0, recvcounts, displs'
        return 'describe_gather(c, sendbuf, sendcount, sendtype, recvbuf, %s, recvtype, root, &why_)' % rc
    if family == 'scatter':
        sc = 'sendcount, %s' % none if 'sendcount' in a else '0, sendcounts, displs'
        return 'describe_scatter(c, sendbuf, %s, sendtype, recvbuf, recvcount, recvtype, root, &why_)' % sc
    if family == 'allgather':
        rc = 'recvcount, %s' % none if 'recvcount' in a else '0, recvcounts, displs'
        return 'describe_allgather(c, sendbuf, sendcount, sendtype, recvbuf, %s, recvtype, %s, &why_)' % (rc, nb)
    if family == 'alltoall':
        if 'sendtypes' in a:
            return ('describe_alltoall(c, sendbuf, 0, sendcounts, sdispls, MPI_DATATYPE_NULL, sendtypes, recvbuf, 0, '
                    'recvcounts, rdispls, MPI_DATATYPE_NULL, recvtypes, %s, &why_)' % nb)
        if 'sendcounts' in a:
            return ('describe_alltoall(c, sendbuf, 0, sendcounts, sdispls, sendtype, nullptr, recvbuf, 0, recvcounts, '
                    'rdispls, recvtype, nullptr, %s, &why_)' % nb)
        return ('describe_alltoall(c, sendbuf, sendcount, %s, sendtype, nullptr, recvbuf, recvcount, %s, recvtype, '
                'nullptr, %s, &why_)' % (none, none, nb))
    raise ValueError(family)


# The blocking collectives MPI-ACC's own device algorithms serve, and their call.
DEVICE_ALGORITHMS = {
    'Allreduce': 'device_allreduce(sendbuf, recvbuf, count, datatype, op, comm, call, &rc_)',
    'Bcast': 'device_bcast(buffer, count, datatype, root, comm, call, &rc_)',
    'Allgather': 'device_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, call, &rc_)',
    'Reduce_scatter_block': 'device_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, call, &rc_)',
}


def main():
    out = ['// Generated by maint/gen-collectives.py from MPICH\'s mpi_proto.h: edit the generator.', '']
    for name, params in prototypes(open(sys.argv[1]).read()):
        parts = split(name)
        if not parts:
            continue
        base, nonblocking, init, large = parts
        family = BASES[base]
        a = args_of(params)
        call = ', '.join(a)
        out.append('int %s(%s) {' % (name, params))
        if family == 'local':
            # Device buffers are reduced on their device; host buffers go to MPICH.
            out.append('    MPI_Comm comm = MPI_COMM_WORLD;  // errors without a communicator, as MPICH\'s own')
            out.append('    MPIACC_COLLECTIVE_ENTRY("%s", P%s(%s));' % (name, name, call))
            out.append('    int rc;')
            out.append('    if (check && reduce_on_device(inbuf, inoutbuf, count, datatype, op, comm, call, &rc)) return rc;')
            out.append('    return P%s(%s);' % (name, call))
            out.append('}')
            out.append('')
            continue
        blocking = not nonblocking and not init
        out.append('    MPIACC_COLLECTIVE_ENTRY("%s", P%s(%s));' % (name, name, call))
        if blocking and base in DEVICE_ALGORITHMS:
            # Large calls on CUDA buffers, when every rank agrees (coll/device_algorithms.h).
            out.append('    if (ctx.device_collectives) {')
            out.append('        int rc_;')
            out.append('        if (%s) return rc_;' % DEVICE_ALGORITHMS[base])
            out.append('    }')
        # MPICH's nonblocking form (blocking and nonblocking calls), or the persistent
        # initialisation, on the staged call's substitutes.
        # MPICH's nonblocking form for every form: a persistent collective issues it at
        # each start (coll/staged.h says why not MPICH's own persistent collectives).
        issue = 'MPI_I%s%s' % (base[0].lower() + base[1:], '_c' if large else '') if not nonblocking else name
        issue_args = [SUBSTITUTE.get(x, x) for x in a if x != 'info'] + (['r_'] if blocking else [])
        body = 'return P%s(%s);' % (issue, ', '.join(issue_args))
        lam = '[=](const CollCall &%s, MPI_Request *r_) { %s }' % ('c_' if 'c_.' in body else '', body)
        form = 'PERSISTENT' if init else 'BLOCKING' if blocking else 'NONBLOCKING'
        req = 'request' if not blocking else 'nullptr'
        d = describe(base, family, a)
        arrays = [x for x in a if x in ARRAYS]
        if init:
            # Every persistent collective, host data or not, issues MPICH's nonblocking
            # form at each start, in its turn (coll/staged.h).
            out.append('    CollCall c(call, comm);')
            if d:
                out.append('    MPIACC_DESCRIBE(%s);' % d)
            for x in arrays:
                out.append('    %s = c.kept(%s);' % (x, x))
            out.append('    return run_staged(std::move(c), %s, StagedCollective::Form::PERSISTENT, request);' % lam)
            out.append('}')
            out.append('')
            continue
        if not d:
            # No buffers: only the turn to wait for.
            out.append('    if (collectives_queued_on(comm))')
            out.append('        return run_staged(CollCall(call, comm), %s, StagedCollective::Form::%s, %s);' % (lam, form, req))
        else:
            bufs = ', '.join(x for x in a if x in ('buffer', 'sendbuf', 'recvbuf'))
            out.append('    if ((check && !plain_host_args(ctx, %s)) || collectives_queued()) {' % bufs)
            out.append('        CollCall c(call, comm);')
            out.append('        MPIACC_DESCRIBE(%s);' % d)
            cond = 'c.staged() || collectives_queued_on(comm)'
            if nonblocking and arrays:
                # The issue function reads the call's own copies (CollCall::kept).
                out.append('        if (%s) {' % cond)
                for x in arrays:
                    out.append('            %s = c.kept(%s);' % (x, x))
                out.append('            return run_staged(std::move(c), %s, StagedCollective::Form::%s, %s);' % (lam, form, req))
                out.append('        }')
            else:
                out.append('        if (%s) return run_staged(std::move(c), %s, StagedCollective::Form::%s, %s);' % (cond, lam, form, req))
            out.append('    }')
        if blocking:
            out.append('    MPI_Request r;')
            out.append('    return finish(P%s(%s, &r), &r);' % (issue, call))
        else:
            out.append('    return P%s(%s);' % (name, call))
        out.append('}')
        out.append('')
    sys.stdout.write('\n'.join(out))


main()
