/* The steps of GPU-EpiSimdemics that every variant shares: the population's blocks,
 * computeVisits and the fragments' sends, the fragment receive protocol, the infection
 * messages home with the SEIR update, and computeInteractions on the host (for the serial
 * reference and the cpu variant). */
#include <stdlib.h>
#include <string.h>

#include "../common/app_common.h"
#include "episim.h"

int owner_of(int n, int parts, int index) {
    const int q = n / parts, r = n % parts;
    return index < r * (q + 1) ? index / (q + 1) : r + (index - r * (q + 1)) / q;
}

static void *must_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "%s: out of host memory (%zu bytes)\n", kProgram, bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

void sim_open(sim *s, int persons, int locations, int days, uint64_t seed, int frag_visits) {
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    s->persons = persons, s->locations = locations, s->days = days, s->seed = seed, s->frag_visits = frag_visits;
    app_split(persons, s->size, s->rank, &s->np, &s->p0);
    app_split(locations, s->size, s->rank, &s->nl, &s->l0);
    const size_t out = (size_t)s->np * EPI_VISITS, ranks = (size_t)s->size;
    s->state = must_alloc((size_t)s->np);
    s->until = must_alloc((size_t)s->np * sizeof(int));
    s->infected_today = must_alloc((size_t)s->np);
    s->counts = must_alloc((size_t)days * sizeof *s->counts);
    s->send = must_alloc(out * sizeof(visit_msg));
    s->send_count = must_alloc(ranks * sizeof(int));
    s->send_off = must_alloc(ranks * sizeof(int));
    s->recv_count = must_alloc(ranks * sizeof(int));
    s->fragments = must_alloc(ranks * sizeof(int));
    s->started = must_alloc(ranks * sizeof(int));
    s->sends = must_alloc((out / (size_t)frag_visits + ranks) * sizeof(MPI_Request));
    s->visits = must_alloc((size_t)persons * EPI_VISITS * sizeof(visit_msg));
    s->ids = must_alloc((size_t)persons * EPI_VISITS * sizeof(unsigned));
}

void sim_reset(sim *s) {
    for (int i = 0; i < s->np; i++) epi_initial(s->seed, (uint32_t)(s->p0 + i), &s->state[i], &s->until[i]);
    memset(s->counts, 0, (size_t)s->days * sizeof *s->counts);
}

