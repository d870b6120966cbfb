/* Point-to-point transfers between host and CUDA memory, every pairing and both
 * directions, at the sizes that matter to MPI-ACC's protocol: 0, 1, the 200-byte
 * envelope and its neighbours, the 16 KiB device-eager limit, 256 KiB, the 1 MiB pipeline chunk,
 * the 2 MiB host rendezvous threshold, 3 chunks + 1, and 64 MiB. Buffers are described
 * by an MPIX_ACC_BUF_TYPE attribute or found by pointer query (MPI_CHAR and MPI_DOUBLE on
 * untagged device pointers), and host buffers come plain, tagged MPIX_ACC_BUF_HOST, or
 * pinned. Every byte is checked after copying back to host, and GPU_GUARD bytes after
 * every receive buffer must stay untouched.
 *
 * Ranks use device rank % devices (across GPUs where there are two). The same source
 * builds cuda_p2p_same_gpu (both ranks on device 0) and cuda_p2p_pipeline
 * (MPIACC_IPC=0: the staged pipeline that inter-node transfers take).
 * MPIACC-TEST-RANKS: 2 */
#include "config.h" /* MPIACC_HAVE_CUDA_KERNELS */
#include "gpu_util.h"

#ifndef CUDA_P2P_SAME_GPU
#define CUDA_P2P_SAME_GPU 0
#endif
#ifndef CUDA_P2P_NO_IPC
#define CUDA_P2P_NO_IPC 0
#endif
#ifndef CUDA_P2P_FIN_MESSAGE
#define CUDA_P2P_FIN_MESSAGE 0
#endif
#ifndef CUDA_P2P_MEMOP_REFUSED
#define CUDA_P2P_MEMOP_REFUSED 0
#endif
#ifndef CUDA_P2P_RESIDENT_DECLINED
#define CUDA_P2P_RESIDENT_DECLINED 0
#endif
#include <cuda.h> /* CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS; no libcuda is linked */

#define W MPI_COMM_WORLD

static const size_t sizes[] = {0,
                               1,
                               199,
                               200,
                               201,
                               16 * KiB - 1,
                               16 * KiB,
                               16 * KiB + 1,
                               256 * KiB - 1,
                               256 * KiB,
                               256 * KiB + 1,
                               1 * MiB - 1,
                               1 * MiB,
                               1 * MiB + 1,
                               2 * MiB - 1,
                               2 * MiB,
                               2 * MiB + 1,
                               3 * MiB + 1,
                               64 * MiB};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* ------------------------------------------------------------------ buffer views */

typedef enum { MEM_HOST, MEM_PINNED, MEM_CUDA } mem_t;
typedef enum { ATTR_NONE, ATTR_HOST, ATTR_CUDA } attr_t;
typedef struct {
    mem_t mem;
    attr_t attr;
    int dbl; /* MPI_DOUBLE elements, else MPI_CHAR */
    const char *name;
} view_t;

static const view_t HOST_PLAIN = {MEM_HOST, ATTR_NONE, 0, "host MPI_CHAR"};
static const view_t HOST_TAGGED = {MEM_HOST, ATTR_HOST, 0, "host MPI_CHAR tagged MPIX_ACC_BUF_HOST"};
static const view_t HOST_TAGGED_DBL = {MEM_HOST, ATTR_HOST, 1, "host MPI_DOUBLE tagged MPIX_ACC_BUF_HOST"};
static const view_t PINNED_PLAIN = {MEM_PINNED, ATTR_NONE, 0, "pinned host MPI_CHAR"};
static const view_t CUDA_TAGGED = {MEM_CUDA, ATTR_CUDA, 0, "CUDA MPI_CHAR tagged MPIX_ACC_BUF_CUDA"};
static const view_t CUDA_TAGGED_DBL = {MEM_CUDA, ATTR_CUDA, 1, "CUDA MPI_DOUBLE tagged MPIX_ACC_BUF_CUDA"};
static const view_t CUDA_AUTO = {MEM_CUDA, ATTR_NONE, 0, "CUDA MPI_CHAR untagged (autodetect)"};
static const view_t CUDA_AUTO_DBL = {MEM_CUDA, ATTR_NONE, 1, "CUDA MPI_DOUBLE untagged (autodetect)"};

static size_t view_elem(const view_t *v) { return v->dbl ? sizeof(double) : 1; }
/* A message size this view can carry: whole doubles for MPI_DOUBLE views. */
static size_t view_bytes(const view_t *v, size_t n) {
    size_t e = view_elem(v);
    return (n + e - 1) / e * e;
}

static MPI_Datatype view_type(const view_t *v) {
    MPI_Datatype base = v->dbl ? MPI_DOUBLE : MPI_CHAR;
    if (v->attr == ATTR_NONE) return base;
    return gpu_tagged(base, v->attr == ATTR_CUDA ? MPIX_ACC_BUF_CUDA : MPIX_ACC_BUF_HOST);
}
static void view_type_free(const view_t *v, MPI_Datatype *t) {
    if (v->attr != ATTR_NONE) MCK(MPI_Type_free(t));
}

typedef struct {
    const view_t *v;
    unsigned char *p;
    size_t bytes; /* of the message (send) or of the receive buffer (receive) */
    int count;    /* elements of the view's type */
    int owned;
} msg_t;

/* A send buffer holding gpu_ref + off. Host sends use the reference bytes in place. */
static void send_prepare(msg_t *m, const view_t *v, size_t n, size_t off) {
    m->v = v;
    m->bytes = n;
    m->count = (int)(n / view_elem(v));
    m->owned = 1;
    switch (v->mem) {
        case MEM_HOST:
            m->p = gpu_ref + off;
            m->owned = 0;
            break;
        case MEM_PINNED:
            CK(cudaMallocHost((void **)&m->p, n + GPU_GUARD));
            memcpy(m->p, gpu_ref + off, n);
            break;
        case MEM_CUDA:
            m->p = gpu_malloc(n + GPU_GUARD);
            gpu_upload(m->p, gpu_ref + off, n);
            break;
    }
}

/* A receive buffer of `room` bytes plus GPU_GUARD, all GPU_SENTINEL. */
static void recv_prepare(msg_t *m, const view_t *v, size_t room) {
    m->v = v;
    m->bytes = room;
    m->count = (int)(room / view_elem(v));
    m->owned = 1;
    switch (v->mem) {
        case MEM_HOST:
            m->p = malloc(room + GPU_GUARD);
            if (!m->p) gpu_die(__FILE__, __LINE__, "out of host memory");
            memset(m->p, GPU_SENTINEL, room + GPU_GUARD);
            break;
        case MEM_PINNED:
            CK(cudaMallocHost((void **)&m->p, room + GPU_GUARD));
            memset(m->p, GPU_SENTINEL, room + GPU_GUARD);
            break;
        case MEM_CUDA:
            m->p = gpu_malloc(room + GPU_GUARD);
            gpu_memset(m->p, GPU_SENTINEL, room + GPU_GUARD);
            break;
    }
}

/* The first n bytes are gpu_ref + off; the rest of the buffer and the guard untouched. */
static void recv_check(const msg_t *m, size_t n, size_t off, const char *what, size_t size) {
    size_t total = m->bytes + GPU_GUARD;
    const unsigned char *got = m->v->mem == MEM_CUDA ? gpu_download(m->p, total) : m->p;
    GPU_CHECK_SAME(got, gpu_ref + off, n, "%s, %zu-byte message into %s", what, size, m->v->name);
    GPU_CHECK_UNTOUCHED(got + n, total - n, GPU_SENTINEL, "%s, %zu-byte message into %s: past the message", what,
                        size, m->v->name);
}

static void msg_free(msg_t *m) {
    if (!m->owned) return;
    switch (m->v->mem) {
        case MEM_HOST: free(m->p); break;
        case MEM_PINNED: CK(cudaFreeHost(m->p)); break;
        case MEM_CUDA: CK(cudaFree(m->p)); break;
    }
    m->p = NULL;
    m->owned = 0;
}

/* The reference offset of message (tag) sent by rank `from`. */
static size_t msg_off(int tag, int from) { return gpu_offset(tag * 3 + from * 1000003); }

/* ------------------------------------------------------------------ transfer patterns */

/* Rank `from` sends every size with MPI_Send from S; the other receives with MPI_Recv
 * into R of exactly the message's size. */
static void blocking_sizes(const view_t *S, const view_t *R, int from, int tagbase) {
    MPI_Datatype st = view_type(S), rt = view_type(R);
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = view_bytes(S, sizes[i]);
        int tag = tagbase + i;
        msg_t m;
        if (mt_rank == from) {
            send_prepare(&m, S, n, msg_off(tag, from));
            MCK(MPI_Send(m.p, m.count, st, gpu_peer, tag, W));
        } else {
            MPI_Status s;
            recv_prepare(&m, R, n);
            MCK(MPI_Recv(m.p, m.count, rt, from, tag, W, &s));
            GPU_CHECK_STATUS(s, from, tag, n, "MPI_Recv %s <- %s, %zu bytes", R->name, S->name, n);
            recv_check(&m, n, msg_off(tag, from), "MPI_Send/MPI_Recv", n);
        }
        msg_free(&m);
    }
    view_type_free(S, &st);
    view_type_free(R, &rt);
}

static void blocking_both_ways(const view_t *S, const view_t *R, int tagbase) {
    blocking_sizes(S, R, 0, tagbase);
    blocking_sizes(S, R, 1, tagbase + 100);
}

/* Both ranks at once: every receive posted (Irecv into R), then every send (Isend from
 * S, largest first), then one MPI_Waitall. */
static void exchange_nonblocking(const view_t *S, const view_t *R, int tagbase) {
    MPI_Datatype st = view_type(S), rt = view_type(R);
    msg_t rm[NSIZES], sm[NSIZES];
    MPI_Request q[2 * NSIZES];
    MPI_Status sts[2 * NSIZES];
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = view_bytes(R, sizes[i]);
        recv_prepare(&rm[i], R, n);
        MCK(MPI_Irecv(rm[i].p, rm[i].count, rt, gpu_peer, tagbase + i, W, &q[i]));
    }
    for (int i = NSIZES - 1; i >= 0; --i) {
        size_t n = view_bytes(S, sizes[i]);
        send_prepare(&sm[i], S, n, msg_off(tagbase + i, mt_rank));
        MCK(MPI_Isend(sm[i].p, sm[i].count, st, gpu_peer, tagbase + i, W, &q[NSIZES + i]));
    }
    MCK(MPI_Waitall(2 * NSIZES, q, sts)); /* blocking: the case watchdog bounds it */
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = view_bytes(R, sizes[i]);
        GPU_CHECK_STATUS(sts[i], gpu_peer, tagbase + i, n, "MPI_Irecv %s <- %s, %zu bytes", R->name, S->name, n);
        recv_check(&rm[i], n, msg_off(tagbase + i, gpu_peer), "MPI_Isend/MPI_Irecv/MPI_Waitall", n);
        msg_free(&rm[i]);
        msg_free(&sm[i]);
    }
    view_type_free(S, &st);
    view_type_free(R, &rt);
}

/* Both ranks at once, one MPI_Sendrecv per size: send from S, receive into R. */
/* Both ranks exchange at every size in one call: MPI_Sendrecv, or MPI_Isendrecv (MPI-4)
 * and MPI_Wait. */
static void exchange_sendrecv_by(const view_t *S, const view_t *R, int tagbase, int nonblocking) {
    const char *call = nonblocking ? "MPI_Isendrecv" : "MPI_Sendrecv";
    MPI_Datatype st = view_type(S), rt = view_type(R);
    for (int i = 0; i < NSIZES; ++i) {
        size_t n = view_bytes(S, sizes[i]);
        int tag = tagbase + i;
        msg_t sm, rm;
        MPI_Status s;
        send_prepare(&sm, S, n, msg_off(tag, mt_rank));
        recv_prepare(&rm, R, n);
        if (nonblocking) {
            MPI_Request q;
            MCK(MPI_Isendrecv(sm.p, sm.count, st, gpu_peer, tag, rm.p, rm.count, rt, gpu_peer, tag, W, &q));
            MCK(MPI_Wait(&q, &s));
        } else {
            MCK(MPI_Sendrecv(sm.p, sm.count, st, gpu_peer, tag, rm.p, rm.count, rt, gpu_peer, tag, W, &s));
        }
        GPU_CHECK_STATUS(s, gpu_peer, tag, n, "%s %s <- %s, %zu bytes", call, R->name, S->name, n);
        recv_check(&rm, n, msg_off(tag, gpu_peer), call, n);
        msg_free(&sm);
        msg_free(&rm);
    }
    view_type_free(S, &st);
    view_type_free(R, &rt);
}
static void exchange_sendrecv(const view_t *S, const view_t *R, int tagbase) {
    exchange_sendrecv_by(S, R, tagbase, 0);
}
static void exchange_isendrecv(const view_t *S, const view_t *R, int tagbase) {
    exchange_sendrecv_by(S, R, tagbase, 1);
}

/* ------------------------------------------------------------------ cases: pairings */

