/* MPI_Reduce_local on device buffers, for any device kind: every (op, type) pair MPI
 * defines on the C types, checked byte for byte against MPICH's PMPI_Reduce_local on host
 * copies of the same data (random values with edge values among them: -0.0 next to 0.0,
 * zeros for the logical ops, ties for MINLOC and MAXLOC), and every pair MPI does not
 * define refused with MPI_ERR_OP and a message naming op and type. A test includes it
 * after defining a backend (rl_backend) for its kind. */
#ifndef REDUCE_LOCAL_CASES_H_INCLUDED
#define REDUCE_LOCAL_CASES_H_INCLUDED

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

typedef struct {
    const char *kind;                                       /* "cl_mem", "CUDA memory" */
    void *(*alloc)(size_t bytes);                           /* a device buffer, as the call's pointer */
    void (*put)(void *dev, const void *host, size_t bytes); /* host -> device, complete on return */
    void (*get)(void *dev, void *host, size_t bytes);       /* device -> host */
    void (*release)(void *dev);
    MPI_Datatype (*tag)(MPI_Datatype base); /* a dup of base tagged for this kind */
    int fp64;                               /* the device has double precision */
} rl_backend;

enum { RL_C_INT = 1, RL_FLOAT = 2, RL_COMPLEX = 4, RL_LOGICAL = 8, RL_BYTE = 16, RL_MULTI = 32, RL_PAIR = 64 };
enum { RL_N = 1000 };

typedef struct {
    MPI_Datatype type;
    const char *name;
    int group;
    int is_unsigned; /* an unsigned C integer type */
    char fill;       /* 'i' integer, 'f' float, 'd' double, 'b' bool, 'x' complex float, 'z' complex double, 'p' pair */
} rl_type;

typedef struct {
    MPI_Op op;
    const char *name;
    int groups;
} rl_op;

static const rl_op rl_ops[] = {
    {MPI_MAX, "MPI_MAX", RL_C_INT | RL_FLOAT | RL_MULTI},
    {MPI_MIN, "MPI_MIN", RL_C_INT | RL_FLOAT | RL_MULTI},
    {MPI_SUM, "MPI_SUM", RL_C_INT | RL_FLOAT | RL_COMPLEX | RL_MULTI},
    {MPI_PROD, "MPI_PROD", RL_C_INT | RL_FLOAT | RL_COMPLEX | RL_MULTI},
    {MPI_LAND, "MPI_LAND", RL_C_INT | RL_LOGICAL},
    {MPI_LOR, "MPI_LOR", RL_C_INT | RL_LOGICAL},
    {MPI_LXOR, "MPI_LXOR", RL_C_INT | RL_LOGICAL},
    {MPI_BAND, "MPI_BAND", RL_C_INT | RL_BYTE | RL_MULTI},
    {MPI_BOR, "MPI_BOR", RL_C_INT | RL_BYTE | RL_MULTI},
    {MPI_BXOR, "MPI_BXOR", RL_C_INT | RL_BYTE | RL_MULTI},
    {MPI_MINLOC, "MPI_MINLOC", RL_PAIR},
    {MPI_MAXLOC, "MPI_MAXLOC", RL_PAIR},
};
#define RL_NOPS ((int)(sizeof rl_ops / sizeof rl_ops[0]))