void sim_close(sim *s) {
    void *all[] = {s->state,      s->until,     s->infected_today, s->counts, s->send,   s->send_count, s->send_off,
                   s->recv_count, s->fragments, s->started,        s->sends,  s->visits, s->ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    MPI_Comm_free(&s->comm);
}

void compute_visits(sim *s, int day, MPI_Request *recv, day_times *t) {
    const double t0 = MPI_Wtime();
    /* Two passes over the hashes (count, then place) keep the messages grouped by
     * destination without a second copy. */
    memset(s->send_count, 0, (size_t)s->size * sizeof(int));
    for (int i = 0; i < s->np; i++)
        for (int k = 0; k < EPI_VISITS; k++) {
            const visit_msg v = epi_visit(s->seed, day, (uint32_t)(s->p0 + i), k, (uint32_t)s->locations, 0);
            s->send_count[owner_of(s->locations, s->size, (int)v.location)]++;
        }
    for (int r = 0, off = 0; r < s->size; off += s->send_count[r++]) s->send_off[r] = off;
    memset(s->started, 0, (size_t)s->size * sizeof(int)); /* a cursor per destination for now */
    for (int i = 0; i < s->np; i++)
        for (int k = 0; k < EPI_VISITS; k++) {
            const visit_msg v = epi_visit(s->seed, day, (uint32_t)(s->p0 + i), k, (uint32_t)s->locations, s->state[i]);
            const int r = owner_of(s->locations, s->size, (int)v.location);
            s->send[s->send_off[r] + s->started[r]++] = v;
        }
    const double t1 = MPI_Wtime();
    t->visits += t1 - t0;

    /* The count message: how many visits, so how many fragments, each source sends. */
    MPI_Alltoall(s->send_count, 1, MPI_INT, s->recv_count, 1, MPI_INT, s->comm);
    const int f = s->frag_visits;
    s->due = 0, s->received = 0, s->total_fragments = 0;
    for (int r = 0; r < s->size; r++) {
        s->due += s->recv_count[r];
        s->fragments[r] = (s->recv_count[r] + f - 1) / f;
        s->started[r] = s->fragments[r] < kDepth ? s->fragments[r] : kDepth;
        s->total_fragments += s->fragments[r];
        if (s->started[r]) MPI_Startall(s->started[r], &recv[r * kDepth]);
    }
    s->nsends = 0;
    for (int r = 0; r < s->size; r++)
        for (int off = 0; off < s->send_count[r]; off += f) {
            const int n = s->send_count[r] - off < f ? s->send_count[r] - off : f;
            MPI_Isend(s->send + s->send_off[r] + off, n * (int)sizeof(visit_msg), MPI_BYTE, r, TAG_VISITS, s->comm,
                      &s->sends[s->nsends++]);
        }
    t->comm += MPI_Wtime() - t1;
}

int next_fragment(sim *s, MPI_Request *recv, int *n, day_times *t) {
    const double t0 = MPI_Wtime();
    int i = MPI_UNDEFINED, bytes = 0;
    MPI_Status st;
    MPI_Waitany(s->size * kDepth, recv, &i, &st);
    if (i == MPI_UNDEFINED) {
        fprintf(stderr, "%s: rank %d waits for a fragment with no receive active\n", kProgram, s->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    *n = bytes / (int)sizeof(visit_msg);
    s->received += *n;
    t->comm += MPI_Wtime() - t0;
    return i;
}

int slot_reused(const sim *s, int i) { return s->started[i / kDepth] < s->fragments[i / kDepth]; }

void restart_fragment(sim *s, MPI_Request *recv, int i, day_times *t) {
    const int source = i / kDepth;
    if (!slot_reused(s, i)) return;
    const double t0 = MPI_Wtime();
    MPI_Start(&recv[i]);
    s->started[source]++;
    t->comm += MPI_Wtime() - t0;
}

void open_receives(sim *s, void *frags, MPI_Datatype type, MPI_Request *recv) {
    const size_t bytes = (size_t)s->frag_visits * sizeof(visit_msg);
    for (int i = 0; i < s->size * kDepth; i++)
        MPI_Recv_init((char *)frags + (size_t)i * bytes, (int)bytes, type, i / kDepth, TAG_VISITS, s->comm, &recv[i]);
}

void close_receives(sim *s, MPI_Request *recv) {
    for (int i = 0; i < s->size * kDepth; i++) MPI_Request_free(&recv[i]);
}

static int by_value(const void *a, const void *b) {
    const unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

void finish_day(sim *s, int day, unsigned *ids, int n, day_times *t) {
    const double t0 = MPI_Wtime();
    /* One by one: GCC takes MPICH's MPI_STATUSES_IGNORE for an empty array. */
    for (int i = 0; i < s->nsends; i++) MPI_Wait(&s->sends[i], MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    /* Sorted and without repeats: one message per person, grouped by owner (blocks). */
    qsort(ids, (size_t)n, sizeof *ids, by_value);
    int unique = 0;
    for (int i = 0; i < n; i++)
        if (!unique || ids[i] != ids[unique - 1]) ids[unique++] = ids[i];
    memset(s->send_count, 0, (size_t)s->size * sizeof(int));
    for (int i = 0; i < unique; i++) s->send_count[owner_of(s->persons, s->size, (int)ids[i])]++;
    for (int r = 0, off = 0; r < s->size; off += s->send_count[r++]) s->send_off[r] = off;
    const double t2 = MPI_Wtime();
    MPI_Alltoall(s->send_count, 1, MPI_INT, s->recv_count, 1, MPI_INT, s->comm);
    int *recv_off = s->started, total = 0;
    for (int r = 0; r < s->size; total += s->recv_count[r++]) recv_off[r] = total;
    unsigned *home = must_alloc((size_t)total * sizeof *home);
    MPI_Alltoallv(ids, s->send_count, s->send_off, MPI_UNSIGNED, home, s->recv_count, recv_off, MPI_UNSIGNED, s->comm);
    const double t3 = MPI_Wtime();
    memset(s->infected_today, 0, (size_t)s->np);
    for (int i = 0; i < total; i++) s->infected_today[home[i] - (unsigned)s->p0] = 1;
    free(home);
    for (int i = 0; i < s->np; i++) {
        epi_advance(s->seed, (uint32_t)(s->p0 + i), day, s->infected_today[i], &s->state[i], &s->until[i]);
        s->counts[day][s->state[i]]++;
    }
    t->comm += (t1 - t0) + (t3 - t2);
    t->visits += (t2 - t1) + (MPI_Wtime() - t3);
}

int host_interactions(const visit_msg *v, int n, int l0, int nl, int day, uint64_t seed, unsigned *out) {
    visit_row *rows = must_alloc((size_t)n * sizeof *rows), *sorted = must_alloc((size_t)n * sizeof *sorted);
    int *start = must_alloc(((size_t)nl + 1) * sizeof(int)), infected = 0;
    memset(start, 0, ((size_t)nl + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        rows[i] = epi_row(v[i]);
        start[rows[i].location - (unsigned)l0 + 1]++;
    }
    for (int l = 0; l < nl; l++) start[l + 1] += start[l];
    for (int i = 0; i < n; i++) sorted[start[rows[i].location - (unsigned)l0]++] = rows[i];
    for (int l = nl; l > 0; l--) start[l] = start[l - 1]; /* the scatter moved each start to the next's */
    start[0] = 0;
    for (int i = 0; i < n; i++) {
        const int l = (int)sorted[i].location - l0;
        if (epi_infected(sorted + start[l], start[l + 1] - start[l], sorted[i], day, seed))
            out[infected++] = sorted[i].person;
    }
    free(rows);
    free(sorted);
    free(start);
    return infected;
}