static void c_send_recv_host_to_cuda_tagged(void) { blocking_both_ways(&HOST_PLAIN, &CUDA_TAGGED, 1000); }
static void c_send_recv_cuda_tagged_to_host(void) { blocking_both_ways(&CUDA_TAGGED, &HOST_PLAIN, 1200); }
static void c_send_recv_cuda_tagged_to_cuda_tagged(void) { blocking_both_ways(&CUDA_TAGGED, &CUDA_TAGGED, 1400); }
static void c_send_recv_cuda_auto_to_cuda_auto(void) { blocking_both_ways(&CUDA_AUTO, &CUDA_AUTO, 1600); }
static void c_send_recv_cuda_auto_double_to_host_tagged(void) {
    blocking_both_ways(&CUDA_AUTO_DBL, &HOST_TAGGED_DBL, 1800);
}
static void c_send_recv_host_tagged_to_cuda_auto_double(void) {
    blocking_both_ways(&HOST_TAGGED_DBL, &CUDA_AUTO_DBL, 2000);
}
static void c_send_recv_cuda_auto_double_to_cuda_tagged_double(void) {
    blocking_both_ways(&CUDA_AUTO_DBL, &CUDA_TAGGED_DBL, 2200);
}
static void c_send_recv_host_tagged_to_cuda_auto(void) { blocking_both_ways(&HOST_TAGGED, &CUDA_AUTO, 2400); }
static void c_send_recv_cuda_tagged_to_pinned_host(void) { blocking_both_ways(&CUDA_TAGGED, &PINNED_PLAIN, 2600); }
static void c_send_recv_pinned_host_to_cuda_auto(void) { blocking_both_ways(&PINNED_PLAIN, &CUDA_AUTO, 2800); }
static void c_send_recv_host_to_host_with_autodetect_on(void) {
    blocking_both_ways(&HOST_PLAIN, &HOST_TAGGED, 3000);
}

static void c_isend_irecv_host_to_cuda(void) { exchange_nonblocking(&HOST_PLAIN, &CUDA_TAGGED, 3200); }
static void c_isend_irecv_cuda_to_host(void) { exchange_nonblocking(&CUDA_TAGGED, &HOST_TAGGED, 3300); }
static void c_isend_irecv_cuda_tagged_to_cuda_auto(void) { exchange_nonblocking(&CUDA_TAGGED, &CUDA_AUTO, 3400); }
static void c_isend_irecv_cuda_auto_double(void) { exchange_nonblocking(&CUDA_AUTO_DBL, &CUDA_AUTO_DBL, 3500); }
static void c_isend_irecv_pinned_to_cuda(void) { exchange_nonblocking(&PINNED_PLAIN, &CUDA_AUTO, 3600); }

static void c_sendrecv_cuda_to_cuda(void) { exchange_sendrecv(&CUDA_TAGGED, &CUDA_AUTO, 3700); }
static void c_sendrecv_host_to_cuda(void) { exchange_sendrecv(&HOST_PLAIN, &CUDA_TAGGED, 3800); }
static void c_sendrecv_cuda_to_host(void) { exchange_sendrecv(&CUDA_AUTO, &HOST_PLAIN, 3900); }
static void c_isendrecv_cuda_to_cuda(void) { exchange_isendrecv(&CUDA_TAGGED, &CUDA_AUTO, 9000); }
static void c_isendrecv_host_to_cuda(void) { exchange_isendrecv(&HOST_PLAIN, &CUDA_TAGGED, 9200); }

/* ------------------------------------------------------------------ cases: patterns */

/* EpiSimdemics: every message lands in a fixed fragment of one device allocation,
 * through persistent receives restarted with MPI_Startall each step; sends are
 * persistent too, from fragments of another allocation. Fragments start at unaligned
 * offsets; the gaps between them must stay untouched. 100 steps, new data every step. */
#define NFRAG 8
#define FRAG_GAP 3
#define STEPS 100
static void c_persistent_device_fragments(void) {
    static const size_t frag[NFRAG] = {1, 200, 4097, 16 * KiB, 256 * KiB + 1, 100, 999, 64 * KiB};
    size_t foff[NFRAG], total = 0;
    for (int k = 0; k < NFRAG; ++k) {
        foff[k] = total;
        total += frag[k] + FRAG_GAP;
    }
    unsigned char *rbase = gpu_malloc(total + GPU_GUARD), *sbase = gpu_malloc(total);
    unsigned char *image = malloc(total), *want = malloc(total + GPU_GUARD);
    if (!image || !want) gpu_die(__FILE__, __LINE__, "out of host memory");
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    MPI_Request req[2 * NFRAG];
    MPI_Status sts[2 * NFRAG];
    for (int k = 0; k < NFRAG; ++k) {
        /* even fragments tagged, odd ones found by pointer query (interior pointers) */
        MPI_Datatype t = (k % 2) ? MPI_CHAR : cuda_t;
        MCK(MPI_Recv_init(rbase + foff[k], (int)frag[k], t, gpu_peer, 500 + k, W, &req[k]));
        MCK(MPI_Send_init(sbase + foff[k], (int)frag[k], t, gpu_peer, 500 + k, W, &req[NFRAG + k]));
    }
    int reported = 0;
    for (int step = 0; step < STEPS; ++step) {
        /* this step's bytes, mine and the peer's */
        memset(image, 0, total);
        memset(want, GPU_SENTINEL, total + GPU_GUARD);
        for (int k = 0; k < NFRAG; ++k) {
            memcpy(image + foff[k], gpu_ref + msg_off(step * NFRAG + k, mt_rank), frag[k]);
            memcpy(want + foff[k], gpu_ref + msg_off(step * NFRAG + k, gpu_peer), frag[k]);
        }
        gpu_upload(sbase, image, total);
        gpu_memset(rbase, GPU_SENTINEL, total + GPU_GUARD);
        MCK(MPI_Startall(2 * NFRAG, req));
        MCK(MPI_Waitall(2 * NFRAG, req, sts));
        if (reported) continue; /* keep stepping in lockstep with the peer, report once */
        for (int k = 0; k < NFRAG; ++k)
            GPU_CHECK_STATUS(sts[k], gpu_peer, 500 + k, frag[k], "step %d fragment %d", step, k);
        const unsigned char *got = gpu_download(rbase, total + GPU_GUARD);
        GPU_CHECK_SAME(got, want, total + GPU_GUARD, "step %d: fragments, gaps and guard", step);
        reported = mt_case_failed;
    }
    for (int k = 0; k < 2 * NFRAG; ++k) MCK(MPI_Request_free(&req[k]));
    MCK(MPI_Type_free(&cuda_t));
    CK(cudaFree(rbase));
    CK(cudaFree(sbase));
    free(image);
    free(want);
}

/* Probes of device messages report their real size (not the envelope's 200 bytes), by
 * MPI_Probe and by polled MPI_Iprobe with MPI_ANY_TAG; the receive then uses the probed
 * count. Small messages go by blocking MPI_Send (device eager), the rest by MPI_Isend. */
static void c_probe_reports_real_size(void) {
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    const int tagbase = 4000;
    if (mt_rank == 0) {
        msg_t m[NSIZES];
        MPI_Request q[NSIZES];
        MPI_Status sts[NSIZES];
        for (int i = 0; i < NSIZES; ++i) {
            send_prepare(&m[i], &CUDA_AUTO, sizes[i], msg_off(tagbase + i, 0));
            q[i] = MPI_REQUEST_NULL;
            if (sizes[i] <= 16 * KiB)
                MCK(MPI_Send(m[i].p, m[i].count, MPI_CHAR, 1, tagbase + i, W));
            else
                MCK(MPI_Isend(m[i].p, m[i].count, cuda_t, 1, tagbase + i, W, &q[i]));
        }
        gpu_wait_all(NSIZES, q, sts, "sends to the prober");
        for (int i = 0; i < NSIZES; ++i) msg_free(&m[i]);
    } else {
        for (int i = 0; i < NSIZES; ++i) {
            MPI_Status st;
            int tag = tagbase + i;
            if (i % 2 == 0) {
                MCK(MPI_Probe(0, tag, W, &st));
            } else {
                int flag = 0;
                double end = MPI_Wtime() + GPU_TIMEOUT_S;
                while (!flag && MPI_Wtime() < end) MCK(MPI_Iprobe(0, MPI_ANY_TAG, W, &flag, &st));
                if (!flag) gpu_die(__FILE__, __LINE__, "MPI_Iprobe found no message %d in %.0f s", i, GPU_TIMEOUT_S);
            }
            GPU_CHECK_STATUS(st, 0, tag, sizes[i], "%s of a %zu-byte device message", i % 2 ? "MPI_Iprobe" : "MPI_Probe",
                             sizes[i]);
            /* the probed count; where it is wrong (reported above) the real size keeps both
             * ranks in step */
            int count = gpu_count_bytes(&st);
            if (count != (int)sizes[i]) count = (int)sizes[i];
            msg_t m;
            recv_prepare(&m, &CUDA_TAGGED, (size_t)count);
            MPI_Status rs;
            MCK(MPI_Recv(m.p, count, cuda_t, 0, tag, W, &rs));
            GPU_CHECK_STATUS(rs, 0, tag, sizes[i], "MPI_Recv after the probe, %zu bytes", sizes[i]);
            recv_check(&m, sizes[i], msg_off(tag, 0), "probe, then receive", sizes[i]);
            msg_free(&m);
        }
    }
    MCK(MPI_Type_free(&cuda_t));
}

/* MPI_Mprobe / MPI_Improbe report the real size, and MPI_Mrecv / MPI_Imrecv take the
 * matched message into device memory. Rank 1 sends, rank 0 receives. */
static void c_mprobe_mrecv_into_device(void) {
    static const size_t msz[] = {0, 1, 200, 16 * KiB + 1, 256 * KiB + 1, 8 * MiB + 1, 64 * MiB};
    const int nm = (int)(sizeof msz / sizeof msz[0]), tagbase = 4100;
    if (mt_rank == 1) {
        msg_t m[8];
        MPI_Request q[8];
        MPI_Status sts[8];
        for (int i = 0; i < nm; ++i) {
            send_prepare(&m[i], &CUDA_AUTO, msz[i], msg_off(tagbase + i, 1));
            MCK(MPI_Isend(m[i].p, m[i].count, MPI_CHAR, 0, tagbase + i, W, &q[i]));
        }
        gpu_wait_all(nm, q, sts, "sends to the matched prober");
        for (int i = 0; i < nm; ++i) msg_free(&m[i]);
    } else {
        for (int i = 0; i < nm; ++i) {
            MPI_Status st, rs;
            MPI_Message msg = MPI_MESSAGE_NULL;
            int tag = tagbase + i;
            if (i % 2 == 0) {
                MCK(MPI_Mprobe(1, tag, W, &msg, &st));
            } else {
                int flag = 0;
                double end = MPI_Wtime() + GPU_TIMEOUT_S;
                while (!flag && MPI_Wtime() < end) MCK(MPI_Improbe(1, tag, W, &flag, &msg, &st));
                if (!flag) gpu_die(__FILE__, __LINE__, "MPI_Improbe found no message %d", i);
            }
            GPU_CHECK_STATUS(st, 1, tag, msz[i], "%s of a %zu-byte device message", i % 2 ? "MPI_Improbe" : "MPI_Mprobe",
                             msz[i]);
            msg_t m;
            recv_prepare(&m, &CUDA_AUTO, msz[i]);
            if (i % 2 == 0) {
                MCK(MPI_Mrecv(m.p, m.count, MPI_CHAR, &msg, &rs));
            } else {
                MPI_Request r;
                MCK(MPI_Imrecv(m.p, m.count, MPI_CHAR, &msg, &r));
                gpu_wait(&r, &rs, "MPI_Imrecv");
            }
            GPU_CHECK_STATUS(rs, 1, tag, msz[i], "%s, %zu bytes", i % 2 ? "MPI_Imrecv" : "MPI_Mrecv", msz[i]);
            recv_check(&m, msz[i], msg_off(tag, 1), "matched receive", msz[i]);
            msg_free(&m);
        }
    }
}

/* MPI_ANY_SOURCE / MPI_ANY_TAG receives into device memory: blocking receives larger
 * than the message (rank 1), then nonblocking ones posted all at once and completed with
 * MPI_Waitany (rank 0). */
