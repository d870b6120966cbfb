/* A message buffer of either kind, host memory or an OpenCL cl_mem, behind one set of
 * helpers, so that one test body runs every pairing of sender and receiver kinds. */
#ifndef ANY_BUFFER_H_INCLUDED
#define ANY_BUFFER_H_INCLUDED

#include "opencl_util.h"

enum { ANY_HOST = 0, ANY_OPENCL = 1 };

typedef struct {
    int kind;
    size_t n;
    unsigned char *host;
    cl_mem mem;
    MPI_Datatype type; /* MPI_BYTE, or MPI_BYTE tagged for the cl_mem */
    ocl_env *env;
} any_buffer;

static inline const char *any_kind_name(int kind) { return kind == ANY_OPENCL ? "opencl" : "host"; }

static inline any_buffer any_alloc(int kind, size_t n, ocl_env *e) {
    any_buffer b;
    memset(&b, 0, sizeof b);
    b.kind = kind;
    b.n = n;
    b.env = e;
    if (kind == ANY_OPENCL) {
        b.mem = ocl_alloc(e, n);
        b.type = ocl_type(e);
    } else {
        b.host = p2p_alloc(n);
        b.type = MPI_BYTE;
    }
    return b;
}

static inline void *any_ptr(const any_buffer *b) { return b->kind == ANY_OPENCL ? (void *)b->mem : (void *)b->host; }

static inline void any_free(any_buffer *b) {
    if (b->kind == ANY_OPENCL) {
        clReleaseMemObject(b->mem);
        MPI_Type_free(&b->type);
    } else {
        free(b->host);
    }
}

/* The first n bytes become mt_fill(seed). */
static inline void any_fill(any_buffer *b, size_t n, uint64_t seed) {
    if (b->kind == ANY_OPENCL) {
        unsigned char *tmp = p2p_alloc(n);
        mt_fill(tmp, n, seed);
        ocl_write(b->env, b->mem, 0, tmp, n);
        free(tmp);
    } else {
        mt_fill(b->host, n, seed);
    }
}

static inline void any_set(any_buffer *b, unsigned char byte) {
    if (b->kind == ANY_OPENCL)
        ocl_fill(b->env, b->mem, b->n, byte);
    else
        memset(b->host, byte, b->n);
}

/* A host copy of all the buffer's bytes; the caller frees it. */
static inline unsigned char *any_read(const any_buffer *b) {
    unsigned char *out = p2p_alloc(b->n);
    if (b->kind == ANY_OPENCL)
        ocl_read(b->env, b->mem, 0, out, b->n);
    else
        memcpy(out, b->host, b->n);
    return out;
}

#endif
