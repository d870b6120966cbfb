/* bench/datatype's pack cases (the list is in datatype.c's opening comment): one matrix
 * and one datatype at a time, on rank 0, every configuration checked once and timed in
 * each round. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "datatype_kernels.h"
#include "datatype_parts.h"

enum { K_VECTOR, K_LOWER, K_STAIR, K_TRANSPOSE, NKINDS };
static const char *const kind_names[NKINDS] = {"vector", "lower", "stair", "transpose"};
enum { P_MPIACC, P_MEMCPY, P_MEMCPY2D, P_KERNEL, P_CPU, NCONFIGS };
static const char *const config_names[NCONFIGS] = {"mpiacc", "memcpy", "memcpy2d", "kernel", "cpu"};
enum { OP_PACK, OP_UNPACK, OP_COPY };
static const char *const op_names[] = {"pack", "unpack", "copy"};

typedef struct {
    int kind;
    long n, bytes; /* matrix edge; packed bytes */
    size_t elems;  /* doubles in the matrix */
    MPI_Datatype type;
    /* Rows of the layout (all but the transpose): row r is len[r] doubles at displ[r] of the
     * matrix and at prefix[r] of the packed buffer. The hand kernel reads the device copies. */
    long nrows, *displ, *prefix, *d_displ, *d_prefix;
    int *len, *d_len;
    double *hm, *ref, *expect, *hbuf; /* host: matrix, PMPI_Pack of it, PMPI_Unpack of that, scratch */
    double *dm, *dm2, *dp, *dp2;      /* device: matrix, unpack target, packed bytes, copy target */
} PackCase;

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("cannot allocate %zu bytes of host memory", bytes);
    return p;
}

/* Row lengths of the layout at row r. */
static int row_len(int kind, long n, long r) {
    switch (kind) {
        case K_VECTOR: return (int)(n / 4);
        case K_LOWER: return (int)(r + 1);
        default: {
            const long steps = (r / STAIR_STEP + 1) * STAIR_STEP;
            return (int)(steps < n ? steps : n);
        }
    }
}

