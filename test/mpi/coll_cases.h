/* The cases beyond the matrix of collective x mode: buffer kinds mixed across ranks, a
 * derived datatype, intercommunicators, large-count calls, a 1 MiB message, a cl_mem
 * region that does not fit its buffer, and the memory cl_mem buffers are staged through. */
#ifndef COLL_CASES_H_INCLUDED
#define COLL_CASES_H_INCLUDED

#include "coll_run.h"

/* Set where every rank passed device buffers to one MPI_Bcast and some rank got an error:
 * then ranks of different kinds would not agree whether a collective runs, and the mixed
 * cases fail by name instead of hanging. */
static int coll_refused;
static char coll_refused_why[MPI_MAX_ERROR_STRING + 1];

static void coll_probe(int kind) {
    cbuf b = cbuf_new(kind, sizeof(int));
    MPI_Datatype t = coll_type(kind, MPI_INT);
    int rc = MPI_Bcast(cbuf_arg(&b), 1, t, 0, W), bad = rc != MPI_SUCCESS, any = 0, len = 0;
    if (bad) MPI_Error_string(rc, coll_refused_why, &len);
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, W);
    coll_refused = any;
    if (any && !bad) snprintf(coll_refused_why, sizeof coll_refused_why, "refused at another rank");
    coll_type_free(kind, &t);
    cbuf_free(&b);
}

/* ------------------------------------------------------------------ mixed kinds */

typedef struct {
    int dev_kind, even_device; /* even_device: even ranks device, odd host; else a host root */
} coll_mixed_arg;

static void coll_mixed_case(const void *p) {
    const coll_mixed_arg *m = (const coll_mixed_arg *)p;
    if (coll_refused) {
        MT_CHECK(0, "not run (ranks would disagree): a collective on device buffers at every rank failed: %s",
                 coll_refused_why);
        return;
    }
    static const int host_root[] = {S_BCAST, S_REDUCE, S_GATHER, S_GATHERV, S_SCATTER, S_SCATTERV};
    static const int even_odd[] = {S_ALLREDUCE, S_ALLGATHER, S_ALLGATHERV,           S_ALLTOALL,
                                   S_ALLTOALLV, S_ALLTOALLW, S_REDUCE_SCATTER_BLOCK, S_BCAST,
                                   S_NALLTOALL};
    const int *specs = m->even_device ? even_odd : host_root;
    int n = m->even_device ? (int)(sizeof even_odd / sizeof *even_odd) : (int)(sizeof host_root / sizeof *host_root);
    int kind = m->even_device ? (ME % 2 == 0 ? m->dev_kind : CK_HOST) : (ME == COLL_ROOT ? CK_HOST : m->dev_kind);
    for (int i = 0; i < n; ++i) {
        const coll_spec *sp = &coll_specs[specs[i]];
        for (int mode = 0; mode < 3; ++mode)
            for (int ip = 0; ip <= ((sp->flags & CF_INPLACE) ? 1 : 0); ++ip) {
                coll_opts o = {mode,
                               ip,
                               coll_default_type(sp),
                               sp->flags & CF_REDUCE ? MPI_SUM : MPI_OP_NULL,
                               kind,
                               MPI_COMM_NULL,
                               (uint64_t)(9000 + 10 * specs[i] + mode)};
                coll_run(sp, &o);
            }
    }
}

/* ------------------------------------------------------------------ a derived datatype */

/* Three blocks of two ints, four ints apart: holes inside each element that nothing may
 * write, and an extent that is not a multiple of the block. */
static void coll_derived_case(const void *p) {
    int kind = *(const int *)p;
    MPI_Datatype v;
    MPI_Type_vector(3, 2, 4, MPI_INT, &v);
    MPI_Type_commit(&v);
    for (int mode = 0; mode < 3; ++mode) {
        /* MPICH 4.0.2's own persistent Allgather on this type crashes at its second start. */
        for (int ip = 0; ip <= 1 && !coll_mpich_persistent_defect(S_ALLGATHER, kind, mode); ++ip) {
            coll_opts o = {mode, ip, v, MPI_OP_NULL, kind, MPI_COMM_NULL, (uint64_t)(300 + 10 * mode + ip)};
            coll_run(&coll_specs[S_ALLGATHER], &o);
        }
        coll_opts o = {mode, 0, v, MPI_OP_NULL, kind, MPI_COMM_NULL, (uint64_t)(400 + mode)};
        coll_run(&coll_specs[S_BCAST], &o);
    }
    MPI_Type_free(&v);
}

