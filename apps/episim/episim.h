/* GPU-EpiSimdemics: what the driver (main.c), the shared host steps (population.c), the
 * serial reference (reference.c), the CUDA device layer (device_cuda.c) and the four main
 * loops (loop_*.c) share.
 *
 * Persons and locations are cut in blocks across the ranks (app_split). Each day a rank
 * runs computeVisits for its persons on the CPU and sends each visit message to the rank
 * that owns its location, in fragments of `frag_visits` messages, each sent as soon as it
 * is full. The last fragment of the day to each rank is short (possibly empty): that is the
 * marker that the source is done, whatever the rank count. Fragments land in persistent
 * receives (MPI_Recv_init, started with MPI_Startall), kDepth slots per source, taken in
 * order and restarted at once, so that a source's k-th fragment always lands in slot
 * k % kDepth; the fragments that arrive while visits are still being computed are handed
 * over then, overlapping the two. computeInteractions then decides the infections of the
 * rank's locations, and infection messages go home to the persons' owners (MPI_Alltoall of
 * counts, MPI_Alltoallv of person indices), which apply the SEIR update. */
#ifndef EPISIM_H_INCLUDED
#define EPISIM_H_INCLUDED

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Persistent receive fragments per source rank: while one is being unpacked, the next can land. */
enum { kDepth = 2 };
enum { TAG_VISITS = 11 };

enum { V_BASIC, V_ADVANCED, V_MPI_ACC, V_CPU, VARIANTS };

/* Seconds per phase, summed over the days. */
typedef struct {
    double visits;       /* computeVisits and the SEIR update (CPU) */
    double interactions; /* computeInteractions: grouping by location, the infection kernel, its result read back */
    double unpack;       /* fragment handling: host copies, H2D copies, unpack kernels waited for */
    double comm;         /* MPI: sends, polls and waits for fragments, infection messages */
} day_times;

/* The device state of one rank (device_cuda.c). */
typedef struct {
    cudaStream_t stream;                        /* the application's non-default stream (advanced, mpi-acc) */
    visit_msg *visits;                          /* the day's visit vector (basic, advanced) */
    visit_row *rows, *sorted;                   /* unpacked visits, in arrival order, then grouped by location */
    unsigned *loc_count, *loc_start, *loc_fill; /* per local location */
    unsigned *infected;                         /* persons infected today (a list), its length at infected[capacity] */
    int capacity; /* rows the arrays above hold: every visit of the day, wherever it goes */
} gpu_state;

typedef struct {
    MPI_Comm comm;
    int rank, size;
    int persons, locations, days, frag_visits;
    uint64_t seed;
    int p0, np; /* owned persons */
    int l0, nl; /* owned locations */
    uint8_t *state;
    int *until;
    long long (*counts)[EPI_STATES]; /* per day, this rank's persons in S, E, I, R after the day */
    /* computeVisits' output: fragments of frag_visits messages, one being filled per destination */
    visit_msg *send;
    int *filling, *fill; /* per destination: its fragment being filled, the messages in it */
    MPI_Request *sends;
    int nsends;
    int *head, *done;   /* per source: the slot its next fragment lands in; 1 once its last is in */
    MPI_Request *heads; /* per source: its head slot's request, MPI_REQUEST_NULL once done */
    int received;       /* visits received today */
    int *send_count, *send_off, *recv_count, *recv_off; /* per rank: the infection messages */
    visit_msg *visits;                                  /* host visit vector (basic, cpu), persons * EPI_VISITS */
    unsigned *ids;           /* infected persons found here today, persons * EPI_VISITS at most */
    uint8_t *infected_today; /* per owned person */
    gpu_state gpu;
} sim;

extern const char kProgram[];
extern const char *const kVariantNames[VARIANTS];

#include "../common/cuda_check.h"

/* population.c: the steps every variant shares. */
int owner_of(int n, int parts, int index); /* the rank that app_split gives `index` to */
void sim_open(sim *s, int persons, int locations, int days, uint64_t seed, int frag_visits);
void sim_reset(sim *s); /* day 0's health states, counts cleared */
void sim_close(sim *s);
/* What a variant does with a fragment: `n` (> 0) visit messages in `slot`, the day's
 * `base`-th onwards. The slot is restarted when it returns, so it must be done with the
 * slot's buffer or have the restart ordered after its use (mpi-acc: the stream). */
typedef void (*fragment_fn)(sim *s, void *ctx, int slot, int n, int base);
/* The persistent receives, kDepth slots of frag_visits messages per source from `frags`
 * (host or device memory, as `type` says), all started; and their end, after every rank
 * fills the slots still posted with empty messages. */
void open_receives(sim *s, void *frags, MPI_Datatype type, MPI_Request *recv);
void close_receives(sim *s, MPI_Request *recv);
/* computeVisits for `day` (t->visits): each fragment is sent when full (t->comm), and the
 * fragments that have arrived are handed to `on_fragment` (t->unpack) then and until every
 * source's last one is in. */
void compute_visits(sim *s, int day, MPI_Request *recv, fragment_fn on_fragment, void *ctx, day_times *t);
/* Sends done, then the infection messages home (`ids`, n person indices, any order and
 * repeats) and the SEIR update of `day`, counted into s->counts. */
void finish_day(sim *s, int day, unsigned *ids, int n, day_times *t);
/* computeInteractions on the host for `n` visits of locations [l0, l0 + nl): infected
 * persons into `out` (at most n), returns how many. The reference and the cpu variant. */
int host_interactions(const visit_msg *v, int n, int l0, int nl, int day, uint64_t seed, unsigned *out);

/* device_cuda.c */
int device_find(int local_rank);
void device_open(sim *s);
void device_close(sim *s);
/* The day's location counts cleared, on `stream` (0: the legacy default stream). */
void device_begin_day(sim *s, cudaStream_t stream);
/* Unpacks n visit messages at `msgs` (device memory) into rows from `base`, on `stream`. */
void device_unpack(sim *s, const visit_msg *msgs, int n, int base, cudaStream_t stream);
/* Groups the day's rows by location, runs the infection kernel after everything queued on
 * `stream`, and reads the infected persons back into `ids` (host, s->received long). */
int device_interactions(sim *s, int day, cudaStream_t stream, unsigned *ids);

/* The main loops: `days` days from the current state. */
day_times run_basic(sim *s, int days);
day_times run_advanced(sim *s, int days);
day_times run_mpi_acc(sim *s, int days);
day_times run_cpu(sim *s, int days);

/* reference.c: S, E, I, R after each day, on one process, no MPI. */
void reference(int persons, int locations, int days, uint64_t seed, long long (*counts)[EPI_STATES]);

#endif