/* The datatype, its rows and every buffer; 0 (with a note) when the case cannot run at n. */
static int pack_setup(Bench *b, PackCase *pc, int kind, long n) {
    memset(pc, 0, sizeof *pc);
    pc->kind = kind;
    pc->n = n;
    pc->elems = (size_t)n * (size_t)n;
    if (kind == K_TRANSPOSE) {
        MPI_Datatype column;
        CHECK_MPI(MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &column));
        CHECK_MPI(MPI_Type_create_hvector((int)n, 1, (MPI_Aint)sizeof(double), column, &pc->type));
        CHECK_MPI(MPI_Type_free(&column));
        pc->bytes = (long)pc->elems * 8;
    } else {
        pc->nrows = n;
        pc->len = host_alloc((size_t)n * sizeof *pc->len);
        pc->displ = host_alloc((size_t)n * sizeof *pc->displ);
        pc->prefix = host_alloc((size_t)n * sizeof *pc->prefix);
        int *idispl = host_alloc((size_t)n * sizeof *idispl);
        long at = 0;
        for (long r = 0; r < n; r++) {
            pc->len[r] = row_len(kind, n, r);
            pc->displ[r] = r * n;
            idispl[r] = (int)(r * n);
            pc->prefix[r] = at;
            at += pc->len[r];
        }
        pc->bytes = at * 8;
        if (kind == K_VECTOR)
            CHECK_MPI(MPI_Type_vector((int)n, (int)(n / 4), (int)n, MPI_DOUBLE, &pc->type));
        else
            CHECK_MPI(MPI_Type_indexed((int)n, pc->len, idispl, MPI_DOUBLE, &pc->type));
        free(idispl);
    }
    CHECK_MPI(MPI_Type_commit(&pc->type));
    MPI_Count size = 0;
    CHECK_MPI(PMPI_Type_size_x(pc->type, &size));
    if (size != pc->bytes)
        die("%s %ld: the datatype holds %ld bytes, its rows %ld", kind_names[kind], n, (long)size, pc->bytes);
    if (pc->bytes > INT_MAX) {
        printf("# skipped %s %ld: %ld packed bytes do not fit MPI_Pack's int size\n", kind_names[kind], n, pc->bytes);
        fprintf(b->csv, "# skipped %s %ld: %ld packed bytes do not fit MPI_Pack's int size\n", kind_names[kind], n,
                pc->bytes);
        return 0;
    }

    const size_t mbytes = pc->elems * sizeof(double), pbytes = (size_t)pc->bytes;
    pc->hm = host_alloc(mbytes);
    for (size_t i = 0; i < pc->elems; i++) pc->hm[i] = (double)i + 0.25; /* each element its own value */
    pc->ref = host_alloc(pbytes);
    int pos = 0;
    CHECK_MPI(PMPI_Pack(pc->hm, 1, pc->type, pc->ref, (int)pbytes, &pos, MPI_COMM_SELF));
    pc->expect = calloc(pc->elems, sizeof(double));
    if (!pc->expect) die("cannot allocate %zu bytes of host memory", mbytes);
    pos = 0;
    CHECK_MPI(PMPI_Unpack(pc->ref, (int)pbytes, &pos, pc->expect, 1, pc->type, MPI_COMM_SELF));
    pc->hbuf = host_alloc(mbytes);
    memset(pc->hbuf, 0, mbytes); /* its pages faulted in before the CPU engine is timed */

    CHECK_CUDA(cudaMalloc((void **)&pc->dm, mbytes));
    CHECK_CUDA(cudaMalloc((void **)&pc->dm2, mbytes));
    CHECK_CUDA(cudaMalloc((void **)&pc->dp, pbytes));
    CHECK_CUDA(cudaMalloc((void **)&pc->dp2, pbytes));
    CHECK_CUDA(cudaMemcpy(pc->dm, pc->hm, mbytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(pc->dp, pc->ref, pbytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(pc->dm2, 0, mbytes));
    CHECK_CUDA(cudaMemset(pc->dp2, 0, pbytes));
    if (pc->nrows) {
        CHECK_CUDA(cudaMalloc((void **)&pc->d_displ, (size_t)n * sizeof(long)));
        CHECK_CUDA(cudaMalloc((void **)&pc->d_prefix, (size_t)n * sizeof(long)));
        CHECK_CUDA(cudaMalloc((void **)&pc->d_len, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(pc->d_displ, pc->displ, (size_t)n * sizeof(long), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(pc->d_prefix, pc->prefix, (size_t)n * sizeof(long), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(pc->d_len, pc->len, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    return 1;
}

static void pack_free(PackCase *pc) {
    void *dev[] = {pc->dm, pc->dm2, pc->dp, pc->dp2, pc->d_displ, pc->d_prefix, pc->d_len};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) CHECK_CUDA(cudaFree(dev[i]));
    void *host[] = {pc->hm, pc->ref, pc->expect, pc->hbuf, pc->displ, pc->prefix, pc->len};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    if (pc->type != MPI_DATATYPE_NULL) CHECK_MPI(MPI_Type_free(&pc->type));
}

/* One call; when it returns, its output is complete. MPI's code for MPI-ACC's calls. */
static int pack_call(Bench *b, PackCase *pc, int config, int op) {
    const int bytes = (int)pc->bytes, unpack = op == OP_UNPACK;
    int pos = 0;
    switch (config) {
        case P_MPIACC: {
            const int rc = unpack ? MPI_Unpack(pc->dp, bytes, &pos, pc->dm2, 1, pc->type, MPI_COMM_WORLD)
                                  : MPI_Pack(pc->dm, 1, pc->type, pc->dp, bytes, &pos, MPI_COMM_WORLD);
            if (rc == MPI_SUCCESS && pos != bytes)
                die("%s ended at position %d of %d", unpack ? "MPI_Unpack" : "MPI_Pack", pos, bytes);
            return rc;
        }
        case P_MEMCPY:
            CHECK_CUDA(cudaMemcpyAsync(pc->dp2, pc->dp, (size_t)bytes, cudaMemcpyDeviceToDevice, b->stream));
            break;
        case P_MEMCPY2D: {
            const size_t width = (size_t)(pc->n / 4) * sizeof(double), pitch = (size_t)pc->n * sizeof(double);
            if (unpack)
                CHECK_CUDA(cudaMemcpy2DAsync(pc->dm2, pitch, pc->dp, width, width, (size_t)pc->n,
                                             cudaMemcpyDeviceToDevice, b->stream));
            else
                CHECK_CUDA(cudaMemcpy2DAsync(pc->dp, width, pc->dm, pitch, width, (size_t)pc->n,
                                             cudaMemcpyDeviceToDevice, b->stream));
            break;
        }
        case P_KERNEL:
            if (pc->kind == K_TRANSPOSE)
                CHECK_CUDA(dtk_transpose(unpack ? pc->dp : pc->dm, unpack ? pc->dm2 : pc->dp, pc->n, b->stream));
            else if (unpack)
                CHECK_CUDA(dtk_copy_rows(pc->dp, pc->dm2, pc->nrows, pc->d_prefix, pc->d_displ, pc->d_len, b->stream));
            else
                CHECK_CUDA(dtk_copy_rows(pc->dm, pc->dp, pc->nrows, pc->d_displ, pc->d_prefix, pc->d_len, b->stream));
            break;
        case P_CPU:
            /* Unpacking the reference into its own unpacked form rewrites the same values. */
            if (unpack)
                CHECK_MPI(PMPI_Unpack(pc->ref, bytes, &pos, pc->expect, 1, pc->type, MPI_COMM_SELF));
            else
                CHECK_MPI(PMPI_Pack(pc->hm, 1, pc->type, pc->hbuf, bytes, &pos, MPI_COMM_SELF));
            return MPI_SUCCESS;
    }
    CHECK_CUDA(cudaStreamSynchronize(b->stream));
    return MPI_SUCCESS;
}

/* One call into cleared output, checked against the host reference: "ok", "MISMATCH",
 * "unsupported", or "ref" for the CPU engine, which made the reference. */
static const char *pack_verify(Bench *b, PackCase *pc, int config, int op) {
    if (config == P_CPU) return "ref";
    const size_t mbytes = pc->elems * sizeof(double), pbytes = (size_t)pc->bytes;
    double *out;
    /* The input holds the reference's bytes: an earlier case's timing may have left others. */
    if (op == OP_UNPACK) {
        CHECK_CUDA(cudaMemcpy(pc->dp, pc->ref, pbytes, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemset(pc->dm2, 0, mbytes));
        out = pc->dm2;
    } else if (op == OP_COPY) {
        CHECK_CUDA(cudaMemcpy(pc->dp, pc->ref, pbytes, cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemset(pc->dp2, 0, pbytes));
        out = pc->dp2;
    } else {
        CHECK_CUDA(cudaMemset(pc->dp, 0, pbytes));
        out = pc->dp;
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    const int rc = pack_call(b, pc, config, op);
    if (refused(b, rc, op == OP_UNPACK ? "MPI_Unpack" : "MPI_Pack")) return "unsupported";
    /* cudaMemcpy on the legacy stream: MPI-ACC's output must be complete without our help. */
    const size_t check = op == OP_UNPACK ? mbytes : pbytes;
    CHECK_CUDA(cudaMemcpy(pc->hbuf, out, check, cudaMemcpyDeviceToHost));
    const long bad = compare_doubles(op == OP_UNPACK ? pc->expect : pc->ref, pc->hbuf, check / sizeof(double),
                                     op == OP_UNPACK ? "unpacked matrix" : "packed bytes");
    if (bad) {
        b->mismatches += bad;
        b->failed_checks++;
        return "MISMATCH";
    }
    return "ok";
}

/* Seconds per call: enough calls to last --min-time, at most --iters, after one that
 * measures how long a call takes. */
static double pack_time(Bench *b, PackCase *pc, int config, int op, long *iters) {
    double t0 = PMPI_Wtime();
    CHECK_MPI(pack_call(b, pc, config, op));
    const double one = PMPI_Wtime() - t0;
    long n = one > 0 ? (long)(b->o.min_time / one) + 1 : b->o.iters;
    if (n > b->o.iters) n = b->o.iters;
    t0 = PMPI_Wtime();
    for (long i = 0; i < n; i++) CHECK_MPI(pack_call(b, pc, config, op));
    *iters = n;
    return (PMPI_Wtime() - t0) / (double)n;
}

typedef struct {
    int config, op;
    char name[64];
    const char *status;
    double secs[MAX_ROUNDS];
} PackUnit;

static void run_pack_case(Bench *b, int kind, long n) {
    PackCase pc;
    set_where("%s %ld setup", kind_names[kind], n);
    set_phase("setup");
    if (!pack_setup(b, &pc, kind, n)) {
        pack_free(&pc);
        return;
    }
    PackUnit units[2 * NCONFIGS];
    int nunits = 0;
    for (int c = 0; c < NCONFIGS; c++) {
        if (!selected(b->o.configs, config_names[c]) || (c == P_MEMCPY2D && kind != K_VECTOR)) continue;
        if (c == P_MPIACC && !b->pack_autodetect) {
            static int said;
            if (!said++) {
                const char *why = "MPIACC_CUDA_AUTODETECT is off: MPI_Pack finds device buffers by pointer query";
                printf("# skipped mpiacc pack and unpack: %s\n", why);
                fprintf(b->csv, "# skipped mpiacc pack and unpack: %s\n", why);
            }
            continue;
        }
        for (int op = 0; op < 2; op++) {
            PackUnit *u = &units[nunits++];
            u->config = c;
            u->op = c == P_MEMCPY ? OP_COPY : op;
            u->status = NULL;
            config_name(b, config_names[c], c == P_MPIACC, u->name, sizeof u->name);
            if (c == P_MEMCPY) break; /* one copy stands for both directions */
        }
    }
    for (long r = 0; r < b->o.rounds; r++)
        for (int j = 0; j < nunits; j++) {
            PackUnit *u = &units[(j + r) % nunits];
            set_where("%s %ld %s %s", kind_names[kind], n, u->name, op_names[u->op]);
            if (!u->status) {
                set_phase("verify");
                u->status = pack_verify(b, &pc, u->config, u->op);
            }
            if (!strcmp(u->status, "unsupported")) continue;
            set_phase("time");
            long iters;
            u->secs[r] = pack_time(b, &pc, u->config, u->op, &iters);
            print_round(b, kind_names[kind], n, pc.bytes, u->name, op_names[u->op], u->secs[r], iters, r,
                        r ? "-" : u->status);
        }
    for (int k = 0; k < nunits; k++) {
        const PackUnit *u = &units[k];
        if (!strcmp(u->status, "unsupported")) {
            b->unsupported++;
            print_round(b, kind_names[kind], n, pc.bytes, u->name, op_names[u->op], 0, 0, 0, "unsupported");
        }
        add_result(b, kind_names[kind], n, pc.bytes, config_names[u->config], u->name, op_names[u->op], u->secs,
                   (int)b->o.rounds, u->status);
    }
    pack_free(&pc);
}

void run_pack_cases(Bench *b) {
    if (b->rank == 0) {
        for (int kind = 0; kind < NKINDS; kind++) {
            if (!selected(b->o.cases, kind_names[kind])) continue;
            for (int i = 0; i < b->o.nsizes; i++) run_pack_case(b, kind, b->o.sizes[i]);
        }
    }
    /* Rank 1 waits here as long as rank 0 packs: no watchdog of its own meanwhile (rank
     * 0's names a hang, and its abort ends both). */
    set_where("after the pack cases");
    stop_watchdog();
    CHECK_MPI(PMPI_Barrier(MPI_COMM_WORLD));
}