/* ------------------------------------------------------------------ intercommunicators */

/* Even ranks form one group, odd ranks the other; world rank 0 (rank 0 of the even
 * group) is the broadcast's root. */
static MPI_Comm coll_inter = MPI_COMM_NULL;

static size_t ic_bcast_s(int ip) { return (void)ip, ME == 0 ? coll_n : 0; }
static long ic_bcast_at(void) { return ME == 0 ? 0 : CI_SENDS; }
static int ic_bcast_call(const coll_args *a) {
    int root = ME == 0 ? MPI_ROOT : ME % 2 == 0 ? MPI_PROC_NULL : 0;
    return COLL_CALL3(a, Bcast, Ibcast, a->r, (int)coll_n, a->rt, root, a->comm);
}
static const coll_spec coll_ic_specs[2] = {
    {"intercommunicator bcast", CF_FILLS_R, ic_bcast_s, c_n, ic_bcast_at, out_all, ic_bcast_call},
    {"intercommunicator allreduce", CF_REDUCE, c_n, c_n, at_zero, out_all, allreduce_call},
};

static void coll_inter_case(const void *p) {
    const int *k = (const int *)p; /* {kind, spec} */
    /* The root's group beside the root (MPI_PROC_NULL) passes nothing significant, so it
     * would go ahead where the others fail. */
    if (k[1] == 0 && coll_refused) {
        MT_CHECK(0, "not run (ranks would disagree): a collective on device buffers at every rank failed: %s",
                 coll_refused_why);
        return;
    }
    for (int mode = 0; mode < 3; ++mode) {
        coll_opts o = {
            mode, 0, MPI_INT, k[1] ? MPI_SUM : MPI_OP_NULL, k[0], coll_inter, (uint64_t)(500 + 10 * k[1] + mode)};
        coll_run(&coll_ic_specs[k[1]], &o);
    }
}

/* ------------------------------------------------------------------ large counts */

static int bcast_c_call(const coll_args *a) {
    return COLL_CALL3C(a, Bcast, Ibcast, a->r, (MPI_Count)coll_n, a->rt, COLL_ROOT, a->comm);
}
static int allreduce_c_call(const coll_args *a) {
    return COLL_CALL3C(a, Allreduce, Iallreduce, a->s, a->r, (MPI_Count)coll_n, a->rt, a->op, a->comm);
}
static int allgather_c_call(const coll_args *a) {
    MPI_Count n = (MPI_Count)coll_n;
    return COLL_CALL3C(a, Allgather, Iallgather, a->s, n, a->st, a->r, n, a->rt, a->comm);
}
static const coll_spec coll_c_specs[3] = {
    {"bcast_c", CF_FILLS_R, bcast_s, c_n, at_root, out_all, bcast_c_call},
    {"allreduce_c", CF_REDUCE | CF_INPLACE, c_n, c_n, at_zero, out_all, allreduce_c_call},
    {"allgather_c", CF_INPLACE, c_n, c_np_n, allgather_at, out_all, allgather_c_call},
};

static void coll_large_count_case(const void *p) {
    int kind = *(const int *)p;
    for (int s = 0; s < 3; ++s)
        for (int mode = 0; mode < 3; ++mode)
            for (int ip = 0; ip <= ((coll_c_specs[s].flags & CF_INPLACE) ? 1 : 0); ++ip) {
                if (s == 2 && coll_mpich_persistent_defect(S_ALLGATHER, kind, mode)) break;
                coll_opts o = {mode,
                               ip,
                               s == 1 ? MPI_DOUBLE : MPI_INT,
                               s == 1 ? MPI_SUM : MPI_OP_NULL,
                               kind,
                               MPI_COMM_NULL,
                               (uint64_t)(600 + 10 * s + mode)};
                coll_run(&coll_c_specs[s], &o);
            }
}

