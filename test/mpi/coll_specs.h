/* Every collective of MPI as one description: how many elements each rank sends and
 * receives, where its own contribution sits when it is called in place, which part of the
 * receive buffer MPI defines afterwards, and the call in its blocking, nonblocking and
 * persistent form. coll_run (coll_run.h) runs a description on buffers of one kind and
 * on host buffers, and compares. Counts differ from rank to rank where the collective
 * allows it, and the receive layouts of the "v" and "w" forms leave gaps that nothing
 * may write. */
#ifndef COLL_SPECS_H_INCLUDED
#define COLL_SPECS_H_INCLUDED

#include "coll_util.h"

enum { CM_BLOCKING = 0, CM_NONBLOCKING = 1, CM_PERSISTENT = 2 };
static const char *const coll_mode_names[] = {"blocking", "nonblocking", "persistent"};

/* Elements per block: a few hundred bytes. coll_run's 1 MiB case raises it. */
static size_t coll_n = 75;
/* A periodic 1-D Cartesian communicator over MPI_COMM_WORLD (neighbourhood collectives):
 * neighbour 0 is rank - 1, neighbour 1 is rank + 1. */
static MPI_Comm coll_ring = MPI_COMM_NULL;
/* The root of the rooted collectives: not rank 0, so that rank order is not assumed. */
#define COLL_ROOT (mt_size > 1 ? 1 : 0)
#define ME mt_rank
#define NP mt_size

typedef struct {
    int mode;
    void *s, *r; /* MPI_IN_PLACE where the rank calls in place */
    MPI_Datatype st, rt;
    MPI_Op op;
    MPI_Comm comm;
    MPI_Request *req;
} coll_args;

enum {
    CF_REDUCE = 1,   /* takes an op */
    CF_INPLACE = 2,  /* MPI allows MPI_IN_PLACE */
    CF_FILLS_R = 4,  /* the root's receive buffer holds the data (Bcast): in place always */
    CF_NEIGHBOR = 8, /* runs on coll_ring */
};

/* In-place roles, from inplace_at(): where this rank's send data lies in its receive
 * buffer (elements), or one of these. */
enum { CI_SENDS = -1, CI_RECV_IN_PLACE = -2 };

typedef struct {
    const char *name;
    int flags;
    size_t (*scount)(int inplace); /* elements this rank sends */
    size_t (*rcount)(int inplace); /* elements of this rank's receive buffer */
    long (*inplace_at)(void);
    long (*out)(int inplace); /* elements of the receive buffer defined afterwards; -1: all */
    int (*call)(const coll_args *a);
} coll_spec;

/* The blocking, nonblocking or persistent form of a call (MPI_Bcast, MPI_Ibcast,
 * MPI_Bcast_init) with the same leading arguments. */
/* With coll_use_pmpi, MPICH's own entry points (PMPI_*), past MPI-ACC: coll_run asks them
 * whether a wrong answer is MPICH's. */
