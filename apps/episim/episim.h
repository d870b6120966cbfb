/* GPU-EpiSimdemics: what the driver (main.c), the shared host steps (population.c), the
 * serial reference (reference.c), the CUDA device layer (device_cuda.c) and the four main
 * loops (loop_*.c) share.
 *
 * Persons and locations are cut in blocks across the ranks (app_split). Each day a rank
 * runs computeVisits for its persons on the CPU and sends each visit message to the rank
 * that owns its location, in fragments of at most `frag_visits` messages. A receiver learns
 * how many visits each rank sends it this day from one MPI_Alltoall (the count message), so
 * it knows how many fragments to take from each source, whatever the rank count. Fragments
 * land in persistent receives (MPI_Recv_init, started with MPI_Startall), `kDepth` per
 * source, each restarted while that source has fragments left. computeInteractions then
 * decides the infections of the rank's locations, and infection messages go home to the
 * persons' owners (MPI_Alltoall of counts, MPI_Alltoallv of person indices), which apply the
 * SEIR update. */
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
    double comm;         /* MPI: count messages, sends, waits for fragments, infection messages */
} day_times;

/* The device state of one rank (device_cuda.c). */
typedef struct {
    cudaStream_t stream;                        /* the application's non-default stream (advanced, mpi-acc) */
    visit_msg *visits;                          /* the day's visit vector (basic, advanced) */
    visit_row *rows, *sorted;                   /* unpacked visits, in arrival order, then grouped by location */
    unsigned *loc_count, *loc_start, *loc_fill; /* per local location */
    unsigned *infected;                         /* persons infected today (a list), its length at infected[capacity] */
    int capacity;                               /* rows the arrays above hold */
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
    /* computeVisits' output, grouped by destination rank */
    visit_msg *send;
    int *send_count, *send_off, *recv_count; /* per rank */
    int *fragments, *started;                /* per source: fragments due today, receives started */
    MPI_Request *sends;
    int nsends, due, received, total_fragments; /* today's: visits due and received, fragments due */
    visit_msg *visits;                          /* host visit vector (basic, cpu), persons * EPI_VISITS */
    unsigned *ids;                              /* infected persons found here today, persons * EPI_VISITS at most */
    uint8_t *infected_today;                    /* per owned person */
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
/* computeVisits for `day` (t->visits), then the count message, each source's first
 * min(kDepth, fragments) receives of `recv` (kDepth a source) started, and the fragments'
 * MPI_Isend (t->comm). */
void compute_visits(sim *s, int day, MPI_Request *recv, day_times *t);
/* Waits for the next fragment (t->comm): its slot in `recv`, its visit count in *n. */
int next_fragment(sim *s, MPI_Request *recv, int *n, day_times *t);
/* 1 when slot i takes another fragment today: its buffer must be free before restart_fragment. */
int slot_reused(const sim *s, int i);
/* Restarts slot i when its source has fragments left; the caller is done with its buffer. */
void restart_fragment(sim *s, MPI_Request *recv, int i, day_times *t);
/* The persistent receives: kDepth slots of frag_visits messages per source, from `frags`
 * (host or device memory, as `type` says), and their end. */
void open_receives(sim *s, void *frags, MPI_Datatype type, MPI_Request *recv);
void close_receives(sim *s, MPI_Request *recv);
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
/* Room for n rows, counts cleared, on `stream` (0: the legacy default stream). */
void device_begin_day(sim *s, int n, cudaStream_t stream);
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