static void c_any_source_into_device(void) {
    const int tagbase = 4200;
    /* part 1: rank 0 sends in order, rank 1 takes them with ANY_SOURCE/ANY_TAG */
    if (mt_rank == 0) {
        for (int i = 0; i < NSIZES; ++i) {
            msg_t m;
            send_prepare(&m, &CUDA_AUTO, sizes[i], msg_off(tagbase + i, 0));
            MCK(MPI_Send(m.p, m.count, MPI_CHAR, 1, tagbase + i, W));
            msg_free(&m);
        }
    } else {
        MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
        for (int i = 0; i < NSIZES; ++i) {
            msg_t m;
            MPI_Status st;
            recv_prepare(&m, &CUDA_TAGGED, sizes[i] + 4096);
            MCK(MPI_Recv(m.p, m.count, cuda_t, MPI_ANY_SOURCE, MPI_ANY_TAG, W, &st));
            GPU_CHECK_STATUS(st, 0, tagbase + i, sizes[i], "ANY_SOURCE/ANY_TAG MPI_Recv, %zu bytes", sizes[i]);
            recv_check(&m, sizes[i], msg_off(tagbase + i, 0), "ANY_SOURCE receive (4 KiB larger)", sizes[i]);
            msg_free(&m);
        }
        MCK(MPI_Type_free(&cuda_t));
    }
    /* part 2: rank 1 sends, rank 0 has every ANY_SOURCE Irecv posted (distinct tags) */
    const int tb2 = tagbase + 100;
    if (mt_rank == 1) {
        MCK(MPI_Barrier(W)); /* rank 0's receives are posted */
        msg_t m[NSIZES];
        MPI_Request q[NSIZES];
        MPI_Status sts[NSIZES];
        for (int i = 0; i < NSIZES; ++i) {
            send_prepare(&m[i], &HOST_PLAIN, sizes[i], msg_off(tb2 + i, 1));
            MCK(MPI_Isend(m[i].p, m[i].count, MPI_CHAR, 0, tb2 + i, W, &q[i]));
        }
        gpu_wait_all(NSIZES, q, sts, "host sends to ANY_SOURCE device receives");
        for (int i = 0; i < NSIZES; ++i) msg_free(&m[i]);
    } else {
        msg_t m[NSIZES];
        MPI_Request q[NSIZES];
        MPI_Status sts[NSIZES];
        for (int i = 0; i < NSIZES; ++i) {
            recv_prepare(&m[i], &CUDA_AUTO, sizes[i]);
            MCK(MPI_Irecv(m[i].p, m[i].count, MPI_CHAR, MPI_ANY_SOURCE, tb2 + i, W, &q[i]));
        }
        MCK(MPI_Barrier(W));
        for (int k = 0; k < NSIZES; ++k) { /* completions in any order */
            int idx = MPI_UNDEFINED;
            MPI_Status one;
            MCK(MPI_Waitany(NSIZES, q, &idx, &one));
            MT_CHECK(idx >= 0 && idx < NSIZES, "MPI_Waitany returned index %d", idx);
            if (idx >= 0 && idx < NSIZES) sts[idx] = one;
        }
        for (int i = 0; i < NSIZES; ++i) {
            GPU_CHECK_STATUS(sts[i], 1, tb2 + i, sizes[i], "ANY_SOURCE MPI_Irecv, %zu bytes", sizes[i]);
            recv_check(&m[i], sizes[i], msg_off(tb2 + i, 1), "ANY_SOURCE MPI_Irecv", sizes[i]);
            msg_free(&m[i]);
        }
    }
}

/* A device receive larger than the message: count and bytes are the message's, and
 * nothing after it is written (host and device senders). */
static void c_receive_larger_than_message(void) {
    const int tagbase = 4400;
    const view_t *senders[2] = {&HOST_PLAIN, &CUDA_TAGGED};
    for (int s = 0; s < 2; ++s) {
        MPI_Datatype st = view_type(senders[s]);
        for (int i = 0; i < NSIZES - 1; ++i) { /* all but 64 MiB */
            int tag = tagbase + 20 * s + i;
            msg_t m;
            if (mt_rank == 0) {
                send_prepare(&m, senders[s], sizes[i], msg_off(tag, 0));
                MCK(MPI_Send(m.p, m.count, st, 1, tag, W));
            } else {
                MPI_Status rs;
                recv_prepare(&m, &CUDA_AUTO, 2 * sizes[i] + 64 * KiB + 1);
                MCK(MPI_Recv(m.p, m.count, MPI_CHAR, 0, tag, W, &rs));
                GPU_CHECK_STATUS(rs, 0, tag, sizes[i], "larger receive from %s, %zu bytes", senders[s]->name, sizes[i]);
                recv_check(&m, sizes[i], msg_off(tag, 0), "receive larger than the message", sizes[i]);
            }
            msg_free(&m);
        }
        view_type_free(senders[s], &st);
    }
}

/* Polls one request whose completion may carry an error; returns the error code. */
static int test_until(MPI_Request *r, MPI_Status *st, const char *what) {
    double end = MPI_Wtime() + GPU_TIMEOUT_S;
    for (;;) {
        int flag = 0;
        st->MPI_ERROR = MPI_SUCCESS;
        int rc = MPI_Test(r, &flag, st);
        if (rc != MPI_SUCCESS) return rc;
        if (flag) return st->MPI_ERROR;
        if (MPI_Wtime() > end) gpu_die(__FILE__, __LINE__, "%s: still pending after %.0f s", what, GPU_TIMEOUT_S);
    }
}

/* A device receive too small for the message gets MPI_ERR_TRUNCATE, writes nothing past
 * its count, and the sender completes normally (nothing is stranded); a normal transfer
 * on the same tag works afterwards. */
static void c_truncation_into_device(void) {
    const int tag = 4500;
    struct {
        size_t msg, room;
        int blocking_send, blocking_recv;
    } t[] = {{1 * MiB, 64 * KiB, 0, 1}, {100, 50, 1, 1}, {100, 50, 0, 0}, {300 * KiB, 200, 0, 0}};
    const int nt = (int)(sizeof t / sizeof t[0]);
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    for (int k = 0; k < nt; ++k) {
        msg_t m;
        if (mt_rank == 0) {
            send_prepare(&m, &CUDA_AUTO, t[k].msg, msg_off(tag + k, 0));
            if (t[k].blocking_send) {
                MCK(MPI_Send(m.p, m.count, MPI_CHAR, 1, tag, W));
            } else {
                MPI_Request r;
                MPI_Status st;
                MCK(MPI_Isend(m.p, m.count, cuda_t, 1, tag, W, &r));
                int rc = test_until(&r, &st, "send whose receive truncates");
                MT_CHECK(rc == MPI_SUCCESS, "case %d: the sender of a truncated message got %s", k,
                         gpu_class_name(gpu_err_class(rc)));
            }
        } else {
            MPI_Status st;
            int rc;
            recv_prepare(&m, &CUDA_TAGGED, t[k].room);
            if (t[k].blocking_recv) {
                rc = MPI_Recv(m.p, m.count, cuda_t, 0, tag, W, &st);
            } else {
                MPI_Request r;
                MCK(MPI_Irecv(m.p, m.count, cuda_t, 0, tag, W, &r));
                rc = test_until(&r, &st, "truncating receive");
            }
            int cls = gpu_err_class(rc);
            MT_CHECK(cls == MPI_ERR_TRUNCATE, "case %d: %zu-byte message into %zu-byte device %s gave %s", k, t[k].msg,
                     t[k].room, t[k].blocking_recv ? "MPI_Recv" : "MPI_Irecv", gpu_class_name(cls));
            const unsigned char *got = gpu_download(m.p, t[k].room + GPU_GUARD);
            GPU_CHECK_UNTOUCHED(got + t[k].room, GPU_GUARD, GPU_SENTINEL, "case %d: past a truncated receive", k);
        }
        msg_free(&m);
        /* the channel still carries a normal device message on the same tag */
        if (mt_rank == 0) {
            send_prepare(&m, &CUDA_TAGGED, 4097, msg_off(tag + 50 + k, 0));
            MCK(MPI_Send(m.p, m.count, cuda_t, 1, tag, W));
        } else {
            MPI_Status st;
            recv_prepare(&m, &CUDA_AUTO, 4097);
            MCK(MPI_Recv(m.p, m.count, MPI_CHAR, 0, tag, W, &st));
            GPU_CHECK_STATUS(st, 0, tag, 4097, "message after truncation %d", k);
            recv_check(&m, 4097, msg_off(tag + 50 + k, 0), "message after a truncation", 4097);
        }
        msg_free(&m);
    }
    MCK(MPI_Type_free(&cuda_t));
}

/* Zero-byte device messages: from a device pointer (tagged and untagged), from NULL
 * tagged CUDA, by MPI_Send and MPI_Isend; count 0 and nothing written. */
static void c_zero_byte_device_messages(void) {
    const int tag = 4600;
    MPI_Datatype cuda_t = gpu_tagged(MPI_CHAR, MPIX_ACC_BUF_CUDA);
    unsigned char *d = gpu_malloc(64 + GPU_GUARD);
    gpu_memset(d, GPU_SENTINEL, 64 + GPU_GUARD);
    if (mt_rank == 0) {
        MPI_Request r[2];
        MPI_Status sts[2];
        MCK(MPI_Send(d, 0, cuda_t, 1, tag, W));
        MCK(MPI_Send(NULL, 0, cuda_t, 1, tag + 1, W));
        MCK(MPI_Send(d, 0, MPI_DOUBLE, 1, tag + 2, W));
        MCK(MPI_Isend(d, 0, cuda_t, 1, tag + 3, W, &r[0]));
        MCK(MPI_Isend(d, 0, MPI_CHAR, 1, tag + 4, W, &r[1]));
        gpu_wait_all(2, r, sts, "zero-byte Isends");
    } else {
        MPI_Status st;
        MPI_Request r;
        MCK(MPI_Recv(d, 64, cuda_t, 0, tag, W, &st));
        GPU_CHECK_STATUS(st, 0, tag, 0, "0 bytes from a tagged device pointer");
        MCK(MPI_Recv(d, 0, cuda_t, 0, tag + 1, W, &st));
        GPU_CHECK_STATUS(st, 0, tag + 1, 0, "0 bytes from NULL tagged CUDA");
        MCK(MPI_Recv(d, 8, MPI_DOUBLE, 0, tag + 2, W, &st));
        GPU_CHECK_STATUS(st, 0, tag + 2, 0, "0 doubles from an untagged device pointer");
        MCK(MPI_Irecv(d, 64, MPI_CHAR, 0, tag + 3, W, &r));
        gpu_wait(&r, &st, "zero-byte Irecv");
        GPU_CHECK_STATUS(st, 0, tag + 3, 0, "0 bytes by MPI_Isend, tagged");
        MCK(MPI_Recv(NULL, 0, cuda_t, 0, tag + 4, W, &st));
        GPU_CHECK_STATUS(st, 0, tag + 4, 0, "0 bytes into NULL tagged CUDA");
        const unsigned char *got = gpu_download(d, 64 + GPU_GUARD);
        GPU_CHECK_UNTOUCHED(got, 64 + GPU_GUARD, GPU_SENTINEL, "device buffer of zero-byte receives");
    }
    CK(cudaFree(d));
    MCK(MPI_Type_free(&cuda_t));
}

/* Small device sends until one is pulled by a blocking device receive, which ends any
 * run of staged sends an earlier declined offer left: the receiver asks for pulls again
 * (PULL_HINT) at the first staged payload, and the sender takes that within a few sends. */
static int end_staged_run(int tag) {
    for (int k = 0, pulled = 0; !pulled; ++k) {
        const long long before = mpiacc_counter_value("protocol.send.ipc");
        MPI_Datatype t = view_type(&CUDA_TAGGED);
        msg_t m;
        if (mt_rank == 0) {
            send_prepare(&m, &CUDA_TAGGED, 64, msg_off(tag, 0));
            MCK(MPI_Send(m.p, m.count, t, 1, tag, W));
            pulled = mpiacc_counter_value("protocol.send.ipc") > before;
        } else {
            recv_prepare(&m, &CUDA_TAGGED, 64);
            MCK(MPI_Recv(m.p, m.count, t, 0, tag, W, MPI_STATUS_IGNORE));
            recv_check(&m, 64, msg_off(tag, 0), "small device send ending a staged run", 64);
        }
        msg_free(&m);
        view_type_free(&CUDA_TAGGED, &t);
        MCK(MPI_Bcast(&pulled, 1, MPI_INT, 0, W));
        if (!pulled && k == 1100) {
            MT_CHECK(0, "no small device send was pulled in %d sends into device memory", k + 1);
            return 0;
        }
    }
    return 1;
}

/* Small device sends (64 B and 4 KiB: into a bounce and in place) from rank 0 to rank 1
 * in five phases, each checking the path of every send:
 *   1. blocking sends, blocking device receives: pulled;
 *   2. blocking sends, nonblocking host receives (MPI_Irecv + MPI_Wait): pulled;
 *   3. blocking sends, blocking host receives: a small pull comes sooner staged by the
 *      sender, so the receive declines it and the sender stages a run of small sends to
 *      it: every send declined or staged, none pulled;
 *   4. nonblocking sends (MPI_Isend + MPI_Wait), nonblocking host receives: pulled, as
 *      the run a blocking receive started holds for blocking sends only;
 *   5. phase 3 again: still declined or staged (phase 4's pulls did not end the run);
 *   6. phase 1 again, right after phase 5's run (35 sends left of it): the receiver asks
 *      for pulls again at the first staged payload into device memory, so only the sends
 *      until the sender takes that hint go staged (it runs ahead of the receiver by the
 *      eager sends MPICH buffers, and looks once in 4 staged sends), and the rest are
 *      pulled, which is faster for these sizes.
 * A peer without a CUDA context declines every offer (cuda_host_only_peer). Without IPC
 * every send goes staged. Every message is checked. */
