/* Helpers shared by the point-to-point MPI tests (test/mpi/p2p_*.c): the sizes that
 * matter to MPI-ACC's wire protocol, byte checks that name the first wrong byte, and
 * bounded polling so that a missing completion fails a case instead of hanging it. */
#ifndef P2P_UTIL_H_INCLUDED
#define P2P_UTIL_H_INCLUDED

#include <dirent.h>

#include "mpiacc_hooks.h"
#include "mpitest.h"

/* GCC 11+ reads MPICH's MPI_STATUSES_IGNORE ((MPI_Status *)1) as a zero-size array and
 * warns on every MPI_Waitall/Testall that uses it: a false positive. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

/* DESIGN.md section 2: an envelope is exactly this long, and a host payload of exactly
 * this length goes by rendezvous; receives shorter than it use an internal buffer. */
#define P2P_ENVELOPE_BYTES 200
/* Above the default host rendezvous threshold (2 MiB) and any payload a sender may send
 * without an envelope. */
#define P2P_RNDV_BYTES ((size_t)9 << 20)
/* Bounded waits: far above any real completion time, far below run-test's limit. */
#define P2P_TIMEOUT_S 60.0

/* Whether this host has an RDMA device (a port the verbs netmod could open). */
static inline int p2p_rdma_device_here(void) {
    DIR *d = opendir("/sys/class/infiniband");
    int found = 0;
    if (!d) return 0;
    for (struct dirent *de; !found && (de = readdir(d)) != NULL;) found = de->d_name[0] != '.';
    closedir(d);
    return found;
}

/* The pipeline's packet size in effect (MPIACC_CHUNK_SIZE). */
static inline size_t p2p_chunk_size(void) { return (size_t)mpiacc_knob_value("MPIACC_CHUNK_SIZE"); }

/* The host rendezvous threshold in effect (MPIACC_HOST_RNDV_THRESHOLD). When it is 0
 * (host messages never go by rendezvous), P2P_RNDV_BYTES, so that the sizes a test
 * builds around it are still large messages. */
static inline size_t p2p_host_threshold(void) {
    long long t = mpiacc_knob_value("MPIACC_HOST_RNDV_THRESHOLD");
    return t > 0 ? (size_t)t : P2P_RNDV_BYTES;
}

