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

/* Fragments the send area holds: every full one of a day, one short one per destination,
 * and the one each send leaves being filled. */
static size_t send_fragments(const sim *s) {
    return (size_t)s->np * EPI_VISITS / (size_t)s->frag_visits + 2 * (size_t)s->size;
}

void sim_open(sim *s, int persons, int locations, int days, uint64_t seed, int frag_visits) {
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    s->persons = persons, s->locations = locations, s->days = days, s->seed = seed, s->frag_visits = frag_visits;
    app_split(persons, s->size, s->rank, &s->np, &s->p0);
    app_split(locations, s->size, s->rank, &s->nl, &s->l0);
    const size_t ranks = (size_t)s->size, all_visits = (size_t)persons * EPI_VISITS;
    s->state = must_alloc((size_t)s->np);
    s->until = must_alloc((size_t)s->np * sizeof(int));
    s->infected_today = must_alloc((size_t)s->np);
    s->counts = must_alloc((size_t)days * sizeof *s->counts);
    s->send = must_alloc(send_fragments(s) * (size_t)frag_visits * sizeof(visit_msg));
    s->sends = must_alloc(send_fragments(s) * sizeof(MPI_Request));
    int **per_rank[] = {&s->filling,    &s->fill,     &s->head,       &s->done,
                        &s->send_count, &s->send_off, &s->recv_count, &s->recv_off};
    for (size_t i = 0; i < sizeof per_rank / sizeof per_rank[0]; i++) *per_rank[i] = must_alloc(ranks * sizeof(int));
    s->heads = must_alloc(ranks * sizeof(MPI_Request));
    s->visits = must_alloc(all_visits * sizeof(visit_msg));
    s->ids = must_alloc(all_visits * sizeof(unsigned));
}

void sim_reset(sim *s) {
    for (int i = 0; i < s->np; i++) epi_initial(s->seed, (uint32_t)(s->p0 + i), &s->state[i], &s->until[i]);
    memset(s->counts, 0, (size_t)s->days * sizeof *s->counts);
}

void sim_close(sim *s) {
    void *all[] = {s->state,    s->until,      s->infected_today, s->counts, s->send,  s->sends,
                   s->filling,  s->fill,       s->head,           s->done,   s->heads, s->send_count,
                   s->send_off, s->recv_count, s->recv_off,       s->visits, s->ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    MPI_Comm_free(&s->comm);
}

void open_receives(sim *s, void *frags, MPI_Datatype type, MPI_Request *recv) {
    const size_t bytes = (size_t)s->frag_visits * sizeof(visit_msg);
    for (int i = 0; i < s->size * kDepth; i++)
        MPI_Recv_init((char *)frags + (size_t)i * bytes, (int)bytes, type, i / kDepth, TAG_VISITS, s->comm, &recv[i]);
    MPI_Startall(s->size * kDepth, recv);
    memset(s->head, 0, (size_t)s->size * sizeof(int));
}

void close_receives(sim *s, MPI_Request *recv) {
    /* Every slot is posted (each is restarted once taken): kDepth empty messages to each
     * rank complete them all, and then they can be freed. */
    char none = 0;
    for (int i = 0; i < s->size * kDepth; i++)
        MPI_Isend(&none, 0, MPI_BYTE, i / kDepth, TAG_VISITS, s->comm, &s->sends[i]);
    for (int i = 0; i < s->size * kDepth; i++) MPI_Wait(&recv[i], MPI_STATUS_IGNORE);
    for (int i = 0; i < s->size * kDepth; i++) {
        MPI_Wait(&s->sends[i], MPI_STATUS_IGNORE);
        MPI_Request_free(&recv[i]);
    }
}

/* Takes the next fragment of any source whose head slot has completed (waiting for one
 * when `wait`), hands it over and restarts its slot; 0 when there was none. */
static int take_fragment(sim *s, MPI_Request *recv, int wait, fragment_fn on_fragment, void *ctx, day_times *t) {
    const double t0 = MPI_Wtime();
    int source = MPI_UNDEFINED, flag = 0, bytes = 0;
    MPI_Status st;
    for (int r = 0; r < s->size; r++) s->heads[r] = s->done[r] ? MPI_REQUEST_NULL : recv[r * kDepth + s->head[r]];
    if (wait) {
        MPI_Waitany(s->size, s->heads, &source, &st);
        flag = 1;
    } else {
        MPI_Testany(s->size, s->heads, &source, &flag, &st);
    }
    const double t1 = MPI_Wtime();
    t->comm += t1 - t0;
    if (!flag || source == MPI_UNDEFINED) return 0;
    const int slot = source * kDepth + s->head[source];
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    const int n = bytes / (int)sizeof(visit_msg);
    s->head[source] = (s->head[source] + 1) % kDepth;
    s->done[source] = n < s->frag_visits; /* the short one is the last */
    if (n) on_fragment(s, ctx, slot, n, s->received);
    s->received += n;
    const double t2 = MPI_Wtime();
    MPI_Start(&recv[slot]);
    t->unpack += t2 - t1;
    t->comm += MPI_Wtime() - t2;
    return 1;
}

/* Sends destination r's fragment being filled (t->comm), and takes what has arrived. */
static void send_fragment(sim *s, int r, MPI_Request *recv, fragment_fn on_fragment, void *ctx, day_times *t) {
    const double t0 = MPI_Wtime();
    MPI_Isend(s->send + (size_t)s->filling[r] * s->frag_visits, s->fill[r] * (int)sizeof(visit_msg), MPI_BYTE, r,
              TAG_VISITS, s->comm, &s->sends[s->nsends]);
    s->filling[r] = ++s->nsends + s->size - 1; /* the first size fragments are each destination's first */
    s->fill[r] = 0;
    t->comm += MPI_Wtime() - t0;
    while (take_fragment(s, recv, 0, on_fragment, ctx, t)) continue;
}

void compute_visits(sim *s, int day, MPI_Request *recv, fragment_fn on_fragment, void *ctx, day_times *t) {
    double t0 = MPI_Wtime();
    s->nsends = 0, s->received = 0;
    for (int r = 0; r < s->size; r++) s->filling[r] = r, s->fill[r] = 0, s->done[r] = 0;
    for (int i = 0; i < s->np; i++)
        for (int k = 0; k < EPI_VISITS; k++) {
            const visit_msg v = epi_visit(s->seed, day, (uint32_t)(s->p0 + i), k, (uint32_t)s->locations, s->state[i]);
            const int r = owner_of(s->locations, s->size, (int)v.location);
            s->send[(size_t)s->filling[r] * s->frag_visits + s->fill[r]++] = v;
            if (s->fill[r] < s->frag_visits) continue;
            t->visits += MPI_Wtime() - t0;
            send_fragment(s, r, recv, on_fragment, ctx, t);
            t0 = MPI_Wtime();
        }
    t->visits += MPI_Wtime() - t0;
    /* The short fragments (possibly empty): each destination's last of the day. */
    for (int r = 0; r < s->size; r++) send_fragment(s, r, recv, on_fragment, ctx, t);
    for (;;) {
        int left = 0;
        for (int r = 0; r < s->size; r++) left += !s->done[r];
        if (!left) break;
        take_fragment(s, recv, 1, on_fragment, ctx, t);
    }
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
    int *recv_off = s->recv_off, total = 0;
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