static void c_small_sends_pulled_or_staged_by_receive_kind(void) {
    enum { N = 40, PHASES = 6, STAGED_AFTER_RUN_MAX = 16 };
    /* The suite also runs whole with MPIACC_IPC=0: then every small send goes staged. */
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    const int tagbase = 6000;
    static const struct {
        const char *name;
        int device_recv, nonblocking_recv, nonblocking_send, pulled, after_run;
    } phase[PHASES] = {
        {"blocking sends into blocking device receives", 1, 0, 0, 1, 0},
        {"blocking sends into nonblocking host receives", 0, 1, 0, 1, 0},
        {"blocking sends into blocking host receives", 0, 0, 0, 0, 0},
        {"nonblocking sends into nonblocking host receives", 0, 1, 1, 1, 0},
        {"blocking sends into blocking host receives, again", 0, 0, 0, 0, 0},
        {"blocking sends into blocking device receives, after a run", 1, 0, 0, 1, 1},
    };
    if (ipc && !end_staged_run(tagbase - 1)) return;
    for (int p = 0; p < PHASES; ++p) {
        const long long ipc0 = mpiacc_counter_value("protocol.send.ipc");
        const long long declined0 = mpiacc_counter_value("protocol.send.ipc_declined");
        const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
        const long long small0 = mpiacc_counter_value("protocol.recv.ipc_declined_small");
        const view_t *R = phase[p].device_recv ? &CUDA_TAGGED : &HOST_PLAIN;
        for (int i = 0; i < N; ++i) {
            const size_t n = i % 2 ? 4096 : 64;
            MPI_Datatype st = view_type(&CUDA_TAGGED), rt = view_type(R);
            const int tag = tagbase + p * N + i;
            msg_t m;
            if (mt_rank == 0) {
                send_prepare(&m, &CUDA_TAGGED, n, msg_off(tag, 0));
                if (phase[p].nonblocking_send) {
                    MPI_Request r;
                    MCK(MPI_Isend(m.p, m.count, st, 1, tag, W, &r));
                    MCK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                } else {
                    MCK(MPI_Send(m.p, m.count, st, 1, tag, W));
                }
            } else {
                MPI_Status stat;
                recv_prepare(&m, R, n);
                if (phase[p].nonblocking_recv) {
                    MPI_Request r;
                    MCK(MPI_Irecv(m.p, m.count, rt, 0, tag, W, &r));
                    MCK(MPI_Wait(&r, &stat));
                } else {
                    MCK(MPI_Recv(m.p, m.count, rt, 0, tag, W, &stat));
                }
                GPU_CHECK_STATUS(stat, 0, tag, n, "message %d of phase %d (%s)", i, p + 1, phase[p].name);
                recv_check(&m, n, msg_off(tag, 0), phase[p].name, n);
            }
            msg_free(&m);
            view_type_free(&CUDA_TAGGED, &st);
            view_type_free(R, &rt);
        }
        long long c[4] = {mpiacc_counter_value("protocol.send.ipc") - ipc0,
                          mpiacc_counter_value("protocol.send.ipc_declined") - declined0,
                          mpiacc_counter_value("protocol.send.eager_device") - eager0,
                          mpiacc_counter_value("protocol.recv.ipc_declined_small") - small0};
        long long sum[4];
        MCK(MPI_Reduce(c, sum, 4, MPI_LONG_LONG, MPI_SUM, 0, W));
        if (mt_rank != 0) continue;
        const long long pulled = sum[0], declined = sum[1], staged = sum[2], declined_small = sum[3];
        if (!ipc) {
            MT_CHECK(staged == N, "phase %d (%s) without IPC: %lld of %d small sends went staged", p + 1,
                     phase[p].name, staged, N);
        } else if (phase[p].after_run) {
            MT_CHECK(declined == 0 && staged >= 1 && staged <= STAGED_AFTER_RUN_MAX && pulled == N - staged,
                     "phase %d (%s): %lld of %d small sends pulled, %lld declined, %lld staged (the first, and at "
                     "most %d of the run's 35, should go staged)",
                     p + 1, phase[p].name, pulled, N, declined, staged, STAGED_AFTER_RUN_MAX);
        } else if (phase[p].pulled) {
            MT_CHECK(pulled == N && declined == 0 && staged == 0,
                     "phase %d (%s): %lld of %d small sends pulled, %lld declined, %lld staged", p + 1, phase[p].name,
                     pulled, N, declined, staged);
        } else {
            MT_CHECK(pulled == 0 && declined + staged == N && declined_small == declined && (p != 2 || declined >= 1),
                     "phase %d (%s): %lld of %d small sends pulled, %lld declined (%lld by the receiver), %lld staged",
                     p + 1, phase[p].name, pulled, N, declined, declined_small, staged);
        }
    }
    /* The next cases count pulls again. */
    if (ipc) end_staged_run(tagbase + PHASES * N);
}

/* Small nonblocking device sends with nothing of the user's to wait for go staged, as the
 * plain payload, when no pull is on offer (MPIACC_IPC=0); with a stream attribute they
 * keep the handshake. Either way MPI_Issend stays synchronous, a host send after them
 * arrives after them, and the bytes are the call's. */
static void c_small_isends_go_staged_unless_they_depend_on_a_stream(void) {
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    static const size_t sz[] = {1, 4096, 64 * 1024};
    const int tagbase = 6500;
    cudaStream_t s = NULL;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int with_stream = 0; with_stream < 2; ++with_stream) {
        for (int k = 0; k < 3; ++k) {
            const size_t n = sz[k];
            const int tag = tagbase + 10 * with_stream + k;
            MPI_Datatype t = view_type(&CUDA_TAGGED);
            if (with_stream) MCK(MPI_Type_set_attr(t, MPIX_ACC_STREAM, (void *)s));
            msg_t m;
            if (mt_rank == 0) {
                send_prepare(&m, &CUDA_TAGGED, n, msg_off(tag, 0));
                const long long eager0 = mpiacc_counter_value("protocol.send.eager_device");
                MPI_Request r;
                MCK(MPI_Issend(m.p, m.count, t, 1, tag, W, &r));
                const long long eager = mpiacc_counter_value("protocol.send.eager_device") - eager0;
                int flag = 0;
                for (int i = 0; i < 100 && !flag; ++i) MCK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
                MT_CHECK(!flag, "%zu bytes%s: MPI_Issend completed before the receive was posted", n,
                         with_stream ? " with a stream" : "");
                int after = (int)n;
                MCK(MPI_Barrier(W));
                MCK(MPI_Send(&after, 1, MPI_INT, 1, tag, W));
                MCK(MPI_Wait(&r, MPI_STATUS_IGNORE));
                if (!ipc)
                    MT_CHECK(eager == (with_stream ? 0 : 1),
                             "%zu bytes%s: %lld sends went staged at the call, expected %d", n,
                             with_stream ? " with a stream" : "", eager, with_stream ? 0 : 1);
            } else {
                MCK(MPI_Barrier(W));
                MPI_Status stat;
                recv_prepare(&m, &HOST_PLAIN, n);
                MCK(MPI_Recv(m.p, m.count, MPI_CHAR, 0, tag, W, &stat));
                GPU_CHECK_STATUS(stat, 0, tag, n, "small Issend%s", with_stream ? " with a stream" : "");
                recv_check(&m, n, msg_off(tag, 0), "small Issend", n);
                int after = 0;
                MCK(MPI_Recv(&after, 1, MPI_INT, 0, tag, W, MPI_STATUS_IGNORE));
                MT_CHECK(after == (int)n, "the host send after the Issend carried %d", after);
            }
            msg_free(&m);
            view_type_free(&CUDA_TAGGED, &t);
        }
    }
    CK(cudaStreamDestroy(s));
}

/* One message of the window below: which kind of send, and its size. Every message
 * carries the reference bytes of its own offset, so one out of order fails the check. */
#define WINDOW 48 /* more than the 32 staging slots of the default pool */
static size_t window_size(int i) {
    static const size_t sz[] = {8, 1, 4096, 64 * 1024, 100, 16 * KiB + 1, 512, 3};
    return sz[i % 8];
}
typedef enum { W_DEVICE_ISEND, W_HOST_ISEND, W_HOST_SEND, W_DEVICE_ISSEND, W_DEVICE_SEND } wkind_t;
static wkind_t window_kind(int i) {
    if (i % 12 == 5) return W_HOST_ISEND;
    if (i % 12 == 9) return W_HOST_SEND;
    if (i == 20) return W_DEVICE_ISSEND;
    if (i == 31) return W_DEVICE_SEND;
    return W_DEVICE_ISEND;
}

/* A window of small nonblocking device sends, all on one tag, with host sends (MPI_Isend
 * and MPI_Send), an MPI_Issend and a blocking device send among them. Without IPC each
 * device MPI_Isend returns once its staging copy is issued and its payload goes to MPICH
 * later; nothing may overtake it. The receiver takes them with MPI_ANY_TAG, alternately
 * into host and device memory, and checks each one's bytes, size and tag. Every
 * receive buffer holds 64 KiB: with IPC a device message under the envelope's 200 bytes
 * comes by envelope, which a host receive takes in place, and the bytes past the message
 * must still be as they were. */
static void c_window_of_small_isends_arrives_in_call_order_among_other_sends(void) {
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    const int tag = 7700;
    msg_t m[WINDOW];
    MPI_Request r[WINDOW];
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    if (mt_rank == 0) {
        const long long later0 = mpiacc_counter_value("protocol.send.eager_device_posted_later");
        const long long waited0 = mpiacc_counter_value("protocol.send.waited_for_earlier_payloads");
        for (int i = 0; i < WINDOW; ++i) {
            const size_t n = window_size(i);
            const wkind_t k = window_kind(i);
            const int host = k == W_HOST_ISEND || k == W_HOST_SEND;
            send_prepare(&m[i], host ? &HOST_PLAIN : &CUDA_TAGGED, n, msg_off(tag + i, 0));
            r[i] = MPI_REQUEST_NULL;
            switch (k) {
                case W_DEVICE_ISEND: MCK(MPI_Isend(m[i].p, m[i].count, t, 1, tag, W, &r[i])); break;
                case W_DEVICE_ISSEND: MCK(MPI_Issend(m[i].p, m[i].count, t, 1, tag, W, &r[i])); break;
                case W_DEVICE_SEND: MCK(MPI_Send(m[i].p, m[i].count, t, 1, tag, W)); break;
                case W_HOST_ISEND: MCK(MPI_Isend(m[i].p, m[i].count, MPI_CHAR, 1, tag, W, &r[i])); break;
                case W_HOST_SEND: MCK(MPI_Send(m[i].p, m[i].count, MPI_CHAR, 1, tag, W)); break;
            }
        }
        MCK(MPI_Waitall(WINDOW, r, MPI_STATUSES_IGNORE));
        const long long later = mpiacc_counter_value("protocol.send.eager_device_posted_later") - later0;
        const long long waited = mpiacc_counter_value("protocol.send.waited_for_earlier_payloads") - waited0;
        /* Without IPC, most device MPI_Isends return before their copy ends (all but those
         * that found every staging slot taken), and the sends behind them waited. */
        if (!ipc) {
            MT_CHECK(later >= WINDOW / 4, "%lld of the window's payloads were posted after their call", later);
            MT_CHECK(waited >= 1, "no send waited for the payloads before it (%lld)", waited);
        }
    } else {
        for (int i = 0; i < WINDOW; ++i) {
            const size_t n = window_size(i);
            const view_t *into = i % 2 ? &CUDA_TAGGED : &HOST_PLAIN;
            MPI_Datatype rt = view_type(into);
            recv_prepare(&m[i], into, 64 * 1024);
            MPI_Status st;
            MCK(MPI_Recv(m[i].p, m[i].count, rt, 0, MPI_ANY_TAG, W, &st));
            GPU_CHECK_STATUS(st, 0, tag, n, "message %d of the window", i);
            recv_check(&m[i], n, msg_off(tag + i, 0), "window message", n);
            view_type_free(into, &rt);
        }
    }
    for (int i = 0; i < WINDOW; ++i) msg_free(&m[i]);
    view_type_free(&CUDA_TAGGED, &t);
}

/* Without IPC a small device MPI_Isend returns once its staging copy is issued, and its
 * payload goes to MPICH later: at a later such call once more than 8 payloads wait ahead
 * of it (the protocol's kStagedPostBatch) and the latest one's copy has ended, else at
 * the wait. Rank 0 issues 25 sends of 256 B on one tag, 200 us apart (each copy has ended
 * by the next call), and waits for them last; rank 1 receives them in order into device
 * memory and checks each. (With IPC they are pulled; then only the bytes are checked.) */