/* 1 MiB per buffer: several chunks of any staging or pipeline. */
static void coll_mib_case(const void *p) {
    int kind = *(const int *)p;
    size_t saved = coll_n;
    coll_n = ((size_t)1 << 20) / sizeof(int);
    coll_opts o = {CM_BLOCKING, 0, MPI_INT, MPI_SUM, kind, MPI_COMM_NULL, 700};
    coll_run(&coll_specs[S_ALLREDUCE], &o);
    o.mode = CM_NONBLOCKING;
    o.op = MPI_OP_NULL;
    coll_run(&coll_specs[S_BCAST], &o);
    coll_n = saved;
}

/* ------------------------------------------------------------------ bad input */

/* rc is an error of a class that says what is wrong with the buffer, and its string names
 * the call and the offset. */
static void coll_expect_bad_region(int rc, const char *call) {
    int cls = rc == MPI_SUCCESS ? MPI_SUCCESS : p2p_class(rc);
    char s[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, s, &len);
    MT_CHECK(cls == MPI_ERR_COUNT || cls == MPI_ERR_ARG || cls == MPI_ERR_BUFFER,
             "%s on a region past the end of its cl_mem: class %d, expected MPI_ERR_COUNT, MPI_ERR_ARG or "
             "MPI_ERR_BUFFER: \"%s\"",
             call, cls, s);
    if (rc == MPI_SUCCESS) return;
    MT_CHECK(strstr(s, call) != NULL, "the error string does not name %s: \"%s\"", call, s);
    MT_CHECK(strstr(s, "MPIX_ACC_OFFSET") != NULL, "%s: the error string does not name MPIX_ACC_OFFSET: \"%s\"", call,
             s);
    MT_CHECK(p2p_plain_words(s), "%s: the error string has MPICH's or internal words: \"%s\"", call, s);
}

/* Every rank passes a cl_mem of 256 bytes with 100 bytes at MPIX_ACC_OFFSET 200: each
 * rank finds the error itself, so none waits for another. */
static void coll_bad_region_case(const void *p) {
    (void)p;
    cl_mem m = ocl_alloc(&coll_ocl, 256), m2 = ocl_alloc(&coll_ocl, 256);
    MPI_Datatype t;
    MPI_Type_dup(MPI_INT, &t);
    MPI_Type_set_attr(t, MPIX_ACC_BUF_TYPE, (void *)(long)MPIX_ACC_BUF_OPENCL);
    MPI_Type_set_attr(t, MPIX_ACC_COMMAND_QUEUE, (void *)coll_ocl.queue);
    MPI_Type_set_attr(t, MPIX_ACC_OFFSET, (void *)(long)200);
    MPI_Request q = MPI_REQUEST_NULL;
    coll_expect_bad_region(MPI_Bcast(m, 25, t, COLL_ROOT, W), "MPI_Bcast");
    coll_expect_bad_region(MPI_Iallreduce(MPI_IN_PLACE, m, 25, t, MPI_SUM, W, &q), "MPI_Iallreduce");
    MT_CHECK(q == MPI_REQUEST_NULL, "a failed MPI_Iallreduce set its request");
    coll_expect_bad_region(MPI_Allgather_init(m, 25, t, m2, 25, t, W, MPI_INFO_NULL, &q), "MPI_Allgather_init");
    MT_CHECK(q == MPI_REQUEST_NULL, "a failed MPI_Allgather_init set its request");
    MPI_Type_free(&t);
    clReleaseMemObject(m);
    clReleaseMemObject(m2);
    /* the next collectives on good buffers of the same kind work */
    coll_opts o = {CM_BLOCKING, 0, MPI_INT, MPI_SUM, CK_OPENCL, MPI_COMM_NULL, 800};
    coll_run(&coll_specs[S_ALLREDUCE], &o);
    o.mode = CM_NONBLOCKING;
    coll_run(&coll_specs[S_ALLREDUCE], &o);
}

/* ------------------------------------------------------------------ scratch memory */

/* send[i] = rank + 1 + i % 7 summed over the ranks. */
static void coll_scratch_check_sum(const cbuf *b, int n, const char *what) {
    int *got = (int *)cbuf_get(b, what);
    int bad = -1;
    for (int i = 0; i < n && bad < 0; ++i)
        if (got[i] != mt_size * (mt_size + 1) / 2 + mt_size * (i % 7)) bad = i;
    MT_CHECK(bad < 0, "%s: element %d is %d, expected %d", what, bad, bad < 0 ? 0 : got[bad],
             mt_size * (mt_size + 1) / 2 + mt_size * (bad % 7));
    free(got);
}

