/* Runs one collective description (coll_specs.h) twice with the same inputs: on host
 * buffers, blocking and not in place (the reference), and on buffers of the kind under
 * test in the mode under test; then compares the receive buffers byte for byte over the
 * part MPI defines, checks that send buffers were not written, and that the guard bytes
 * around every buffer are intact. A persistent collective is started twice, with new
 * data written into the same buffers before the second start. */
#ifndef COLL_RUN_H_INCLUDED
#define COLL_RUN_H_INCLUDED

#include "coll_specs.h"

typedef struct {
    int mode, inplace;
    MPI_Datatype base; /* host type of one element; a derived type is fine */
    MPI_Op op;         /* MPI_OP_NULL where the collective takes none */
    int kind;          /* this rank's buffer kind */
    MPI_Comm comm;     /* MPI_COMM_NULL: MPI_COMM_WORLD, or coll_ring for CF_NEIGHBOR */
    uint64_t seed;
} coll_opts;

static inline size_t coll_max(size_t a, size_t b) { return a > b ? a : b; }

/* MPICH 4.0.2's own persistent Gather, Scatter and Allgather are wrong by themselves:
 * stale data or nothing at the second start, the root's own block missing, a crash with a
 * derived type, later collectives that hang (pmodels/mpich#7078, #6423, #7550). MPI-ACC
 * issues MPICH's nonblocking collective at each start instead; runs straight to MPICH
 * (COLL_PMPI=1) leave them out, saying why. */
static const char *coll_mpich_persistent_defect(int spec, int kind, int mode) {
    (void)kind;
    if (!coll_use_pmpi || mode != CM_PERSISTENT) return NULL;
    if (spec == S_GATHER || spec == S_SCATTER || spec == S_ALLGATHER)
        return "MPICH 4.0.2's own persistent gather, scatter and allgather are wrong "
               "(pmodels/mpich#7078, #6423, #7550)";
    return NULL;
}

static void coll_run(const coll_spec *sp, const coll_opts *o) {
    char what[200];
    snprintf(what, sizeof what, "%s %s%s on %s buffers at rank %d", sp->name, coll_mode_names[o->mode],
             o->inplace ? " in place" : "", coll_kind_names[o->kind], ME);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(o->base, &lb, &ext);
    const int ip = o->inplace;
    const size_t e = (size_t)ext, sn = sp->scount(ip), sb = sn * e, rb = sp->rcount(ip) * e, rb_ref = sp->rcount(0) * e;
    const long at = sp->inplace_at();
    const int fills = (sp->flags & CF_FILLS_R) && at >= 0;
    const int send_in_place = ip && at >= 0, recv_in_place = ip && at == CI_RECV_IN_PLACE;
    const long outn = sp->out(ip);
    const size_t ob = outn < 0 ? rb_ref : (size_t)outn * e;
    MPI_Comm comm = o->comm != MPI_COMM_NULL ? o->comm : (sp->flags & CF_NEIGHBOR) ? coll_ring : W;
    MPI_Datatype t = coll_type(o->kind, o->base);
    cbuf S = cbuf_new(o->kind, sb), R = cbuf_new(o->kind, rb);
    unsigned char *simg = (unsigned char *)p2p_alloc(sb), *rimg = (unsigned char *)p2p_alloc(coll_max(rb, rb_ref));
    unsigned char *ref_s = (unsigned char *)p2p_alloc(sb), *ref_r = (unsigned char *)p2p_alloc(rb_ref);
    MPI_Request q = MPI_REQUEST_NULL;
    const int rounds = o->mode == CM_PERSISTENT ? 2 : 1;
    for (int round = 0; round < rounds; ++round) {
        const uint64_t seed = o->seed * 1000003u + (uint64_t)round * 7919u + (uint64_t)ME * 104729u;
        coll_fill(simg, sn, o->base, o->op, seed);
        mt_fill(rimg, coll_max(rb, rb_ref), seed ^ 0x5555);

        /* The receive buffer as the call under test finds it (its own data in place),
         * also the reference's: bytes MPI leaves alone (gaps, holes) are then alike. */
        if (send_in_place || fills) memcpy(rimg + at * e, simg, sb);
        /* the reference: host buffers, blocking, not in place */
        memcpy(ref_s, simg, sb);
        memcpy(ref_r, rimg, rb_ref);
        coll_args ra = {CM_BLOCKING, ref_s, ref_r, o->base, o->base, o->op, comm, NULL};
        char rwhat[240];
        snprintf(rwhat, sizeof rwhat, "reference for %s", what);
        if (!coll_ok(sp->call(&ra), rwhat)) break;

        /* the same inputs in the buffers under test */
        cbuf_put(&S, simg, sb);
        cbuf_put(&R, rimg, rb);
        if (round == 0) {
            coll_args a = {o->mode,
                           send_in_place ? MPI_IN_PLACE : cbuf_arg(&S),
                           recv_in_place ? MPI_IN_PLACE : cbuf_arg(&R),
                           t,
                           t,
                           o->op,
                           comm,
                           &q};
            /* Ranks agree before anything starts: a rank with nothing significant (an
             * intercommunicator's MPI_PROC_NULL) may succeed where the others fail. */
            int bad = !coll_ok(sp->call(&a), what), any = 0;
            MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, W);
            if (any) {
                MT_CHECK(bad, "%s: the call failed at another rank", what);
                if (!bad && o->mode == CM_NONBLOCKING) coll_wait(&q, coll_use_pmpi, what);
                break;
            }
        }
        if (o->mode == CM_PERSISTENT && !coll_ok(coll_use_pmpi ? PMPI_Start(&q) : MPI_Start(&q), what)) break;
        if (o->mode != CM_BLOCKING && !coll_wait(&q, coll_use_pmpi, what)) break;

        char cwhat[240];
        snprintf(cwhat, sizeof cwhat, "%s, round %d, receive buffer", what, round + 1);
        unsigned char *got = cbuf_get(&R, cwhat);
        coll_check_same(got, ref_r, ob, e, cwhat);
        free(got);
        snprintf(cwhat, sizeof cwhat, "%s, round %d, send buffer", what, round + 1);
        got = cbuf_get(&S, cwhat);
        if (!send_in_place && !fills) coll_check_same(got, simg, sb, e, cwhat);
        free(got);
    }
    if (q != MPI_REQUEST_NULL) (void)(coll_use_pmpi ? PMPI_Request_free(&q) : MPI_Request_free(&q));
    free(simg);
    free(rimg);
    free(ref_s);
    free(ref_r);
    cbuf_free(&S);
    cbuf_free(&R);
    coll_type_free(o->kind, &t);
}