static inline void *p2p_alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "# [rank %d] out of memory (%zu bytes)\n", mt_rank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static inline int p2p_class(int rc) {
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* An error string of MPI-ACC's own: none of MPICH's class text for
 * MPI_ERR_UNSUPPORTED_OPERATION, no "(0)" location, no internal plan names. */
static inline int p2p_plain_words(const char *s) {
    return !strstr(s, "file operation") && !strstr(s, "error stack") && !strstr(s, "(0)") && !strstr(s, "ROADMAP");
}

static inline int p2p_count(const MPI_Status *st, MPI_Datatype t) {
    int n = -12345;
    MPI_Get_count(st, t, &n);
    return n;
}

/* Index of the first byte that is not `pattern`, or (size_t)-1. */
static inline size_t p2p_first_not(const void *buf, size_t n, unsigned char pattern) {
    for (size_t i = 0; i < n; ++i)
        if (((const unsigned char *)buf)[i] != pattern) return i;
    return (size_t)-1;
}

/* The bytes are mt_fill(seed). */
#define P2P_CHECK_BYTES(buf, n, seed, what)                                                                    \
    do {                                                                                                       \
        size_t p2p_bad_ = mt_verify((buf), (n), (seed));                                                       \
        MT_CHECK(p2p_bad_ == (size_t)-1, "%s: first wrong byte at %zu of %zu", (what), p2p_bad_, (size_t)(n)); \
    } while (0)

/* The bytes are all `pattern` (a buffer that must not have been written). */
#define P2P_CHECK_UNTOUCHED(buf, n, pattern, what)                                                          \
    do {                                                                                                    \
        size_t p2p_bad_ = p2p_first_not((buf), (n), (unsigned char)(pattern));                              \
        MT_CHECK(p2p_bad_ == (size_t)-1, "%s: byte %zu of %zu was written", (what), p2p_bad_, (size_t)(n)); \
    } while (0)

/* Status fields of a receive. */
#define P2P_CHECK_STATUS(st, src, tag, nbytes)                                                            \
    do {                                                                                                  \
        MT_CHECK((st).MPI_SOURCE == (src), "status source %d, expected %d", (st).MPI_SOURCE, (int)(src)); \
        MT_CHECK((st).MPI_TAG == (tag), "status tag %d, expected %d", (st).MPI_TAG, (int)(tag));          \
        MT_CHECK(p2p_count(&(st), MPI_BYTE) == (int)(nbytes), "status count %d, expected %d",             \
                 p2p_count(&(st), MPI_BYTE), (int)(nbytes));                                              \
    } while (0)

/* An empty status: what a receive from MPI_PROC_NULL returns. */
#define P2P_CHECK_PROC_NULL_STATUS(st)                                                                           \
    do {                                                                                                         \
        MT_CHECK((st).MPI_SOURCE == MPI_PROC_NULL, "status source %d, expected MPI_PROC_NULL", (st).MPI_SOURCE); \
        MT_CHECK((st).MPI_TAG == MPI_ANY_TAG, "status tag %d, expected MPI_ANY_TAG", (st).MPI_TAG);              \
        MT_CHECK(p2p_count(&(st), MPI_BYTE) == 0, "status count %d, expected 0", p2p_count(&(st), MPI_BYTE));    \
    } while (0)

/* Polls MPI_Test until the request completes or the bounded wait runs out; returns the
 * flag. Progress must come from MPI_Test alone. */
static inline int p2p_test_until(MPI_Request *req, MPI_Status *st) {
    int flag = 0;
    double end = MPI_Wtime() + P2P_TIMEOUT_S;
    while (!flag && MPI_Wtime() < end) MPI_Test(req, &flag, st);
    return flag;
}

/* Seeds that differ per case, rank and message, so a message delivered to the wrong
 * receive never verifies by accident. */
static inline uint64_t p2p_seed(int tag, int src, int idx) {
    return ((uint64_t)(unsigned)tag << 32) ^ ((uint64_t)(unsigned)src << 20) ^ (uint64_t)(unsigned)idx;
}

/* rc is MPI_ERR_UNSUPPORTED_OPERATION and its string names `call`, `arg` and, when given,
 * `cause` (the refusals of device buffers where MPI-ACC does not take them yet). */
#define P2P_CHECK_UNSUPPORTED(rc, call, arg, cause)                                                                    \
    do {                                                                                                               \
        const int rc_ = (rc);                                                                                          \
        const char *cause_ = (cause);                                                                                  \
        MT_CHECK(rc_ != MPI_SUCCESS && p2p_class(rc_) == MPI_ERR_UNSUPPORTED_OPERATION,                                \
                 "%s: class %d, expected MPI_ERR_UNSUPPORTED_OPERATION", call,                                         \
                 rc_ == MPI_SUCCESS ? 0 : p2p_class(rc_));                                                             \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char s_[MPI_MAX_ERROR_STRING + 1] = "", want_[256];                                                        \
            int len_ = 0;                                                                                              \
            MPI_Error_string(rc_, s_, &len_);                                                                          \
            snprintf(want_, sizeof want_, "%s(%s): not supported on device buffers: ", call, arg);                     \
            MT_CHECK(strncmp(s_, want_, strlen(want_)) == 0, "the error string does not begin \"%s\": \"%s\"", want_,  \
                     s_);                                                                                              \
            MT_CHECK(p2p_plain_words(s_), "%s: the error string has MPICH's or internal words: \"%s\"", call, s_);     \
            MT_CHECK(len_ == (int)strlen(s_), "%s: resultlen %d for a string of %zu", call, len_, strlen(s_));         \
            if (cause_)                                                                                                \
                MT_CHECK(strstr(s_, cause_) != NULL, "%s: the error string does not say \"%s\": \"%s\"", call, cause_, \
                         s_);                                                                                          \
        }                                                                                                              \
    } while (0)

#endif
