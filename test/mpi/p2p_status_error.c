/* status.MPI_ERROR after single-completion calls. MPI 4.0 section 3.2.5: only the
 * multiple-completion calls write it (with MPI_ERR_IN_STATUS); MPI_Recv, MPI_Wait,
 * MPI_Test, MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Sendrecv leave
 * what the user put there. Each call gets a sentinel (MPI_ERR_DIMS) and must keep it, for
 * host and OpenCL receive buffers, on a small payload, a medium one and a rendezvous; the
 * data and the other status fields must still be right.
 * MPIACC-TEST-RANKS: 2 */
#include "any_buffer.h"

#define SENTINEL MPI_ERR_DIMS

static void arm(MPI_Status *st) {
    memset(st, 0, sizeof *st);
    st->MPI_ERROR = SENTINEL;
}

#define CHECK_KEPT(st, call) \
    MT_CHECK((st).MPI_ERROR == SENTINEL, "%s wrote status.MPI_ERROR = %d", (call), (st).MPI_ERROR)

/* Rank 1's side of one message received by `call`, checked. */
static void check_arrival(any_buffer *b, const MPI_Status *st, int tag, const char *call) {
    MT_CHECK(st->MPI_SOURCE == 0 && st->MPI_TAG == tag, "%s: status source %d tag %d", call, st->MPI_SOURCE,
             st->MPI_TAG);
    MT_CHECK(p2p_count(st, MPI_BYTE) == (int)b->n, "%s: count %d, expected %zu", call, p2p_count(st, MPI_BYTE), b->n);
    unsigned char *h = any_read(b);
    size_t bad = mt_verify(h, b->n, p2p_seed(tag, 0, 0));
    MT_CHECK(bad == (size_t)-1, "%s: first wrong byte at %zu of %zu", call, bad, b->n);
    free(h);
}

enum { CALLS = 8 };