static void c_small_isends_post_earlier_payloads_at_later_calls(void) {
    enum { N = 25 };
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    const long long batch = 8;  /* kStagedPostBatch */
    const int tag = 7960;
    const size_t n = 256;
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    msg_t m[N];
    if (mt_rank == 0) {
        MPI_Request r[N];
        const long long at_call0 = mpiacc_counter_value("protocol.send.eager_device_posted_at_call");
        for (int i = 0; i < N; ++i) {
            send_prepare(&m[i], &CUDA_TAGGED, n, msg_off(tag + i, 0));
            MCK(MPI_Isend(m[i].p, m[i].count, t, 1, tag, W, &r[i]));
            usleep(200);
        }
        MCK(MPI_Waitall(N, r, MPI_STATUSES_IGNORE));
        const long long at_call = mpiacc_counter_value("protocol.send.eager_device_posted_at_call") - at_call0;
        if (!ipc)
            MT_CHECK(at_call >= 1 && at_call <= (N - 1) / batch, "%lld calls posted earlier payloads (batch %lld)",
                     at_call, batch);
    } else {
        for (int i = 0; i < N; ++i) {
            recv_prepare(&m[i], &CUDA_TAGGED, n);
            MPI_Status st;
            MCK(MPI_Recv(m[i].p, m[i].count, t, 0, tag, W, &st));
            GPU_CHECK_STATUS(st, 0, tag, n, "message %d", i);
            recv_check(&m[i], n, msg_off(tag + i, 0), "small Isend", n);
        }
    }
    for (int i = 0; i < N; ++i) msg_free(&m[i]);
    view_type_free(&CUDA_TAGGED, &t);
}

/* The progress rule (DESIGN 2.6) for a payload still being staged: rank 0 posts a small
 * device MPI_Isend and blocks in MPI_Barrier at once, with no MPI call between that could
 * hand the payload to MPICH, while rank 1 blocks in MPI_Recv before its MPI_Barrier. The
 * barrier must drive the send, or both ranks wait for ever. */
static void c_small_isend_then_barrier_while_the_peer_receives(void) {
    const int tag = 7900;
    const size_t n = 64;
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    msg_t m;
    if (mt_rank == 0) {
        send_prepare(&m, &CUDA_TAGGED, n, msg_off(tag, 0));
        MPI_Request r;
        MCK(MPI_Isend(m.p, m.count, t, 1, tag, W, &r));
        MCK(MPI_Barrier(W));
        MCK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        recv_prepare(&m, &HOST_PLAIN, n);
        MPI_Status st;
        MCK(MPI_Recv(m.p, m.count, MPI_CHAR, 0, tag, W, &st));
        GPU_CHECK_STATUS(st, 0, tag, n, "small Isend before a barrier");
        recv_check(&m, n, msg_off(tag, 0), "small Isend before a barrier", n);
        MCK(MPI_Barrier(W));
    }
    msg_free(&m);
    view_type_free(&CUDA_TAGGED, &t);
}

/* A small device MPI_Isend cancelled at once is either cancelled (its payload never went
 * to MPICH, and never arrives) or sent whole; one freed with MPI_Request_free still
 * arrives. The sends around them, on the same tag, arrive in call order either way.
 * Message 2 is shorter than the others, so the receiver tells from the size whether it
 * came, and checks that against what MPI_Test_cancelled said on the sender. */
static void c_cancelled_or_freed_small_isends_keep_the_order(void) {
    const int tag = 7800;
    enum { N = 6 };
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    const size_t n = 4096, n2 = 1000;
    msg_t m[N + 1];
    memset(m, 0, sizeof m);
    if (mt_rank == 0) {
        MPI_Request r[N];
        for (int i = 0; i < N; ++i) {
            send_prepare(&m[i], &CUDA_TAGGED, i == 2 ? n2 : n, msg_off(tag + i, 0));
            MCK(MPI_Isend(m[i].p, m[i].count, t, 1, tag, W, &r[i]));
        }
        MCK(MPI_Cancel(&r[2]));
        MPI_Status st;
        MCK(MPI_Wait(&r[2], &st)); /* not cancelled: complete once received */
        int cancelled = 0;
        MCK(MPI_Test_cancelled(&st, &cancelled));
        MCK(MPI_Request_free(&r[4]));
        int host = 0x5eed;
        MCK(MPI_Send(&host, 1, MPI_INT, 1, tag, W));
        for (int i = 0; i < N; ++i)
            if (i != 2 && i != 4) MCK(MPI_Wait(&r[i], MPI_STATUS_IGNORE));
        MCK(MPI_Send(&cancelled, 1, MPI_INT, 1, tag + 1, W));
        MCK(MPI_Barrier(W)); /* the freed send has arrived: its buffer may go */
    } else {
        int arrived2 = 0;
        for (int i = 0, k = 0; i < N; ++i, ++k) {
            recv_prepare(&m[k], &HOST_PLAIN, n);
            MPI_Status st;
            MCK(MPI_Recv(m[k].p, m[k].count, MPI_CHAR, 0, tag, W, &st));
            int got = 0;
            MCK(MPI_Get_count(&st, MPI_CHAR, &got));
            if (i == 2 && (size_t)got != n2) ++i; /* message 2 never came: this is 3 */
            if (i == 2) arrived2 = 1;
            const size_t len = i == 2 ? n2 : n;
            GPU_CHECK_STATUS(st, 0, tag, len, "message %d", i);
            recv_check(&m[k], len, msg_off(tag + i, 0), "message around a cancelled or freed send", len);
        }
        int host = 0, cancelled = -1;
        MCK(MPI_Recv(&host, 1, MPI_INT, 0, tag, W, MPI_STATUS_IGNORE));
        MT_CHECK(host == 0x5eed, "the host send after the window carried %#x", host);
        MCK(MPI_Recv(&cancelled, 1, MPI_INT, 0, tag + 1, W, MPI_STATUS_IGNORE));
        MT_CHECK(cancelled == !arrived2, "MPI_Test_cancelled said %d, and message 2 %s", cancelled,
                 arrived2 ? "arrived" : "never came");
        MCK(MPI_Barrier(W));
    }
    for (int i = 0; i < N + 1; ++i) msg_free(&m[i]);
    view_type_free(&CUDA_TAGGED, &t);
}

/* Device-to-device copies within one GPU of up to MPIACC_CUDA_KERNEL_COPY_MAX (32 KiB)
 * run as a one-block kernel when both ends are 16-byte aligned, and on a copy engine
 * otherwise. Device to device at sizes around the vector width and the kernel's limit,
 * from and to buffers 0, 1, 3 and 16 bytes into their allocations: every byte lands,
 * nothing around it is written, and where both ranks use one GPU (one PCI location) the
 * aligned messages were pulled by kernel unless the knob is 0. Pulls from another GPU,
 * and everything without IPC (staging has a host side), run on copy engines: no kernel
 * runs. */
static void c_small_copies_by_kernel_at_every_alignment(void) {
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    /* Small sends staged after an earlier case's declined offer are no pulls to count. */
    if (ipc && !end_staged_run(6998)) return;
    static const size_t sz[] = {1, 8, 15, 16, 17, 200, 4096, 32 * KiB - 1, 32 * KiB, 32 * KiB + 1};
    static const size_t send_off[] = {0, 1, 16}, recv_off[] = {0, 3, 16};
    enum { NS = sizeof sz / sizeof sz[0], NO = 3 };
    const size_t room = 32 * KiB + 64 + GPU_GUARD;
    unsigned char *d = gpu_malloc(room);
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    const long long kernel0 = mpiacc_counter_value("cuda.copy.kernel");
    const long long resident0 = mpiacc_counter_value("cuda.copy.resident");
    long long aligned_small = 0;
    int tag = 7000;
    for (int i = 0; i < NS; ++i)
        for (int a = 0; a < NO; ++a) {
            const size_t n = sz[i], so = send_off[a], ro = recv_off[(a + i) % NO];
            const size_t ref = msg_off(tag, 0);
            if (n <= 32 * KiB && so % 16 == 0 && ro % 16 == 0) ++aligned_small;
            if (mt_rank == 0) {
                gpu_upload(d + so, gpu_ref + ref, n);
                MCK(MPI_Send(d + so, (int)n, t, 1, tag, W));
            } else {
                gpu_memset(d, GPU_SENTINEL, room);
                MPI_Status st;
                MCK(MPI_Recv(d + ro, (int)n, t, 0, tag, W, &st));
                GPU_CHECK_STATUS(st, 0, tag, n, "%zu bytes from offset %zu into offset %zu", n, so, ro);
                const unsigned char *got = gpu_download(d, room);
                GPU_CHECK_UNTOUCHED(got, ro, GPU_SENTINEL, "before %zu bytes received at offset %zu", n, ro);
                GPU_CHECK_SAME(got + ro, gpu_ref + ref, n, "%zu bytes from offset %zu into offset %zu", n, so, ro);
                GPU_CHECK_UNTOUCHED(got + ro + n, room - ro - n, GPU_SENTINEL, "after %zu bytes received at offset %zu",
                                    n, ro);
            }
            ++tag;
        }
    /* Pulls the resident copier took (c_small_pulls_in_a_burst_go_to_the_resident_copier)
     * launched no kernel of their own; on one GPU they stand for kernel copies. */
    const long long resident = mpiacc_counter_value("cuda.copy.resident") - resident0;
    long long kernels = mpiacc_counter_value("cuda.copy.kernel") - kernel0, total = 0, total_resident = 0;
    MCK(MPI_Reduce(&kernels, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, W));
    MCK(MPI_Reduce(&resident, &total_resident, 1, MPI_LONG_LONG, MPI_SUM, 0, W));
#if MPIACC_HAVE_CUDA_KERNELS
    const char *knob = getenv("MPIACC_CUDA_KERNEL_COPY_MAX");
    if (mt_rank == 0) {
        if (knob && !strcmp(knob, "0"))
            MT_CHECK(total == 0, "%lld copies ran by kernel with MPIACC_CUDA_KERNEL_COPY_MAX=0", total);
        else if (!ipc)
            MT_CHECK(total == 0, "%lld copies ran by kernel without IPC (every copy has a host side)", total);
        else if (!gpu_same_device)
            MT_CHECK(total == 0, "%lld copies ran by kernel pulling from another GPU", total);
        else
            MT_CHECK(total + total_resident >= aligned_small,
                     "%lld copies ran by kernel and %lld by the resident copier for %lld aligned messages of at most "
                     "32 KiB",
                     total, total_resident, aligned_small);
    }
#else
    (void)ipc;
    (void)total_resident;
    (void)aligned_small;
    if (mt_rank == 0) MT_CHECK(total == 0, "%lld copies ran by kernel in a build without them", total);
#endif
    view_type_free(&CUDA_TAGGED, &t);
    CK(cudaFree(d));
}

/* A pull's sender learns that it is done from its FIN word (protocol/fin_words.h), not
 * from a FIN message, unless the ranks have no FIN words (MPIACC_FAULT_FIN_WORDS=1,
 * cuda_p2p_fin_message) or there is no IPC. Device sends of 64 KiB and 4 MiB + 1, pulled into device memory: four blocking
 * ones, then a window of eight. Every byte arrives, every request completes, and both
 * ranks' counters say how each pull was answered: all by word, or all by message. */
static void c_pulls_are_answered_through_the_senders_fin_word(void) {
    enum { BLOCKING = 4, IN_WINDOW = 8, PER_SIZE = BLOCKING + IN_WINDOW };
    static const size_t sz[] = {64 * KiB, 4 * MiB + 1};
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    const int words = ipc && !CUDA_P2P_FIN_MESSAGE;
    const char *mine = mt_rank == 0 ? "protocol.send.fin_word" : "protocol.recv.fin_word";
    const long long pulls0 = mpiacc_counter_value(mt_rank == 0 ? "protocol.send.ipc" : "protocol.recv.ipc");
    const long long words0 = mpiacc_counter_value(mine);
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    int tag = 7600;
    for (size_t i = 0; i < sizeof sz / sizeof sz[0]; ++i) {
        const size_t n = sz[i];
        msg_t m[PER_SIZE];
        MPI_Request q[IN_WINDOW];
        MPI_Status sts[IN_WINDOW];
        for (int k = 0; k < PER_SIZE; ++k) {
            if (mt_rank == 0)
                send_prepare(&m[k], &CUDA_TAGGED, n, msg_off(tag + k, 0));
            else
                recv_prepare(&m[k], &CUDA_TAGGED, n);
        }
        for (int k = 0; k < BLOCKING; ++k) {
            if (mt_rank == 0) {
                MCK(MPI_Send(m[k].p, m[k].count, t, 1, tag + k, W));
            } else {
                MPI_Status st;
                MCK(MPI_Recv(m[k].p, m[k].count, t, 0, tag + k, W, &st));
                GPU_CHECK_STATUS(st, 0, tag + k, n, "blocking pull %d of %zu bytes", k, n);
            }
        }
        for (int k = 0; k < IN_WINDOW; ++k) {
            msg_t *w = &m[BLOCKING + k];
            if (mt_rank == 0)
                MCK(MPI_Isend(w->p, w->count, t, 1, tag + BLOCKING + k, W, &q[k]));
            else
                MCK(MPI_Irecv(w->p, w->count, t, 0, tag + BLOCKING + k, W, &q[k]));
        }
        MCK(MPI_Waitall(IN_WINDOW, q, sts));
        for (int k = 0; k < PER_SIZE; ++k) {
            if (mt_rank == 1) {
                if (k >= BLOCKING)
                    GPU_CHECK_STATUS(sts[k - BLOCKING], 0, tag + k, n, "pull %d of %zu bytes in a window", k, n);
                recv_check(&m[k], n, msg_off(tag + k, 0), "pulled", n);
            }
            msg_free(&m[k]);
        }
        tag += PER_SIZE;
    }
    view_type_free(&CUDA_TAGGED, &t);
    long long seen[2] = {mpiacc_counter_value(mt_rank == 0 ? "protocol.send.ipc" : "protocol.recv.ipc") - pulls0,
                         mpiacc_counter_value(mine) - words0};
    long long peer[2] = {0, 0};
    MCK(MPI_Sendrecv(seen, 2, MPI_LONG_LONG, gpu_peer, 7599, peer, 2, MPI_LONG_LONG, gpu_peer, 7599, W,
                     MPI_STATUS_IGNORE));
    if (mt_rank == 0) {
        const long long sent = (long long)(PER_SIZE * (sizeof sz / sizeof sz[0]));
        const long long expect = ipc ? sent : 0;
        MT_CHECK(seen[0] == expect && peer[0] == expect, "%lld sends and %lld receives pulled, of %lld (IPC %s)",
                 seen[0], peer[0], sent, ipc ? "on" : "off");
        if (words)
            MT_CHECK(seen[1] == seen[0] && peer[1] == seen[0],
                     "of %lld pulls, %lld senders saw their FIN word and %lld receivers wrote one", seen[0], seen[1],
                     peer[1]);
        else
            MT_CHECK(seen[1] == 0 && peer[1] == 0, "%lld senders saw a FIN word and %lld receivers wrote one, with %s",
                     seen[1], peer[1], ipc ? "MPIACC_FAULT_FIN_WORDS=1" : "IPC off");
    }
}