/* Filled at run time: MPICH's handles are not constant expressions everywhere. */
static int rl_types(rl_type *t) {
    int n = 0;
#define RL_T(ty, g, f) t[n].type = ty, t[n].name = #ty, t[n].group = g, t[n].fill = f, t[n].is_unsigned = 0, ++n
    RL_T(MPI_SIGNED_CHAR, RL_C_INT, 'i');
    RL_T(MPI_UNSIGNED_CHAR, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_SHORT, RL_C_INT, 'i');
    RL_T(MPI_UNSIGNED_SHORT, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_INT, RL_C_INT, 'i');
    RL_T(MPI_UNSIGNED, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_LONG, RL_C_INT, 'i');
    RL_T(MPI_UNSIGNED_LONG, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_LONG_LONG, RL_C_INT, 'i');
    RL_T(MPI_UNSIGNED_LONG_LONG, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_INT8_T, RL_C_INT, 'i');
    RL_T(MPI_INT16_T, RL_C_INT, 'i');
    RL_T(MPI_INT32_T, RL_C_INT, 'i');
    RL_T(MPI_INT64_T, RL_C_INT, 'i');
    RL_T(MPI_UINT8_T, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_UINT16_T, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_UINT32_T, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_UINT64_T, RL_C_INT, 'i');
    t[n - 1].is_unsigned = 1;
    RL_T(MPI_AINT, RL_MULTI, 'i');
    RL_T(MPI_OFFSET, RL_MULTI, 'i');
    RL_T(MPI_COUNT, RL_MULTI, 'i');
    RL_T(MPI_FLOAT, RL_FLOAT, 'f');
    RL_T(MPI_DOUBLE, RL_FLOAT, 'd');
    RL_T(MPI_C_BOOL, RL_LOGICAL, 'b');
    RL_T(MPI_CXX_BOOL, RL_LOGICAL, 'b');
    RL_T(MPI_BYTE, RL_BYTE, 'i');
    RL_T(MPI_C_FLOAT_COMPLEX, RL_COMPLEX, 'x');
    RL_T(MPI_C_DOUBLE_COMPLEX, RL_COMPLEX, 'z');
    RL_T(MPI_CXX_FLOAT_COMPLEX, RL_COMPLEX, 'x');
    RL_T(MPI_CXX_DOUBLE_COMPLEX, RL_COMPLEX, 'z');
    RL_T(MPI_FLOAT_INT, RL_PAIR, 'p');
    RL_T(MPI_DOUBLE_INT, RL_PAIR, 'p');
    RL_T(MPI_LONG_INT, RL_PAIR, 'p');
    RL_T(MPI_2INT, RL_PAIR, 'p');
    RL_T(MPI_SHORT_INT, RL_PAIR, 'p');
    RL_T(MPI_CHAR, 0, 'i'); /* MPI defines no reduction on it */
#undef RL_T
    return n;
}

static uint64_t rl_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rl_next(void) {
    rl_state ^= rl_state << 13;
    rl_state ^= rl_state >> 7;
    rl_state ^= rl_state << 17;
    return rl_state;
}

/* A float value: mostly in [-64, 64) on a 1/8 grid (exact sums, products that round),
 * with zeros of both signs. */
static inline double rl_real(void) {
    uint64_t r = rl_next();
    if (r % 16 == 0) return (r & 16) ? -0.0 : 0.0;
    return ((double)(int64_t)(r >> 40 & 0x3ff) - 512.0) / 8.0 + (double)(r >> 20 & 0xffff) / 65536.0 / 1024.0;
}

/* Random bytes, then per fill kind values that make each op say something. */
static void rl_fill(const rl_type *t, void *buf, MPI_Aint extent, int logical) {
    unsigned char *b = (unsigned char *)buf;
    for (size_t i = 0; i < (size_t)extent * RL_N; ++i) b[i] = (unsigned char)rl_next();
    for (int i = 0; i < RL_N; ++i) {
        unsigned char *e = b + (size_t)i * (size_t)extent;
        switch (t->fill) {
            case 'i':
                if (logical && rl_next() % 3 == 0) memset(e, 0, (size_t)extent); /* false */
                break;
            case 'b': *e = (unsigned char)(rl_next() & 1); break;
            case 'f': {
                float v = (float)rl_real();
                memcpy(e, &v, sizeof v);
                break;
            }
            case 'd': {
                double v = rl_real();
                memcpy(e, &v, sizeof v);
                break;
            }
            case 'x': {
                float v[2] = {(float)rl_real(), (float)rl_real()};
                memcpy(e, v, sizeof v);
                break;
            }
            case 'z': {
                double v[2] = {rl_real(), rl_real()};
                memcpy(e, v, sizeof v);
                break;
            }
            case 'p': {
                /* values from a few, so ties are common; indices random (ties pick the smaller) */
                int loc = (int)(rl_next() % 1000), small = (int)(rl_next() % 5) - 2;
                if (t->type == MPI_FLOAT_INT) {
                    float v = (float)small;
                    memcpy(e, &v, 4);
                    memcpy(e + 4, &loc, 4);
                } else if (t->type == MPI_DOUBLE_INT) {
                    double v = small;
                    memcpy(e, &v, 8);
                    memcpy(e + 8, &loc, 4);
                } else if (t->type == MPI_LONG_INT) {
                    long v = small;
                    memcpy(e, &v, sizeof v);
                    memcpy(e + sizeof(long), &loc, 4);
                } else if (t->type == MPI_2INT) {
                    memcpy(e, &small, 4);
                    memcpy(e + 4, &loc, 4);
                } else {
                    short v = (short)small;
                    memcpy(e, &v, 2);
                    memcpy(e + 4, &loc, 4);
                }
                break;
            }
        }
    }
}