/* The element type and op a description runs with in the main matrix. */
static inline MPI_Datatype coll_default_type(const coll_spec *sp) {
    return sp == &coll_specs[S_REDUCE_SCATTER] || sp == &coll_specs[S_SCAN] ? MPI_DOUBLE : MPI_INT;
}

/* One description in one mode on this program's kind: not in place, then in place where
 * MPI allows it. */
typedef struct {
    int spec, mode, kind;
} coll_matrix_arg;

static void coll_matrix_case(const void *p) {
    const coll_matrix_arg *m = (const coll_matrix_arg *)p;
    const coll_spec *sp = &coll_specs[m->spec];
    MPI_Op op = sp->flags & CF_REDUCE ? MPI_SUM : MPI_OP_NULL;
    for (int ip = 0; ip <= ((sp->flags & CF_INPLACE) ? 1 : 0); ++ip) {
        coll_opts o = {m->mode,
                       ip,
                       coll_default_type(sp),
                       op,
                       m->kind,
                       MPI_COMM_NULL,
                       (uint64_t)(100 * m->spec + 10 * m->mode + ip)};
        coll_run(sp, &o);
    }
    /* A barrier has no buffer: it runs between two broadcasts on this kind, so that a
     * barrier that overtakes or loses device traffic shows. */
    if (m->spec == S_BARRIER) {
        coll_opts o = {m->mode, 0, MPI_INT, MPI_OP_NULL, m->kind, MPI_COMM_NULL, 7};
        coll_run(&coll_specs[S_BCAST], &o);
        o.seed = 8;
        coll_run(&coll_specs[S_BARRIER], &o);
        coll_run(&coll_specs[S_BCAST], &o);
    }
}

/* ------------------------------------------------------------------ reductions */

/* a o b = a + b + 1: commutative and associative, and unlike any predefined op. */
static void coll_plus_one(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    for (int i = 0; i < *len; ++i) ((int *)inout)[i] += ((int *)in)[i] + 1;
}

typedef struct {
    const char *name;
    MPI_Op op; /* MPI_OP_NULL: the user-defined op, created in main */
    MPI_Datatype type;
    int kind;
} coll_op_arg;
static MPI_Op coll_user_op = MPI_OP_NULL;

/* One (op, type) pair through every reducing collective, in a mix of modes and in place. */
static void coll_op_case(const void *p) {
    const coll_op_arg *a = (const coll_op_arg *)p;
    MPI_Op op = a->op == MPI_OP_NULL ? coll_user_op : a->op;
    static const struct {
        int spec, mode, inplace;
    } runs[] = {
        {S_ALLREDUCE, CM_BLOCKING, 0}, {S_ALLREDUCE, CM_NONBLOCKING, 1},   {S_REDUCE, CM_BLOCKING, 0},
        {S_REDUCE, CM_PERSISTENT, 1},  {S_REDUCE_SCATTER, CM_BLOCKING, 0}, {S_REDUCE_SCATTER_BLOCK, CM_NONBLOCKING, 0},
        {S_SCAN, CM_PERSISTENT, 0},    {S_EXSCAN, CM_BLOCKING, 1},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; ++i) {
        coll_opts o = {runs[i].mode, runs[i].inplace, a->type, op, a->kind, MPI_COMM_NULL, 5000 + i};
        coll_run(&coll_specs[runs[i].spec], &o);
    }
}

#endif