/* Windows of 40 device sends that the receiver's first progress round finds all matched:
 * with IPC their pulls go to the device in batches (cudaMemcpyBatchAsync, at most 32 a
 * batch) unless CUDA is older than 12.8. Two windows:
 *   mixed: 8 B to 3 MiB + 1, into device memory (tagged, and found by pointer), pageable
 *     host memory (pulled through pinned slots) and, from 2 MiB, pinned host memory
 *     (pulled straight in); the device receives start their pulls in a progress round;
 *   host: 64 KiB + 1 into pageable host memory only: host receives whose envelopes
 *     MPI_Waitall's own test completes together start their pulls there.
 * Every byte and status is checked, and the receiver's batch counter says which way each
 * window went. */
static void window_of_pulls(int host_only, int tagbase) {
    enum { N = 40 };
    static const size_t sz[] = {8, 4096, 65537, 256 * KiB, MiB + 3, 3 * MiB + 1};
    enum { NSZ = sizeof sz / sizeof sz[0] };
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    int driver = 0;
    CK(cudaDriverGetVersion(&driver));
    const int batching = ipc && CUDART_VERSION >= 12080 && driver >= 12080;
    const char *name = host_only ? "host" : "mixed";
    msg_t m[N];
    MPI_Request q[N];
    MPI_Status sts[N];
    MPI_Datatype tagged = view_type(&CUDA_TAGGED);
    const long long batches0 = mpiacc_counter_value("cuda.copy.batch");
    MCK(MPI_Barrier(W));
    for (int i = 0; i < N; ++i) {
        const size_t n = host_only ? 65537 : sz[i % NSZ];
        const view_t *v = mt_rank == 0              ? &CUDA_TAGGED
                          : host_only || i % 3 == 2 ? &HOST_PLAIN
                          : n > 2 * MiB             ? &PINNED_PLAIN
                          : i % 2                   ? &CUDA_AUTO
                                                    : &CUDA_TAGGED;
        MPI_Datatype t = v == &CUDA_TAGGED ? tagged : MPI_CHAR;
        if (mt_rank == 0) {
            send_prepare(&m[i], v, n, msg_off(tagbase + i, 0));
            MCK(MPI_Isend(m[i].p, m[i].count, t, 1, tagbase + i, W, &q[i]));
        } else {
            recv_prepare(&m[i], v, n);
            MCK(MPI_Irecv(m[i].p, m[i].count, t, 0, tagbase + i, W, &q[i]));
        }
    }
    /* Rank 0's envelopes are all queued before rank 1 next polls. */
    if (mt_rank == 1) usleep(100 * 1000);
    MCK(MPI_Waitall(N, q, sts));
    for (int i = 0; i < N; ++i) {
        const size_t n = host_only ? 65537 : sz[i % NSZ];
        if (mt_rank == 1) {
            GPU_CHECK_STATUS(sts[i], 0, tagbase + i, n, "%s window, message %d, %zu bytes", name, i, n);
            recv_check(&m[i], n, msg_off(tagbase + i, 0), name, n);
        }
        msg_free(&m[i]);
    }
    const long long batches = mpiacc_counter_value("cuda.copy.batch") - batches0;
    if (mt_rank == 1) {
        if (batching)
            MT_CHECK(batches >= 1, "no batch of pulls for a %s window of %d messages all matched at once", name, N);
        else
            MT_CHECK(batches == 0,
                     "%lld batches of pulls in the %s window with IPC %s, CUDA runtime %d, driver %d", batches, name,
                     ipc ? "on" : "off", CUDART_VERSION, driver);
        printf("# %s window of %d: %lld batch calls (%s)\n", name, N, batches, batching ? "expected" : "none expected");
    }
    view_type_free(&CUDA_TAGGED, &tagged);
}

static void c_window_of_pulls_goes_to_the_device_in_batches(void) {
    window_of_pulls(0, 7700);
    window_of_pulls(1, 7750);
}

/* Host messages of 2 MiB and up into device memory on the same node go through the
 * sender's shared staging slots, which the receiver's device copies out of (SHARED
 * mode); with MPIACC_IPC=0 (or MPIACC_SHARED_STAGING=0) through the pipeline, as
 * between nodes. Counted on each side, every byte checked. */
static void c_large_host_sends_into_device_take_shared_staging(void) {
    static const size_t big[] = {2 * MiB, 3 * MiB + 1, 64 * MiB};
    const int nbig = (int)(sizeof big / sizeof big[0]);
    const char *shared_knob = getenv("MPIACC_SHARED_STAGING");
    const int shared = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on() && !(shared_knob && !strcmp(shared_knob, "0"));
    const char *mode = mt_rank == 0 ? (shared ? "protocol.send.shared" : "protocol.send.pipeline")
                                    : (shared ? "protocol.recv.shared" : "protocol.recv.pipeline");
    const long long taken0 = mpiacc_counter_value(mode);
    const int tagbase = 7600;
    for (int i = 0; i < nbig; ++i) {
        const int tag = tagbase + i;
        msg_t m;
        if (mt_rank == 0) {
            MPI_Datatype st = view_type(&HOST_PLAIN);
            send_prepare(&m, &HOST_PLAIN, big[i], msg_off(tag, 0));
            MCK(MPI_Send(m.p, m.count, st, 1, tag, W));
            view_type_free(&HOST_PLAIN, &st);
        } else {
            MPI_Datatype rt = view_type(&CUDA_TAGGED);
            MPI_Status stat;
            recv_prepare(&m, &CUDA_TAGGED, big[i]);
            MCK(MPI_Recv(m.p, m.count, rt, 0, tag, W, &stat));
            GPU_CHECK_STATUS(stat, 0, tag, big[i], "host message of %zu bytes into device memory", big[i]);
            recv_check(&m, big[i], msg_off(tag, 0), "host message into device memory", big[i]);
            view_type_free(&CUDA_TAGGED, &rt);
        }
        msg_free(&m);
    }
    MT_CHECK(mpiacc_counter_value(mode) - taken0 == nbig, "rank %d: %lld of %d transfers took %s", mt_rank,
             mpiacc_counter_value(mode) - taken0, nbig, mode);
}

/* Whether this rank's device takes 64-bit stream memory operations, which the memop
 * writes are written with; the driver is asked through the runtime's entry points. */
static int device_takes_64bit_stream_mem_ops(void) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !fn)
        return 0;
    CUresult (*get)(int *, CUdevice_attribute, CUdevice) = (CUresult(*)(int *, CUdevice_attribute, CUdevice))fn;
    int can = 0;
    return get(&can, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, (CUdevice)gpu_dev) == CUDA_SUCCESS && can;
}

/* Host payloads of at most 16 bytes in whole 4-byte words, into 4-byte-aligned device
 * addresses, are written by stream memory operations rather than copied; the rest by a
 * copy engine. Host sends of 1-24 bytes into device memory at offsets 0, 4 and 2,
 * received blocking and nonblocking: every byte lands, nothing around it is written, and
 * the receiver's counter names exactly the messages that qualify (none on a device
 * without 64-bit memory operations). */
static void c_small_host_payloads_into_device_memory_by_memory_writes(void) {
    static const size_t sz[] = {1, 2, 4, 6, 8, 12, 16, 20, 24};
    static const size_t recv_off[] = {0, 4, 2};
    enum { NS = sizeof sz / sizeof sz[0], NO = sizeof recv_off / sizeof recv_off[0] };
    const size_t room = 64 + GPU_GUARD;
    unsigned char *d = mt_rank == 1 ? gpu_malloc(room) : NULL;
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    const long long memop0 = mpiacc_counter_value("cuda.copy.memop");
    long long qualifying = 0;
    int tag = 7950;
    for (int nonblocking = 0; nonblocking < 2; ++nonblocking)
        for (int i = 0; i < NS; ++i)
            for (int a = 0; a < NO; ++a, ++tag) {
                const size_t n = sz[i], ro = recv_off[a];
                const size_t ref = msg_off(tag, 0);
                if (n % 4 == 0 && n <= 16 && ro % 4 == 0) ++qualifying;
                if (mt_rank == 0) {
                    MCK(MPI_Send(gpu_ref + ref, (int)n, MPI_CHAR, 1, tag, W));
                    continue;
                }
                gpu_memset(d, GPU_SENTINEL, room);
                MPI_Status st;
                if (nonblocking) {
                    MPI_Request r;
                    MCK(MPI_Irecv(d + ro, (int)n, t, 0, tag, W, &r));
                    MCK(MPI_Wait(&r, &st));
                } else {
                    MCK(MPI_Recv(d + ro, (int)n, t, 0, tag, W, &st));
                }
                GPU_CHECK_STATUS(st, 0, tag, n, "%zu host bytes into device offset %zu (%s)", n, ro,
                                 nonblocking ? "MPI_Irecv" : "MPI_Recv");
                const unsigned char *got = gpu_download(d, room);
                GPU_CHECK_UNTOUCHED(got, ro, GPU_SENTINEL, "before %zu bytes received at offset %zu", n, ro);
                GPU_CHECK_SAME(got + ro, gpu_ref + ref, n, "%zu host bytes into device offset %zu", n, ro);
                GPU_CHECK_UNTOUCHED(got + ro + n, room - ro - n, GPU_SENTINEL, "after %zu bytes received at offset %zu",
                                    n, ro);
            }
    view_type_free(&CUDA_TAGGED, &t);
    if (mt_rank != 1) return;
    CK(cudaFree(d));
    const long long memops = mpiacc_counter_value("cuda.copy.memop") - memop0;
    const long long refused = mpiacc_counter_value("cuda.copy.memop_refused");
    if (CUDA_P2P_MEMOP_REFUSED && device_takes_64bit_stream_mem_ops())
        MT_CHECK(memops == 0 && refused == 1,
                 "%lld payloads written by memory operations and %lld refused, after the first refusal "
                 "(MPIACC_FAULT_MEMOP=1:1) had stopped them",
                 memops, refused);
    else if (!device_takes_64bit_stream_mem_ops())
        MT_CHECK(memops == 0, "%lld payloads written by memory operations on a device without support", memops);
    else
        MT_CHECK(memops == qualifying && refused == 0,
                 "%lld payloads written by memory operations, of %lld that qualify (%lld refused by the driver)",
                 memops, qualifying, refused);
}

/* A host payload under 64 KiB into CUDA memory is copied to the device straight out of
 * the bounce buffer it was received into, which is page-locked once and kept per size
 * (BounceBuffer), not through a staging slot after a CPU copy. Host sends of 1 B-63 KiB
 * into device offsets 0 and 3, received blocking, nonblocking, and in windows of 4 at
 * once: every byte lands, nothing around it is written, and each payload went from a
 * page-locked bounce and none through slots. (A host message of exactly an envelope's
 * 200 bytes goes by RTS/CTS, not as a payload: it is checked, not counted.) */