/* inout = max or min (in, inout) of unsigned integers of `size` bytes. MPICH 4.0 is not the
 * reference here: it compares unsigned types as signed (0xe4 and 0x11 as unsigned char:
 * MPI_MAX gives 0x11). */
static void rl_unsigned_max_min(const void *in, void *io, size_t size, int is_max) {
    for (int i = 0; i < RL_N; ++i) {
        uint64_t a = 0, b = 0;
        memcpy(&a, (const char *)in + (size_t)i * size, size); /* little-endian */
        memcpy(&b, (char *)io + (size_t)i * size, size);
        if (is_max ? a > b : a < b) memcpy((char *)io + (size_t)i * size, &a, size);
    }
}

static int rl_class(int rc) {
    int c = rc;
    MPI_Error_class(rc, &c);
    return c;
}

/* The error string of rc contains both words. */
static int rl_says(int rc, const char *a, const char *b, char *s) {
    int len = 0;
    s[0] = 0;
    MPI_Error_string(rc, s, &len);
    return strstr(s, a) != NULL && (!b || strstr(s, b) != NULL);
}

/* One case per type: every op MPI defines on it computed on the device and compared with
 * MPICH's result; every other op refused (MPI_ERR_OP). */
static void rl_run_type(const rl_backend *be, const rl_type *t) {
    char name[160];
    snprintf(name, sizeof name, "MPI_Reduce_local on %s: %s, every op", be->kind, t->name);
    if (!be->fp64 && (t->fill == 'd' || t->fill == 'z' || t->type == MPI_DOUBLE_INT)) {
        mt_skip(name, "the device has no double precision (cl_khr_fp64)");
        return;
    }
    MT_CASE(name) {
        MPI_Aint lb = 0, extent = 0;
        MPI_Type_get_extent(t->type, &lb, &extent);
        const size_t bytes = (size_t)extent * RL_N;
        unsigned char *in = (unsigned char *)malloc(bytes), *io = (unsigned char *)malloc(bytes);
        unsigned char *want = (unsigned char *)malloc(bytes), *got = (unsigned char *)malloc(bytes);
        void *din = be->alloc(bytes), *dio = be->alloc(bytes);
        MPI_Datatype tagged = be->tag(t->type);
        char s[MPI_MAX_ERROR_STRING + 1], tname[MPI_MAX_OBJECT_NAME] = "";
        int tlen = 0;
        MPI_Type_get_name(t->type, tname, &tlen); /* an alias's own: MPI_C_COMPLEX */
        for (int o = 0; o < RL_NOPS; ++o) {
            const rl_op *op = &rl_ops[o];
            const int logical = op->op == MPI_LAND || op->op == MPI_LOR || op->op == MPI_LXOR;
            rl_fill(t, in, extent, logical);
            rl_fill(t, io, extent, logical);
            be->put(din, in, bytes);
            be->put(dio, io, bytes);
            int rc = MPI_Reduce_local(din, dio, RL_N, tagged, op->op);
            if (!(op->groups & t->group)) {
                MT_CHECK(rc != MPI_SUCCESS && rl_class(rc) == MPI_ERR_OP, "%s: class %d, expected MPI_ERR_OP", op->name,
                         rc == MPI_SUCCESS ? 0 : rl_class(rc));
                if (rc != MPI_SUCCESS)
                    MT_CHECK(rl_says(rc, op->name, tname, s), "%s: the message does not name op and type: \"%s\"",
                             op->name, s);
                be->get(dio, got, bytes);
                MT_CHECK(memcmp(got, io, bytes) == 0, "%s: a refused reduction changed inoutbuf", op->name);
                continue;
            }
            MT_CHECK(rc == MPI_SUCCESS, "%s: MPI_Reduce_local failed: %s", op->name, (rl_says(rc, "", NULL, s), s));
            memcpy(want, io, bytes);
            if (t->is_unsigned && (op->op == MPI_MAX || op->op == MPI_MIN))
                rl_unsigned_max_min(in, want, (size_t)extent, op->op == MPI_MAX);
            else
                PMPI_Reduce_local(in, want, RL_N, t->type, op->op);
            be->get(dio, got, bytes);
            size_t at = 0;
            while (at < bytes && got[at] == want[at]) ++at;
            MT_CHECK(at == bytes, "%s: byte %zu (element %zu) is 0x%02x, MPICH's 0x%02x", op->name, at,
                     at / (size_t)extent, at < bytes ? got[at] : 0, at < bytes ? want[at] : 0);
            be->get(din, got, bytes);
            MT_CHECK(memcmp(got, in, bytes) == 0, "%s: inbuf changed", op->name);
        }
        MPI_Type_free(&tagged);
        be->release(din);
        be->release(dio);
        free(in);
        free(io);
        free(want);
        free(got);
    }
}

