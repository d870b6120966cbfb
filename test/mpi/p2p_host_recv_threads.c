/* Host nonblocking receives under MPI_THREAD_MULTIPLE with the async progress thread:
 * threads post and complete their own windows (MPI_Waitall, MPI_Testsome, MPI_Wait) at
 * the same time, some messages small, some sent as envelopes (threshold knob), while
 * the progress thread polls every receive. Every byte must arrive, each receive once.
 * MPIACC-TEST-RANKS: 2 */
#include <pthread.h>

#include "p2p_util.h"

enum { THREADS = 3, WIN = 16, ROUNDS = 40, BIG = 5000 };

static size_t msg_size(int t, int r, int w) { return (t + r + w) % 4 == 0 ? BIG : (size_t)(8 * (w + 1)); }

typedef struct {
    int t;
    int bad;
} Job;

static void *sender(void *arg) {
    Job *j = arg;
    unsigned char *out = p2p_alloc(BIG);
    for (int r = 0; r < ROUNDS; ++r)
        for (int w = 0; w < WIN; ++w) {
            size_t n = msg_size(j->t, r, w);
            mt_fill(out, n, p2p_seed(100 + j->t, r, w));
            MPI_Send(out, (int)n, MPI_BYTE, 1, 100 + j->t, MPI_COMM_WORLD);
        }
    free(out);
    return NULL;
}

static void *receiver(void *arg) {
    Job *j = arg;
    unsigned char *in = p2p_alloc((size_t)WIN * BIG);
    MPI_Request q[WIN];
    MPI_Status st[WIN];
    for (int r = 0; r < ROUNDS; ++r) {
        for (int w = 0; w < WIN; ++w)
            MPI_Irecv(in + (size_t)w * BIG, BIG, MPI_BYTE, 0, 100 + j->t, MPI_COMM_WORLD, &q[w]);
        /* Each thread completes its windows its own way, in turn. */
        switch ((j->t + r) % 3) {
            case 0: MPI_Waitall(WIN, q, st); break;
            case 1: {
                int left = WIN;
                while (left > 0) {
                    int outcount = 0, idx[WIN];
                    MPI_Status s2[WIN];
                    MPI_Testsome(WIN, q, &outcount, idx, s2);
                    if (outcount == MPI_UNDEFINED) break;
                    for (int k = 0; k < outcount; ++k) st[idx[k]] = s2[k];
                    left -= outcount;
                }
                break;
            }
            default:
                for (int w = 0; w < WIN; ++w) MPI_Wait(&q[w], &st[w]);
        }
        for (int w = 0; w < WIN; ++w) {
            size_t n = msg_size(j->t, r, w);
            if (q[w] != MPI_REQUEST_NULL || p2p_count(&st[w], MPI_BYTE) != (int)n ||
                mt_verify(in + (size_t)w * BIG, n, p2p_seed(100 + j->t, r, w)) != (size_t)-1)
                ++j->bad;
        }
    }
    free(in);
    return NULL;
}

int main(int argc, char **argv) {
    setenv("MPIACC_HOST_RNDV_THRESHOLD", "4K", 1);
    setenv("MPIACC_ASYNC_PROGRESS", "1", 1);
    mt_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        mt_skip("threads_post_and_complete_host_receive_windows_concurrently_all_bytes_once",
                "MPICH did not provide MPI_THREAD_MULTIPLE");
        return mt_finalize();
    }
    MT_CASE("threads_post_and_complete_host_receive_windows_concurrently_all_bytes_once") {
        pthread_t th[THREADS];
        Job jobs[THREADS];
        if (mt_rank <= 1) {
            for (int t = 0; t < THREADS; ++t) {
                jobs[t] = (Job){t, 0};
                pthread_create(&th[t], NULL, mt_rank == 0 ? sender : receiver, &jobs[t]);
            }
            for (int t = 0; t < THREADS; ++t) {
                pthread_join(th[t], NULL);
                MT_CHECK(jobs[t].bad == 0, "thread %d: %d receives wrong", t, jobs[t].bad);
            }
        }
    }
    return mt_finalize();
}