/* Staged collectives on cl_mem buffers go through pinned memory of the buffer's context
 * (OpenCL's own, as a user staging by hand would take), not pageable memory: each
 * significant buffer's scratch is lent by the OpenCL component, the same memory serves
 * the next call, and a persistent collective takes its scratch once. */
static void coll_opencl_scratch_case(const void *p) {
    (void)p;
    enum { N = 1000 };
    int values[N];
    for (int i = 0; i < N; ++i) values[i] = mt_rank + 1 + i % 7;
    cbuf send = cbuf_new(CK_OPENCL, sizeof values), recv = cbuf_new(CK_OPENCL, sizeof values);
    cbuf_put(&send, values, sizeof values);
    MPI_Datatype t = coll_type(CK_OPENCL, MPI_INT);
    long long lent0 = mpiacc_counter_value("coll.scratch_lent");
    coll_ok(MPI_Allreduce(cbuf_arg(&send), cbuf_arg(&recv), N, t, MPI_SUM, W), "first MPI_Allreduce");
    coll_scratch_check_sum(&recv, N, "first MPI_Allreduce");
    long long lent1 = mpiacc_counter_value("coll.scratch_lent");
    MT_CHECK(lent1 - lent0 == 2, "the first MPI_Allreduce took %lld lent scratches, expected 2 (send and receive)",
             lent1 - lent0);
    long long pinned1 = mpiacc_counter_value("opencl.pinned.alloc");
    cbuf_put(&recv, values, sizeof values); /* stale data the call must overwrite */
    coll_ok(MPI_Allreduce(cbuf_arg(&send), cbuf_arg(&recv), N, t, MPI_SUM, W), "second MPI_Allreduce");
    coll_scratch_check_sum(&recv, N, "second MPI_Allreduce");
    MT_CHECK(mpiacc_counter_value("coll.scratch_lent") - lent1 == 2, "the second MPI_Allreduce took %lld, expected 2",
             mpiacc_counter_value("coll.scratch_lent") - lent1);
    MT_CHECK(mpiacc_counter_value("opencl.pinned.alloc") == pinned1,
             "the second MPI_Allreduce allocated %lld pinned buffers, expected to reuse the first one's",
             mpiacc_counter_value("opencl.pinned.alloc") - pinned1);

    /* Persistent: one scratch at init, kept over the starts. */
    MPI_Request q = MPI_REQUEST_NULL;
    long long lent2 = mpiacc_counter_value("coll.scratch_lent");
    if (coll_ok(MPI_Bcast_init(cbuf_arg(&send), N, t, COLL_ROOT, W, MPI_INFO_NULL, &q), "MPI_Bcast_init")) {
        MT_CHECK(mpiacc_counter_value("coll.scratch_lent") - lent2 == 1, "MPI_Bcast_init took %lld, expected 1",
                 mpiacc_counter_value("coll.scratch_lent") - lent2);
        for (int round = 0; round < 2; ++round) {
            int mine[N];
            for (int i = 0; i < N; ++i) mine[i] = mt_rank == COLL_ROOT ? 1000 * round + i : -1;
            cbuf_put(&send, mine, sizeof mine);
            coll_ok(MPI_Start(&q), "MPI_Start");
            coll_wait(&q, 0, "MPI_Bcast_init's request");
            int *got = (int *)cbuf_get(&send, "persistent MPI_Bcast");
            int bad = -1;
            for (int i = 0; i < N && bad < 0; ++i)
                if (got[i] != 1000 * round + i) bad = i;
            MT_CHECK(bad < 0, "start %d: element %d is %d, expected %d", round + 1, bad, bad < 0 ? 0 : got[bad],
                     1000 * round + bad);
            free(got);
        }
        MT_CHECK(mpiacc_counter_value("coll.scratch_lent") - lent2 == 1,
                 "two starts of MPI_Bcast_init took %lld scratches in all, expected 1",
                 mpiacc_counter_value("coll.scratch_lent") - lent2);
        MPI_Request_free(&q);
    }
    coll_type_free(CK_OPENCL, &t);
    cbuf_free(&send);
    cbuf_free(&recv);
}

#endif