static void rl_user_fn(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)in, (void)inout, (void)len, (void)type;
}

/* Pairs MPI defines that no device kernel computes, pairs it does not define, ops MPI
 * reserves for one-sided accumulates, and user-defined ops. */
static void rl_run_refusals(const rl_backend *be) {
    char name[160];
    snprintf(name, sizeof name, "MPI_Reduce_local on %s: refusals name op, type and cause", be->kind);
    MT_CASE(name) {
        char s[MPI_MAX_ERROR_STRING + 1];
        void *d1 = be->alloc(4096), *d2 = be->alloc(4096);
        struct {
            MPI_Datatype type;
            MPI_Op op;
            int cls;
            const char *says;
        } cases[] = {
            {MPI_LONG_DOUBLE, MPI_SUM, MPI_ERR_UNSUPPORTED_OPERATION, "long double"},
            {MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_ERR_UNSUPPORTED_OPERATION, "long double"},
            {MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_ERR_UNSUPPORTED_OPERATION, "long double"},
            {MPI_LONG_DOUBLE, MPI_BAND, MPI_ERR_OP, "MPI_BAND"},
            {MPI_INT, MPI_REPLACE, MPI_ERR_OP, "one-sided"},
            {MPI_INT, MPI_NO_OP, MPI_ERR_OP, "one-sided"},
            {MPI_FLOAT, MPI_MINLOC, MPI_ERR_OP, "MPI_MINLOC"},
            {MPI_2INT, MPI_SUM, MPI_ERR_OP, "MPI_2INT"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            MPI_Datatype t = be->tag(cases[i].type);
            int rc = MPI_Reduce_local(d1, d2, 4, t, cases[i].op);
            MT_CHECK(rc != MPI_SUCCESS && rl_class(rc) == cases[i].cls, "case %zu: class %d, expected %d", i,
                     rc == MPI_SUCCESS ? 0 : rl_class(rc), cases[i].cls);
            if (rc != MPI_SUCCESS)
                MT_CHECK(rl_says(rc, "MPI_Reduce_local", cases[i].says, s), "case %zu: \"%s\" does not say \"%s\"", i,
                         s, cases[i].says);
            MPI_Type_free(&t);
        }
        MPI_Op user;
        MPI_Op_create(rl_user_fn, 1, &user);
        MPI_Datatype t = be->tag(MPI_INT);
        int rc = MPI_Reduce_local(d1, d2, 4, t, user);
        MT_CHECK(rc != MPI_SUCCESS && rl_class(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "a user-defined op: class %d",
                 rc == MPI_SUCCESS ? 0 : rl_class(rc));
        if (rc != MPI_SUCCESS) MT_CHECK(rl_says(rc, "user-defined", "MPI_INT", s), "a user-defined op: \"%s\"", s);
        MPI_Type_free(&t);
        MPI_Op_free(&user);
        be->release(d1);
        be->release(d2);
    }
}

/* Where the kind is not usable: every case of rl_run_all, skipped by name. */
static inline void rl_skip_all(const char *kind, const char *why) {
    rl_type types[64];
    char name[160];
    const int n = rl_types(types);
    for (int i = 0; i < n; ++i) {
        snprintf(name, sizeof name, "MPI_Reduce_local on %s: %s, every op", kind, types[i].name);
        mt_skip(name, why);
    }
    snprintf(name, sizeof name, "MPI_Reduce_local on %s: refusals name op, type and cause", kind);
    mt_skip(name, why);
}

static void rl_run_all(const rl_backend *be) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rl_type types[64];
    const int n = rl_types(types);
    for (int i = 0; i < n; ++i) rl_run_type(be, &types[i]);
    rl_run_refusals(be);
}

#endif