static void c_small_host_payloads_into_device_memory_go_from_a_pinned_bounce(void) {
    static const size_t sz[] = {1, 17, 200, 4096, 4097, 16384, 32768, 40000, 65535};
    static const size_t recv_off[] = {0, 3};
    enum { NS = sizeof sz / sizeof sz[0], NO = sizeof recv_off / sizeof recv_off[0], W4 = 4 };
    const size_t slot = 64 * KiB + 64, room = W4 * slot + GPU_GUARD;
    unsigned char *d = mt_rank == 1 ? gpu_malloc(room) : NULL;
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    const long long pinned0 = mpiacc_counter_value("protocol.recv.payload_from_pinned");
    const long long slots0 = mpiacc_counter_value("protocol.recv.payload_through_slots");
    long long payloads = 0;
    int tag = 20000;
    for (int how = 0; how < 3; ++how) /* blocking, nonblocking, a window of W4 */
        for (int i = 0; i < NS; ++i)
            for (int a = 0; a < NO; ++a, tag += W4) {
                const size_t n = sz[i], ro = recv_off[a];
                const int k = how == 2 ? W4 : 1;
                if (mt_rank == 0) {
                    for (int j = 0; j < k; ++j)
                        MCK(MPI_Send(gpu_ref + msg_off(tag + j, 0), (int)n, MPI_CHAR, 1, tag + j, W));
                    continue;
                }
                if (n != 200) payloads += k;
                gpu_memset(d, GPU_SENTINEL, room);
                MPI_Status st[W4];
                MPI_Request r[W4];
                if (how == 0) {
                    MCK(MPI_Recv(d + ro, (int)n, t, 0, tag, W, &st[0]));
                } else {
                    for (int j = 0; j < k; ++j) MCK(MPI_Irecv(d + j * slot + ro, (int)n, t, 0, tag + j, W, &r[j]));
                    MCK(MPI_Waitall(k, r, st));
                }
                const unsigned char *got = gpu_download(d, room);
                size_t at = 0;
                for (int j = 0; j < k; ++j) {
                    GPU_CHECK_STATUS(st[j], 0, tag + j, n, "%zu host bytes into device offset %zu (%s, message %d)", n,
                                     j * slot + ro,
                                     how == 0   ? "MPI_Recv"
                                     : how == 1 ? "MPI_Irecv"
                                                : "window",
                                     j);
                    GPU_CHECK_UNTOUCHED(got + at, j * slot + ro - at, GPU_SENTINEL, "before %zu bytes at offset %zu", n,
                                        j * slot + ro);
                    GPU_CHECK_SAME(got + j * slot + ro, gpu_ref + msg_off(tag + j, 0), n,
                                   "%zu host bytes into device offset %zu", n, j * slot + ro);
                    at = j * slot + ro + n;
                }
                GPU_CHECK_UNTOUCHED(got + at, room - at, GPU_SENTINEL, "after the last of %zu bytes", n);
            }
    view_type_free(&CUDA_TAGGED, &t);
    if (mt_rank != 1) return;
    CK(cudaFree(d));
    const long long from_pinned = mpiacc_counter_value("protocol.recv.payload_from_pinned") - pinned0;
    const long long through_slots = mpiacc_counter_value("protocol.recv.payload_through_slots") - slots0;
    printf("# %lld of %lld host payloads went to the device from a page-locked bounce, %lld through slots\n",
           from_pinned, payloads, through_slots);
    MT_CHECK(from_pinned == payloads && through_slots == 0,
             "%lld of %lld host payloads under 64 KiB went from a page-locked bounce, %lld through staging slots",
             from_pinned, payloads, through_slots);
}

/* Both ranks on one GPU that is not shared through MPS (cuda_p2p_same_gpu, or any variant
 * on a machine with one GPU): each rank leaves its resident copier alone once a pull maps
 * the other's memory on its GPU (cuda.resident.time_sliced), as the cases before the
 * resident ones have pulled both ways. Not without IPC (MPIACC_IPC=0, as gpu-check also
 * runs this variant): no pull, so nothing tells. */
static int time_sliced_with_peer(void) {
    int mps = 0;
#if CUDART_VERSION >= 12040
    if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, gpu_dev) != cudaSuccess) mps = 0;
#endif
    return gpu_same_device && !CUDA_P2P_NO_IPC && gpu_ipc_knob_on() && !mps;
}

/* The resident copier's kernel waits this long for a copy before it leaves: set long
 * (MPIACC_TEST_RESIDENT_IDLE_US, in main) so that every copy of a burst comes within it
 * however slowly a shared machine runs the burst, and the cases below can ask that the
 * copier took copies, not only that it may have. */
#define RESIDENT_IDLE_US "2000"

/* The bursts of the two resident-copier cases below: message k of a burst has
 * burst_sz[k % BURST_NS] bytes, leaves its BURST_SLOT at burst_send_off[k % BURST_NO] and
 * lands in its own at burst_recv_off[(k / BURST_NO) % BURST_NO], so that sizes up to
 * MPIACC_CUDA_KERNEL_COPY_MAX and past it meet aligned and unaligned ends. The kernel keeps
 * 4, 16 or 32 vectors a lane in flight by size (src/accel/cuda/copy_kernel.cu): 2048 and
 * 2064, 8192 and 8208 are the last and first sizes of a width. */
static const size_t burst_sz[] = {1,    8,    16,   17,   200,   256,   2048,  2064,
                                  4095, 4096, 8192, 8208, 16384, 32767, 32768, 32784};
static const size_t burst_send_off[] = {0, 16, 3}, burst_recv_off[] = {0, 16, 5};
/* BURST_NS prime to BURST_NO: every size leaves from every offset. */
enum { BURST_NS = sizeof burst_sz / sizeof burst_sz[0], BURST_NO = 3, BURST_SLOT = 32 * 1024 + 64 };

/* IPC pulls between device buffers of at most MPIACC_CUDA_KERNEL_COPY_MAX (32 KiB; 16-byte
 * aligned ends, or at most 256 bytes) go to a one-warp kernel that stays on the receiving
 * GPU while pulls come (src/accel/cuda/resident_copier.h); a pull that finds it gone goes
 * to a copy engine and launches it again. Bursts of 48 blocking device-to-device sends of
 * 1 B-32 KiB from offsets 0, 16 and 3, each into its own place of one device buffer at
 * offsets 0, 16 and 5: every byte lands and nothing between them is written. The pulls
 * come within the kernel's idle time (RESIDENT_IDLE_US), so the receiver's copier took
 * some of those that qualify; without IPC, with the knob at 0, without the kernels, or
 * with both ranks on one GPU without MPS, it took none. cuda_p2p_resident_declined plants
 * one copy the kernel cannot read (MPIACC_FAULT_RESIDENT=1:1): it is declined, and still
 * arrives. */
static void c_small_pulls_in_a_burst_go_to_the_resident_copier(void) {
    enum { N = 48, BURSTS = 3 };
    const size_t slot = BURST_SLOT, room = N * slot + GPU_GUARD;
    const int ipc = !CUDA_P2P_NO_IPC && gpu_ipc_knob_on();
    if (ipc && !end_staged_run(8398)) return;
    unsigned char *d = gpu_malloc(room);
    MPI_Datatype t = view_type(&CUDA_TAGGED);
    /* Pulls alone: without IPC the burst's staged copies go to the copier too
     * (c_small_staged_copies_go_to_the_resident_copier). */
    const long long posted0 = mpiacc_counter_value("cuda.copy.resident_pull");
    const long long declined0 = mpiacc_counter_value("cuda.copy.resident_declined");
    const long long knob = mpiacc_knob_value("MPIACC_CUDA_KERNEL_COPY_MAX");
    long long qualifying = 0;
    double busiest_us = 0; /* the fastest burst's time per message */
    int tag = 8400;
    for (int b = 0; b < BURSTS; ++b, tag += N) {
        if (mt_rank == 0)
            for (int k = 0; k < N; ++k)
                gpu_upload(d + k * slot + burst_send_off[k % BURST_NO], gpu_ref + msg_off(tag + k, 0),
                           burst_sz[k % BURST_NS]);
        else
            gpu_memset(d, GPU_SENTINEL, room);
        MCK(MPI_Barrier(W));
        const double t0 = MPI_Wtime();
        for (int k = 0; k < N; ++k) {
            const size_t n = burst_sz[k % BURST_NS];
            if (mt_rank == 0) {
                MCK(MPI_Send(d + k * slot + burst_send_off[k % BURST_NO], (int)n, t, 1, tag + k, W));
            } else {
                MPI_Status st;
                MCK(MPI_Recv(d + k * slot + burst_recv_off[(k / BURST_NO) % BURST_NO], (int)n, t, 0, tag + k, W, &st));
                GPU_CHECK_STATUS(st, 0, tag + k, n, "burst %d message %d: %zu bytes", b, k, n);
            }
        }
        const double per_message_us = (MPI_Wtime() - t0) * 1e6 / N;
        if (b == 0 || per_message_us < busiest_us) busiest_us = per_message_us;
        if (mt_rank == 0) continue;
        const unsigned char *got = gpu_download(d, room);
        size_t at = 0;
        for (int k = 0; k < N; ++k) {
            const size_t n = burst_sz[k % BURST_NS], so = burst_send_off[k % BURST_NO],
                         ro = burst_recv_off[(k / BURST_NO) % BURST_NO];
            if ((long long)n <= knob && (n <= 256 || (so % 16 == 0 && ro % 16 == 0))) ++qualifying;
            GPU_CHECK_UNTOUCHED(got + at, k * slot + ro - at, GPU_SENTINEL, "burst %d: before message %d", b, k);
            GPU_CHECK_SAME(got + k * slot + ro, gpu_ref + msg_off(tag + k, 0), n,
                           "burst %d message %d: %zu bytes from offset %zu into offset %zu", b, k, n, so, ro);
            at = k * slot + ro + n;
        }
        GPU_CHECK_UNTOUCHED(got + at, room - at, GPU_SENTINEL, "burst %d: after the last message", b);
    }
    view_type_free(&CUDA_TAGGED, &t);
    CK(cudaFree(d));
    if (mt_rank != 1) return;
    const long long posted = mpiacc_counter_value("cuda.copy.resident_pull") - posted0;
    const long long declined = mpiacc_counter_value("cuda.copy.resident_declined") - declined0;
    const long long idle_us = mpiacc_knob_value("MPIACC_TEST_RESIDENT_IDLE_US");
    printf(
        "# rank 1: %lld of %lld qualifying pulls posted to the resident copier, %lld declined; fastest burst "
        "%.1f us a message (idle time %lld us)\n",
        posted, qualifying, declined, busiest_us, idle_us);
#if MPIACC_HAVE_CUDA_KERNELS
    const long long time_sliced = mpiacc_counter_value("cuda.resident.time_sliced");
    if (!ipc || knob == 0) {
        MT_CHECK(posted == 0, "%lld pulls posted to the resident copier without IPC or with the knob at 0", posted);
        return;
    }
    if (time_sliced_with_peer()) {
        MT_CHECK(posted == 0 && time_sliced == 1,
                 "%lld pulls posted to the resident copier, time_sliced %lld, with rank 0 on this GPU without MPS",
                 posted, time_sliced);
        return;
    }
    MT_CHECK(time_sliced == 0, "the resident copier was turned off (time_sliced %lld) with no other rank on this GPU",
             time_sliced);
    /* Each pull comes well within the idle time after the one before, so the kernel stays
     * between them: only the first of a burst, one after each decline, and those that find
     * a copy engine busy with another go elsewhere. How many it takes depends on the GPU
     * not being time-sliced with other processes (maint/gpu-check runs 4 tests at once),
     * so the test asks that the copier took some; the benchmarks show the share as
     * latency. */
    MT_CHECK(idle_us == atoll(RESIDENT_IDLE_US), "the resident idle time in effect is %lld us, not %s", idle_us,
             RESIDENT_IDLE_US);
    MT_CHECK(posted >= 1, "none of %lld qualifying pulls went to the resident copier", qualifying);
    /* The planted copy is rank 1's first, in whichever case that came. */
    const long long ever_posted = mpiacc_counter_value("cuda.copy.resident");
    const long long ever_declined = mpiacc_counter_value("cuda.copy.resident_declined");
    if (CUDA_P2P_RESIDENT_DECLINED)
        MT_CHECK(ever_posted == 0 || ever_declined >= 1,
                 "%lld copies posted and none declined with MPIACC_FAULT_RESIDENT=1:1 planting one", ever_posted);
#else
    (void)knob;
    MT_CHECK(posted == 0, "%lld pulls posted to a resident copier in a build without kernels", posted);
#endif
}

/* Small messages between a device buffer and host memory are staged: the device side's
 * copy (rank 0's, out of its device buffer into a pinned slot when it sends, into it from
 * pinned memory when it receives) of at most MPIACC_CUDA_KERNEL_COPY_MAX goes to the
 * resident copier on rank 0's GPU, as small pulls do, where the device reads registered
 * host memory at its host address. Bursts of 30 ping-pongs of 1 B-32 KiB: rank 0 sends from
 * device offsets 0, 16 and 3 into rank 1's host memory and receives rank 1's reply at
 * device offsets 0, 16 and 5; every byte lands both ways and nothing around it is written.
 * The round trips come within the kernel's idle time (RESIDENT_IDLE_US), so the copier (on
 * either rank: rank 1 may pull the first of a run) took some of the copies that qualify
 * (payloads that go as stream memory writes, up to 16 bytes in whole words, never do);
 * with the knob at 0, without the kernels, where the device cannot use host addresses, or
 * with both ranks on one GPU without MPS, it took none. */