static void status_case(int kind, size_t n, ocl_env *e, int tag0) {
    unsigned char *src = p2p_alloc(n);
    MPI_Status st, st2;
    if (mt_rank == 0) {
        for (int c = 0; c < CALLS; ++c) {
            const int tag = tag0 + c;
            mt_fill(src, n, p2p_seed(tag, 0, 0));
            if (c == 1) {
                MPI_Request q;
                MPI_Isend(src, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &q);
                arm(&st);
                MT_CHECK(MPI_Wait(&q, &st) == MPI_SUCCESS, "MPI_Wait of the send");
                CHECK_KEPT(st, "MPI_Wait (send)");
            } else if (c == 7) {
                arm(&st);
                MT_CHECK(MPI_Sendrecv(src, (int)n, MPI_BYTE, 1, tag, NULL, 0, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &st) ==
                             MPI_SUCCESS,
                         "MPI_Sendrecv on rank 0");
                CHECK_KEPT(st, "MPI_Sendrecv (rank 0)");
            } else {
                MT_CHECK(MPI_Send(src, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Send");
            }
        }
    } else if (mt_rank == 1) {
        any_buffer b = any_alloc(kind, n, e);
        for (int c = 0; c < CALLS; ++c) {
            const int tag = tag0 + c;
            any_set(&b, 0);
            MPI_Request q;
            int flag = 0;
            arm(&st);
            switch (c) {
                case 0:
                    MPI_Recv(any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &st);
                    CHECK_KEPT(st, "MPI_Recv");
                    check_arrival(&b, &st, tag, "MPI_Recv");
                    break;
                case 1:
                    MPI_Irecv(any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &q);
                    MPI_Wait(&q, &st);
                    CHECK_KEPT(st, "MPI_Wait");
                    check_arrival(&b, &st, tag, "MPI_Wait");
                    break;
                case 2:
                    MPI_Irecv(any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &q);
                    MT_CHECK(p2p_test_until(&q, &st), "MPI_Test never completed the receive");
                    CHECK_KEPT(st, "MPI_Test");
                    check_arrival(&b, &st, tag, "MPI_Test");
                    break;
                case 3:
                    MPI_Probe(0, tag, MPI_COMM_WORLD, &st);
                    CHECK_KEPT(st, "MPI_Probe");
                    MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "MPI_Probe count %d", p2p_count(&st, MPI_BYTE));
                    arm(&st);
                    MPI_Recv(any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &st);
                    CHECK_KEPT(st, "MPI_Recv after MPI_Probe");
                    check_arrival(&b, &st, tag, "MPI_Recv after MPI_Probe");
                    break;
                case 4:
                    for (double end = MPI_Wtime() + P2P_TIMEOUT_S; !flag && MPI_Wtime() < end;) {
                        arm(&st);
                        MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, &st);
                    }
                    CHECK_KEPT(st, "MPI_Iprobe");
                    MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "MPI_Iprobe count %d", p2p_count(&st, MPI_BYTE));
                    MPI_Recv(any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &st2);
                    check_arrival(&b, &st2, tag, "MPI_Recv after MPI_Iprobe");
                    break;
                case 5: {
                    MPI_Message m;
                    MPI_Mprobe(0, tag, MPI_COMM_WORLD, &m, &st);
                    CHECK_KEPT(st, "MPI_Mprobe");
                    MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "MPI_Mprobe count %d", p2p_count(&st, MPI_BYTE));
                    arm(&st);
                    MPI_Mrecv(any_ptr(&b), (int)n, b.type, &m, &st);
                    CHECK_KEPT(st, "MPI_Mrecv");
                    check_arrival(&b, &st, tag, "MPI_Mrecv");
                    break;
                }
                case 6: {
                    MPI_Message m = MPI_MESSAGE_NULL;
                    for (double end = MPI_Wtime() + P2P_TIMEOUT_S; !flag && MPI_Wtime() < end;) {
                        arm(&st);
                        MPI_Improbe(0, tag, MPI_COMM_WORLD, &flag, &m, &st);
                    }
                    CHECK_KEPT(st, "MPI_Improbe");
                    MT_CHECK(p2p_count(&st, MPI_BYTE) == (int)n, "MPI_Improbe count %d", p2p_count(&st, MPI_BYTE));
                    arm(&st);
                    MPI_Imrecv(any_ptr(&b), (int)n, b.type, &m, &q);
                    MPI_Wait(&q, &st);
                    CHECK_KEPT(st, "MPI_Wait of MPI_Imrecv");
                    check_arrival(&b, &st, tag, "MPI_Imrecv");
                    break;
                }
                case 7:
                    MPI_Sendrecv(NULL, 0, MPI_BYTE, 0, tag, any_ptr(&b), (int)n, b.type, 0, tag, MPI_COMM_WORLD, &st);
                    CHECK_KEPT(st, "MPI_Sendrecv");
                    check_arrival(&b, &st, tag, "MPI_Sendrecv");
                    break;
            }
        }
        any_free(&b);
    }
    free(src);
}

int main(int argc, char **argv) {
    MT_INIT(&argc, &argv);
    ocl_env e = ocl_setup();
    const int have_ocl = ocl_all_ok(&e);
    const size_t sizes[] = {100, 64 << 10, P2P_RNDV_BYTES};
    const char *size_names[] = {"100_bytes", "64_KiB", "9_MiB"};
    int tag = 100;
    for (int kind = ANY_HOST; kind <= ANY_OPENCL; ++kind)
        for (int s = 0; s < 3; ++s) {
            char name[160];
            snprintf(name, sizeof name, "single_completion_calls_leave_status_mpi_error_alone_%s_%s",
                     any_kind_name(kind), size_names[s]);
            if (kind == ANY_OPENCL && !have_ocl) {
                mt_skip(name, "no usable OpenCL platform");
                continue;
            }
            MT_CASE(name) status_case(kind, sizes[s], &e, tag);
            tag += CALLS;
        }
    ocl_teardown(&e);
    return mt_finalize();
}