static int coll_use_pmpi;
#define COLL_CALL3(a, B, I, ...)                                                                             \
    (coll_use_pmpi ? ((a)->mode == CM_BLOCKING      ? PMPI_##B(__VA_ARGS__)                                  \
                      : (a)->mode == CM_NONBLOCKING ? PMPI_##I(__VA_ARGS__, (a)->req)                        \
                                                    : PMPI_##B##_init(__VA_ARGS__, MPI_INFO_NULL, (a)->req)) \
                   : ((a)->mode == CM_BLOCKING      ? MPI_##B(__VA_ARGS__)                                   \
                      : (a)->mode == CM_NONBLOCKING ? MPI_##I(__VA_ARGS__, (a)->req)                         \
                                                    : MPI_##B##_init(__VA_ARGS__, MPI_INFO_NULL, (a)->req)))

/* The same for the large-count forms (MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c). */
#define COLL_CALL3C(a, B, I, ...)                                                                              \
    (coll_use_pmpi ? ((a)->mode == CM_BLOCKING      ? PMPI_##B##_c(__VA_ARGS__)                                \
                      : (a)->mode == CM_NONBLOCKING ? PMPI_##I##_c(__VA_ARGS__, (a)->req)                      \
                                                    : PMPI_##B##_init_c(__VA_ARGS__, MPI_INFO_NULL, (a)->req)) \
                   : ((a)->mode == CM_BLOCKING      ? MPI_##B##_c(__VA_ARGS__)                                 \
                      : (a)->mode == CM_NONBLOCKING ? MPI_##I##_c(__VA_ARGS__, (a)->req)                       \
                                                    : MPI_##B##_init_c(__VA_ARGS__, MPI_INFO_NULL, (a)->req)))

/* ------------------------------------------------------------------ counts and layouts */

/* Per-rank counts of the "v" forms, and receive displacements with a 2-element gap. */
static inline int vc(int i) { return (int)coll_n + 3 * i; }
static inline int vd(int i) {
    int d = 0;
    for (int k = 0; k < i; ++k) d += vc(k) + 2;
    return d;
}
static inline size_t vspan(void) { return (size_t)vd(NP); }
static inline size_t vsum(void) {
    size_t s = 0;
    for (int k = 0; k < NP; ++k) s += (size_t)vc(k);
    return s;
}
static inline void v_arrays(int *c, int *d) {
    for (int i = 0; i < NP; ++i) c[i] = vc(i), d[i] = vd(i);
}

/* Alltoallv/w: rank i and rank j exchange ac(i, j) elements each way (symmetric, so that
 * the in-place form, which sends what the receive layout holds, is the same exchange);
 * one layout for sending and receiving, with a 1-element gap. */
static inline int ac(int i, int j) { return (int)coll_n + (i + j) % 4; }
static inline int ad(int j) {
    int d = 0;
    for (int k = 0; k < j; ++k) d += ac(ME, k) + 1;
    return d;
}
static inline size_t aspan(void) { return (size_t)ad(NP); }
static inline void a_arrays(int *c, int *d, int scale) {
    for (int j = 0; j < NP; ++j) c[j] = ac(ME, j), d[j] = ad(j) * scale;
}

/* Neighbourhood v/w forms: a rank sends A elements to rank - 1 and B to rank + 1, so it
 * receives B from rank - 1 and A from rank + 1. */
#define NA ((int)coll_n + 1)
#define NB ((int)coll_n + 2)
static inline int nc(int r) { return (int)coll_n + r % 3; } /* Neighbor_allgatherv: what rank r sends */
static inline int left(void) { return (ME + NP - 1) % NP; }
static inline int right(void) { return (ME + 1) % NP; }

static size_t c_zero(int ip) { return (void)ip, 0; }
static size_t c_n(int ip) { return (void)ip, coll_n; }
static size_t c_2n(int ip) { return (void)ip, 2 * coll_n; }
static size_t c_np_n(int ip) { return (void)ip, NP * coll_n; }
static long at_zero(void) { return 0; }
static long at_none(void) { return CI_SENDS; }
static long out_all(int ip) { return (void)ip, -1; }

/* ------------------------------------------------------------------ rooted */

static size_t bcast_s(int ip) { return (void)ip, ME == COLL_ROOT ? coll_n : 0; }
static long at_root(void) { return ME == COLL_ROOT ? 0 : CI_SENDS; }
static int bcast_call(const coll_args *a) {
    return COLL_CALL3(a, Bcast, Ibcast, a->r, (int)coll_n, a->rt, COLL_ROOT, a->comm);
}

static int reduce_call(const coll_args *a) {
    return COLL_CALL3(a, Reduce, Ireduce, a->s, a->r, (int)coll_n, a->rt, a->op, COLL_ROOT, a->comm);
}

static size_t gather_r(int ip) { return (void)ip, ME == COLL_ROOT ? NP * coll_n : 0; }
static long gather_at(void) { return ME == COLL_ROOT ? (long)(COLL_ROOT * coll_n) : CI_SENDS; }
static int gather_call(const coll_args *a) {
    return COLL_CALL3(a, Gather, Igather, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt, COLL_ROOT, a->comm);
}

static size_t gatherv_s(int ip) { return (void)ip, (size_t)vc(ME); }
static size_t gatherv_r(int ip) { return (void)ip, ME == COLL_ROOT ? vspan() : 0; }
static long gatherv_at(void) { return ME == COLL_ROOT ? vd(COLL_ROOT) : CI_SENDS; }
static int gatherv_call(const coll_args *a) {
    int c[64], d[64];
    v_arrays(c, d);
    return COLL_CALL3(a, Gatherv, Igatherv, a->s, vc(ME), a->st, a->r, c, d, a->rt, COLL_ROOT, a->comm);
}

static size_t scatter_s(int ip) { return (void)ip, ME == COLL_ROOT ? NP * coll_n : 0; }
static long scatter_at(void) { return ME == COLL_ROOT ? CI_RECV_IN_PLACE : CI_SENDS; }
static long scatter_out(int ip) { return ip && ME == COLL_ROOT ? 0 : -1; }
static int scatter_call(const coll_args *a) {
    return COLL_CALL3(a, Scatter, Iscatter, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt, COLL_ROOT, a->comm);
}

static size_t scatterv_s(int ip) { return (void)ip, ME == COLL_ROOT ? vspan() : 0; }
static size_t scatterv_r(int ip) { return (void)ip, (size_t)vc(ME); }
static int scatterv_call(const coll_args *a) {
    int c[64], d[64];
    v_arrays(c, d);
    return COLL_CALL3(a, Scatterv, Iscatterv, a->s, c, d, a->st, a->r, vc(ME), a->rt, COLL_ROOT, a->comm);
}

/* ------------------------------------------------------------------ reductions */

static int allreduce_call(const coll_args *a) {
    return COLL_CALL3(a, Allreduce, Iallreduce, a->s, a->r, (int)coll_n, a->rt, a->op, a->comm);
}

static size_t rs_s(int ip) { return (void)ip, vsum(); }
static size_t rs_r(int ip) { return ip ? vsum() : (size_t)vc(ME); }
static long rs_out(int ip) { return (void)ip, vc(ME); }
static int rs_call(const coll_args *a) {
    int c[64], d[64];
    v_arrays(c, d);
    return COLL_CALL3(a, Reduce_scatter, Ireduce_scatter, a->s, a->r, c, a->rt, a->op, a->comm);
}

static size_t rsb_r(int ip) { return ip ? NP * coll_n : coll_n; }
static long rsb_out(int ip) { return (void)ip, (long)coll_n; }
static int rsb_call(const coll_args *a) {
    return COLL_CALL3(a, Reduce_scatter_block, Ireduce_scatter_block, a->s, a->r, (int)coll_n, a->rt, a->op, a->comm);
}

static int scan_call(const coll_args *a) {
    return COLL_CALL3(a, Scan, Iscan, a->s, a->r, (int)coll_n, a->rt, a->op, a->comm);
}
/* Rank 0's receive buffer is undefined after MPI_Exscan. */
static long exscan_out(int ip) { return (void)ip, ME == 0 ? 0 : -1; }
static int exscan_call(const coll_args *a) {
    return COLL_CALL3(a, Exscan, Iexscan, a->s, a->r, (int)coll_n, a->rt, a->op, a->comm);
}

/* ------------------------------------------------------------------ all to all */

static long allgather_at(void) { return (long)(ME * coll_n); }
static int allgather_call(const coll_args *a) {
    return COLL_CALL3(a, Allgather, Iallgather, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt, a->comm);
}

static size_t allgatherv_r(int ip) { return (void)ip, vspan(); }
static long allgatherv_at(void) { return vd(ME); }
static int allgatherv_call(const coll_args *a) {
    int c[64], d[64];
    v_arrays(c, d);
    return COLL_CALL3(a, Allgatherv, Iallgatherv, a->s, vc(ME), a->st, a->r, c, d, a->rt, a->comm);
}

static int alltoall_call(const coll_args *a) {
    return COLL_CALL3(a, Alltoall, Ialltoall, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt, a->comm);
}

static size_t a2av_n(int ip) { return (void)ip, aspan(); }
static int alltoallv_call(const coll_args *a) {
    int c[64], d[64];
    a_arrays(c, d, 1);
    return COLL_CALL3(a, Alltoallv, Ialltoallv, a->s, c, d, a->st, a->r, c, d, a->rt, a->comm);
}
static int alltoallw_call(const coll_args *a) {
    int c[64], d[64];
    MPI_Datatype st[64], rt[64];
    MPI_Aint lb, ext;
    MPI_Type_get_extent(a->rt, &lb, &ext);
    a_arrays(c, d, (int)ext);
    for (int j = 0; j < NP; ++j) st[j] = a->st, rt[j] = a->rt;
    return COLL_CALL3(a, Alltoallw, Ialltoallw, a->s, c, d, st, a->r, c, d, rt, a->comm);
}

static int barrier_call(const coll_args *a) { return COLL_CALL3(a, Barrier, Ibarrier, a->comm); }

/* ------------------------------------------------------------------ neighbourhood */

static int nallgather_call(const coll_args *a) {
    return COLL_CALL3(a, Neighbor_allgather, Ineighbor_allgather, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt,
                      a->comm);
}

static size_t nagv_s(int ip) { return (void)ip, (size_t)nc(ME); }
static size_t nagv_r(int ip) { return (void)ip, (size_t)(nc(left()) + 1 + nc(right())); }
static int nallgatherv_call(const coll_args *a) {
    int c[2] = {nc(left()), nc(right())}, d[2] = {0, nc(left()) + 1};
    return COLL_CALL3(a, Neighbor_allgatherv, Ineighbor_allgatherv, a->s, nc(ME), a->st, a->r, c, d, a->rt, a->comm);
}

static int nalltoall_call(const coll_args *a) {
    return COLL_CALL3(a, Neighbor_alltoall, Ineighbor_alltoall, a->s, (int)coll_n, a->st, a->r, (int)coll_n, a->rt,
                      a->comm);
}

static size_t na2av_n(int ip) { return (void)ip, (size_t)(NA + NB + 3); }
static int nalltoallv_call(const coll_args *a) {
    int sc[2] = {NA, NB}, sd[2] = {0, NA + 3}, rc[2] = {NB, NA}, rd[2] = {0, NB + 3};
    return COLL_CALL3(a, Neighbor_alltoallv, Ineighbor_alltoallv, a->s, sc, sd, a->st, a->r, rc, rd, a->rt, a->comm);
}
static int nalltoallw_call(const coll_args *a) {
    MPI_Aint lb, e;
    MPI_Type_get_extent(a->rt, &lb, &e);
    int sc[2] = {NA, NB}, rc[2] = {NB, NA};
    MPI_Aint sd[2] = {0, (NA + 3) * e}, rd[2] = {0, (NB + 3) * e};
    MPI_Datatype st[2] = {a->st, a->st}, rt[2] = {a->rt, a->rt};
    return COLL_CALL3(a, Neighbor_alltoallw, Ineighbor_alltoallw, a->s, sc, sd, st, a->r, rc, rd, rt, a->comm);
}

/* ------------------------------------------------------------------ the table */

enum {
    S_BCAST,
    S_REDUCE,
    S_ALLREDUCE,
    S_REDUCE_SCATTER,
    S_REDUCE_SCATTER_BLOCK,
    S_SCAN,
    S_EXSCAN,
    S_GATHER,
    S_GATHERV,
    S_SCATTER,
    S_SCATTERV,
    S_ALLGATHER,
    S_ALLGATHERV,
    S_ALLTOALL,
    S_ALLTOALLV,
    S_ALLTOALLW,
    S_BARRIER,
    S_NALLGATHER,
    S_NALLGATHERV,
    S_NALLTOALL,
    S_NALLTOALLV,
    S_NALLTOALLW,
    S_COUNT
};

static const coll_spec coll_specs[S_COUNT] = {
    {"bcast", CF_FILLS_R, bcast_s, c_n, at_root, out_all, bcast_call},
    {"reduce", CF_REDUCE | CF_INPLACE, c_n, c_n, at_root, out_all, reduce_call},
    {"allreduce", CF_REDUCE | CF_INPLACE, c_n, c_n, at_zero, out_all, allreduce_call},
    {"reduce_scatter", CF_REDUCE | CF_INPLACE, rs_s, rs_r, at_zero, rs_out, rs_call},
    {"reduce_scatter_block", CF_REDUCE | CF_INPLACE, c_np_n, rsb_r, at_zero, rsb_out, rsb_call},
    {"scan", CF_REDUCE | CF_INPLACE, c_n, c_n, at_zero, out_all, scan_call},
    {"exscan", CF_REDUCE | CF_INPLACE, c_n, c_n, at_zero, exscan_out, exscan_call},
    {"gather", CF_INPLACE, c_n, gather_r, gather_at, out_all, gather_call},
    {"gatherv", CF_INPLACE, gatherv_s, gatherv_r, gatherv_at, out_all, gatherv_call},
    {"scatter", CF_INPLACE, scatter_s, c_n, scatter_at, scatter_out, scatter_call},
    {"scatterv", CF_INPLACE, scatterv_s, scatterv_r, scatter_at, scatter_out, scatterv_call},
    {"allgather", CF_INPLACE, c_n, c_np_n, allgather_at, out_all, allgather_call},
    {"allgatherv", CF_INPLACE, gatherv_s, allgatherv_r, allgatherv_at, out_all, allgatherv_call},
    {"alltoall", CF_INPLACE, c_np_n, c_np_n, at_zero, out_all, alltoall_call},
    {"alltoallv", CF_INPLACE, a2av_n, a2av_n, at_zero, out_all, alltoallv_call},
    {"alltoallw", CF_INPLACE, a2av_n, a2av_n, at_zero, out_all, alltoallw_call},
    {"barrier", 0, c_zero, c_zero, at_none, out_all, barrier_call},
    {"neighbor_allgather", CF_NEIGHBOR, c_n, c_2n, at_none, out_all, nallgather_call},
    {"neighbor_allgatherv", CF_NEIGHBOR, nagv_s, nagv_r, at_none, out_all, nallgatherv_call},
    {"neighbor_alltoall", CF_NEIGHBOR, c_2n, c_2n, at_none, out_all, nalltoall_call},
    {"neighbor_alltoallv", CF_NEIGHBOR, na2av_n, na2av_n, at_none, out_all, nalltoallv_call},
    {"neighbor_alltoallw", CF_NEIGHBOR, na2av_n, na2av_n, at_none, out_all, nalltoallw_call},
};

#endif