static void c_small_staged_copies_go_to_the_resident_copier(void) {
    enum { N = 30, BURSTS = 3 };
    const size_t slot = BURST_SLOT, room = N * slot + GPU_GUARD;
    unsigned char *d_out = NULL, *d_in = NULL, *h = NULL;
    MPI_Datatype t = MPI_CHAR;
    if (mt_rank == 0) {
        d_out = gpu_malloc(room);
        d_in = gpu_malloc(room);
        t = view_type(&CUDA_TAGGED);
    } else {
        h = malloc(room);
        if (!h) gpu_die(__FILE__, __LINE__, "out of host memory");
    }
    const long long posted0 = mpiacc_counter_value("cuda.copy.resident");
    const long long knob = mpiacc_knob_value("MPIACC_CUDA_KERNEL_COPY_MAX");
    long long qualifying = 0;
    double fastest_us = 0; /* the fastest burst's time per round trip */
    int tag = 8600;
    for (int b = 0; b < BURSTS; ++b, tag += 2 * N) {
        if (mt_rank == 0) {
            for (int k = 0; k < N; ++k)
                gpu_upload(d_out + k * slot + burst_send_off[k % BURST_NO], gpu_ref + msg_off(tag + k, 0),
                           burst_sz[k % BURST_NS]);
            gpu_memset(d_in, GPU_SENTINEL, room);
        } else {
            memset(h, GPU_SENTINEL, room);
        }
        MCK(MPI_Barrier(W));
        const double t0 = MPI_Wtime();
        for (int k = 0; k < N; ++k) {
            const size_t n = burst_sz[k % BURST_NS];
            MPI_Status st;
            if (mt_rank == 0) {
                MCK(MPI_Send(d_out + k * slot + burst_send_off[k % BURST_NO], (int)n, t, 1, tag + k, W));
                MCK(MPI_Recv(d_in + k * slot + burst_recv_off[(k / BURST_NO) % BURST_NO], (int)n, t, 1, tag + N + k, W,
                             &st));
                GPU_CHECK_STATUS(st, 1, tag + N + k, n, "burst %d reply %d: %zu bytes into the device", b, k, n);
            } else {
                MCK(MPI_Recv(h + k * slot, (int)n, MPI_CHAR, 0, tag + k, W, &st));
                GPU_CHECK_STATUS(st, 0, tag + k, n, "burst %d message %d: %zu bytes into host memory", b, k, n);
                MCK(MPI_Send(gpu_ref + msg_off(tag + N + k, 1), (int)n, MPI_CHAR, 0, tag + N + k, W));
            }
        }
        const double per_round_trip_us = (MPI_Wtime() - t0) * 1e6 / N;
        if (b == 0 || per_round_trip_us < fastest_us) fastest_us = per_round_trip_us;
        const unsigned char *got = mt_rank == 0 ? gpu_download(d_in, room) : h;
        size_t at = 0;
        for (int k = 0; k < N; ++k) {
            const size_t n = burst_sz[k % BURST_NS], so = burst_send_off[k % BURST_NO],
                         ro = mt_rank == 0 ? burst_recv_off[(k / BURST_NO) % BURST_NO] : 0;
            if ((long long)n <= knob && (n <= 256 || so % 16 == 0)) ++qualifying;                             /* out */
            if ((long long)n <= knob && (n <= 256 || ro % 16 == 0) && !(n <= 16 && n % 4 == 0)) ++qualifying; /* in */
            GPU_CHECK_UNTOUCHED(got + at, k * slot + ro - at, GPU_SENTINEL, "rank %d burst %d: before message %d",
                                mt_rank, b, k);
            GPU_CHECK_SAME(got + k * slot + ro, gpu_ref + msg_off(mt_rank == 0 ? tag + N + k : tag + k, !mt_rank), n,
                           "rank %d burst %d message %d: %zu bytes at offset %zu", mt_rank, b, k, n, ro);
            at = k * slot + ro + n;
        }
        GPU_CHECK_UNTOUCHED(got + at, room - at, GPU_SENTINEL, "rank %d burst %d: after the last message", mt_rank, b);
    }
    if (mt_rank == 0) {
        view_type_free(&CUDA_TAGGED, &t);
        CK(cudaFree(d_out));
        CK(cudaFree(d_in));
    } else {
        free(h);
    }
    long long mine = mpiacc_counter_value("cuda.copy.resident") - posted0, posted = 0;
    MCK(MPI_Allreduce(&mine, &posted, 1, MPI_LONG_LONG, MPI_SUM, W));
    if (mt_rank != 0) return;
    const long long idle_us = mpiacc_knob_value("MPIACC_TEST_RESIDENT_IDLE_US");
    int host_addresses = 0;
    CK(cudaDeviceGetAttribute(&host_addresses, cudaDevAttrCanUseHostPointerForRegisteredMem, gpu_dev));
    printf(
        "# %lld of %lld qualifying staged copies posted to a resident copier; fastest burst %.1f us a round trip "
        "(idle time %lld us)\n",
        posted, qualifying, fastest_us, idle_us);
#if MPIACC_HAVE_CUDA_KERNELS
    if (knob == 0 || !host_addresses || time_sliced_with_peer()) {
        MT_CHECK(posted == 0,
                 "%lld copies posted to the resident copier with the knob at 0, no host addresses, or both ranks on "
                 "this GPU without MPS",
                 posted);
        return;
    }
    /* Each copy of rank 0 comes half a round trip after the one before, well within the
     * idle time. How many the copier takes depends on the GPU not being time-sliced with
     * other processes (as in c_small_pulls_in_a_burst_go_to_the_resident_copier): some, at
     * least. */
    MT_CHECK(idle_us == atoll(RESIDENT_IDLE_US), "the resident idle time in effect is %lld us, not %s", idle_us,
             RESIDENT_IDLE_US);
    MT_CHECK(posted >= 1, "none of %lld qualifying staged copies went to the resident copier", qualifying);
#else
    (void)knob;
    (void)idle_us;
    (void)host_addresses;
    MT_CHECK(posted == 0, "%lld copies posted to a resident copier in a build without kernels", posted);
#endif
}

static const gpu_case_t cases[] = {
    {"send_recv_host_to_cuda_tagged_every_size_both_directions", c_send_recv_host_to_cuda_tagged, 0},
    {"send_recv_cuda_tagged_to_host_every_size_both_directions", c_send_recv_cuda_tagged_to_host, 0},
    {"send_recv_cuda_tagged_to_cuda_tagged_every_size_both_directions", c_send_recv_cuda_tagged_to_cuda_tagged, 0},
    {"send_recv_untagged_device_char_autodetected_every_size_both_directions", c_send_recv_cuda_auto_to_cuda_auto, 0},
    {"send_recv_untagged_device_double_to_host_tagged_double_every_size", c_send_recv_cuda_auto_double_to_host_tagged,
     0},
    {"send_recv_host_tagged_double_to_untagged_device_double_every_size", c_send_recv_host_tagged_to_cuda_auto_double,
     0},
    {"send_recv_untagged_device_double_to_cuda_tagged_double_every_size",
     c_send_recv_cuda_auto_double_to_cuda_tagged_double, 0},
    {"send_recv_host_tagged_to_untagged_device_every_size", c_send_recv_host_tagged_to_cuda_auto, 0},
    {"send_recv_cuda_tagged_to_pinned_host_every_size", c_send_recv_cuda_tagged_to_pinned_host, 0},
    {"send_recv_pinned_host_to_untagged_device_every_size", c_send_recv_pinned_host_to_cuda_auto, 0},
    {"send_recv_host_to_host_tagged_unaffected_by_cuda_autodetect", c_send_recv_host_to_host_with_autodetect_on, 0},
    {"isend_irecv_waitall_host_to_cuda_all_sizes_at_once_both_ranks", c_isend_irecv_host_to_cuda, 0},
    {"isend_irecv_waitall_cuda_to_host_tagged_all_sizes_at_once_both_ranks", c_isend_irecv_cuda_to_host, 0},
    {"isend_irecv_waitall_cuda_tagged_to_untagged_device_all_sizes_at_once", c_isend_irecv_cuda_tagged_to_cuda_auto, 0},
    {"isend_irecv_waitall_untagged_device_double_all_sizes_at_once", c_isend_irecv_cuda_auto_double, 0},
    {"isend_irecv_waitall_pinned_host_to_untagged_device_all_sizes_at_once", c_isend_irecv_pinned_to_cuda, 0},
    {"sendrecv_exchanges_cuda_to_cuda_every_size", c_sendrecv_cuda_to_cuda, 0},
    {"sendrecv_exchanges_host_to_cuda_every_size", c_sendrecv_host_to_cuda, 0},
    {"sendrecv_exchanges_cuda_to_host_every_size", c_sendrecv_cuda_to_host, 0},
    {"isendrecv_exchanges_cuda_to_cuda_every_size", c_isendrecv_cuda_to_cuda, 0},
    {"isendrecv_exchanges_host_to_cuda_every_size", c_isendrecv_host_to_cuda, 0},
    {"persistent_recv_init_startall_into_device_fragments_100_steps", c_persistent_device_fragments, 0},
    {"probe_and_iprobe_report_real_size_of_device_messages", c_probe_reports_real_size, 0},
    {"mprobe_improbe_then_mrecv_imrecv_into_device_memory", c_mprobe_mrecv_into_device, 0},
    {"any_source_any_tag_receives_into_device_memory", c_any_source_into_device, 0},
    {"device_receive_larger_than_message_gets_message_size_and_writes_nothing_more", c_receive_larger_than_message, 0},
    {"device_receive_too_small_gets_err_truncate_and_sender_completes", c_truncation_into_device, 0},
    {"zero_byte_device_messages_including_null_pointer", c_zero_byte_device_messages, 0},
    {"small_device_sends_pulled_or_staged_by_receive_kind", c_small_sends_pulled_or_staged_by_receive_kind, 0},
    {"small_isends_go_staged_unless_they_depend_on_a_stream", c_small_isends_go_staged_unless_they_depend_on_a_stream,
     0},
    {"window_of_small_isends_arrives_in_call_order_among_other_sends",
     c_window_of_small_isends_arrives_in_call_order_among_other_sends, 0},
    {"cancelled_or_freed_small_isends_keep_the_order_of_the_rest", c_cancelled_or_freed_small_isends_keep_the_order, 0},
    {"small_isends_post_earlier_payloads_at_later_calls", c_small_isends_post_earlier_payloads_at_later_calls, 0},
    {"small_isend_then_barrier_while_the_peer_receives", c_small_isend_then_barrier_while_the_peer_receives, 0},
    {"small_device_copies_by_kernel_at_every_alignment", c_small_copies_by_kernel_at_every_alignment, 0},
    {"large_host_sends_into_device_take_shared_staging_unless_ipc_is_off",
     c_large_host_sends_into_device_take_shared_staging, 0},
    {"window_of_pulls_goes_to_the_device_in_batches", c_window_of_pulls_goes_to_the_device_in_batches, 0},
    {"pulls_are_answered_through_the_senders_fin_word", c_pulls_are_answered_through_the_senders_fin_word, 0},
    {"small_host_payloads_into_device_memory_by_memory_writes",
     c_small_host_payloads_into_device_memory_by_memory_writes, 0},
    {"small_host_payloads_into_device_memory_go_from_a_pinned_bounce",
     c_small_host_payloads_into_device_memory_go_from_a_pinned_bounce, 0},
    {"small_pulls_in_a_burst_go_to_the_resident_copier", c_small_pulls_in_a_burst_go_to_the_resident_copier, 0},
    {"small_staged_copies_go_to_the_resident_copier", c_small_staged_copies_go_to_the_resident_copier, 0},
};

int main(int argc, char **argv) {
#if CUDA_P2P_NO_IPC
    /* read by MPI-ACC at MPI_Init: the staged pipeline instead of CUDA IPC in the node */
    setenv("MPIACC_IPC", "0", 1);
#endif
#if CUDA_P2P_FIN_MESSAGE
    setenv("MPIACC_FAULT_FIN_WORDS", "1", 1);
#endif
#if CUDA_P2P_MEMOP_REFUSED
    setenv("MPIACC_FAULT_MEMOP", "1:1", 1);
#endif
#if CUDA_P2P_RESIDENT_DECLINED
    setenv("MPIACC_FAULT_RESIDENT", "1:1", 1);
#endif
    setenv("MPIACC_TEST_RESIDENT_IDLE_US", RESIDENT_IDLE_US, 1);
    MT_INIT(&argc, &argv);
    gpu_setup(CUDA_P2P_SAME_GPU ? 0 : -1);
    if (!gpu_skip_why && mt_rank == 0)
        printf("# variant: %s%s\n", CUDA_P2P_SAME_GPU ? "both ranks on device 0" : "device = rank % devices",
               CUDA_P2P_NO_IPC          ? ", MPIACC_IPC=0 (pipeline)"
               : CUDA_P2P_FIN_MESSAGE   ? ", MPIACC_FAULT_FIN_WORDS=1 (pulls answered by FIN message)"
               : CUDA_P2P_MEMOP_REFUSED ? ", MPIACC_FAULT_MEMOP=1:1 (rank 1's first memop write refused)"
               : CUDA_P2P_RESIDENT_DECLINED ? ", MPIACC_FAULT_RESIDENT=1:1 (rank 1's first resident copy declined)"
                                            : "");
    gpu_run_cases(cases, (int)(sizeof cases / sizeof cases[0]));
    gpu_teardown();
    return mt_finalize();
}
