/* GPU-EpiSimdemics' model, compiled as C (reference.c, population.c) and as CUDA device code
 * (episim_kernels.cu), so that the serial reference and the kernels decide every infection
 * the same way. Integers only: no rounding can differ between the CPU and the GPU.
 *
 * Randomness is counter-based: every draw is a hash (splitmix64's finaliser, chained) of
 * the seed and what the draw is about, never a generator's state. A visit's place and time
 * are keyed by (day, person, visit), an infection by (day, susceptible person, infectious
 * person, location, the susceptible visit's start), so the result does not depend on which
 * rank computes it, in what order, or how many ranks there are. */
#ifndef EPISIM_MODEL_H_INCLUDED
#define EPISIM_MODEL_H_INCLUDED

#include <stdint.h>

#ifdef __CUDACC__
#define EPI_FN static __host__ __device__ __forceinline__
#else
#define EPI_FN static inline
#endif

enum { EPI_S = 0, EPI_E = 1, EPI_I = 2, EPI_R = 3, EPI_STATES = 4 };

/* A day is EPI_SLOTS time slots (one bit each of a visit's mask). A person makes EPI_VISITS
 * visits a day, visit k inside window k of EPI_WINDOW slots, so that one person's visits
 * never overlap in time. */
enum { EPI_SLOTS = 64, EPI_VISITS = 4, EPI_WINDOW = EPI_SLOTS / EPI_VISITS };

/* Infection chance per slot of overlap between an infectious and a susceptible person,
 * in units of 2^-32 (1%). */
#define EPI_BETA 42949673ull
/* Persons infectious on day 0: 3 in 1000, chosen by hash. */
enum { EPI_SEED_PER_MILLE = 3 };
/* Days exposed (latent) and infectious, by hash of the person: 1-3 and 3-6. */
enum { EPI_LATENT_MIN = 1, EPI_LATENT_SPAN = 3, EPI_INFECTIOUS_MIN = 3, EPI_INFECTIOUS_SPAN = 4 };
/* What a hash is about, so that no two kinds of draw share a key. */
enum { EPI_KEY_VISIT = 1, EPI_KEY_INFECT, EPI_KEY_SEED, EPI_KEY_LATENT, EPI_KEY_INFECTIOUS };

/* A visit message, computeVisits' output: sent to the rank that owns the location. */
typedef struct {
    uint32_t person, location; /* global indices */
    uint32_t span;             /* start slot | end slot << 8, end exclusive */
    uint32_t state;            /* the person's health state at the start of the day */
} visit_msg;

/* A visit unpacked for computeInteractions: the person-timeline row, its slots as a bit mask. */
typedef struct {
    uint64_t mask;
    uint32_t person, location;
    uint32_t start, state;
} visit_row;

EPI_FN uint64_t epi_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

EPI_FN uint64_t epi_hash(uint64_t seed, uint64_t key, uint64_t a, uint64_t b, uint64_t c) {
    return epi_mix(epi_mix(epi_mix(epi_mix(seed ^ key) ^ a) ^ b) ^ c);
}

EPI_FN int epi_popcount(uint64_t x) {
#ifdef __CUDA_ARCH__
    return __popcll(x);
#else
    return __builtin_popcountll(x);
#endif
}

/* Visit k (< EPI_VISITS) of `person` on `day`: a location among `locations`, a start in the
 * first half of window k and 1-8 slots long. */
EPI_FN visit_msg epi_visit(uint64_t seed, int day, uint32_t person, int k, uint32_t locations, uint32_t state) {
    const uint64_t h = epi_hash(seed, EPI_KEY_VISIT, (uint64_t)day, person, (uint64_t)k);
    const uint32_t start = (uint32_t)(k * EPI_WINDOW) + (uint32_t)(h % (EPI_WINDOW / 2));
    const uint32_t end = start + 1 + (uint32_t)((h >> 8) % (EPI_WINDOW / 2));
    visit_msg v = {person, (uint32_t)((h >> 16) % locations), start | end << 8, state};
    return v;
}

/* The unpack step of computeInteractions: a visit message as a person-timeline row. */
EPI_FN visit_row epi_row(visit_msg v) {
    const uint32_t start = v.span & 0xff, end = v.span >> 8 & 0xff;
    const uint64_t mask = (end >= 64 ? ~0ull : (1ull << end) - 1) & ~((1ull << start) - 1);
    visit_row r = {mask, v.person, v.location, start, v.state};
    return r;
}

/* computeInteractions for one susceptible visit: 1 when any infectious visit of the same
 * location (`bucket`, `count` rows, in any order) infects it. The answer is an OR over the
 * pairs, each decided by its own hash, so the bucket's order does not matter. */
EPI_FN int epi_infected(const visit_row *bucket, int count, visit_row me, int day, uint64_t seed) {
    if (me.state != EPI_S) return 0;
    for (int j = 0; j < count; j++) {
        const visit_row o = bucket[j];
        const int overlap = o.state == EPI_I ? epi_popcount(o.mask & me.mask) : 0;
        if (!overlap) continue;
        const uint64_t h = epi_hash(seed, EPI_KEY_INFECT, (uint64_t)day, (uint64_t)me.person << 32 | o.person,
                                    (uint64_t)me.location << 8 | me.start);
        if ((h >> 32) < (uint64_t)overlap * EPI_BETA) return 1;
    }
    return 0;
}

/* The state a person starts the simulation in, and the day its state next changes. */
EPI_FN void epi_initial(uint64_t seed, uint32_t person, uint8_t *state, int *until) {
    const int seeded = epi_hash(seed, EPI_KEY_SEED, person, 0, 0) % 1000 < EPI_SEED_PER_MILLE;
    *state = seeded ? EPI_I : EPI_S;
    *until =
        seeded ? EPI_INFECTIOUS_MIN + (int)(epi_hash(seed, EPI_KEY_INFECTIOUS, person, 0, 0) % EPI_INFECTIOUS_SPAN) : 0;
}

/* The SEIR update at the end of `day`: exposed persons become infectious and infectious ones
 * recover when their time is up, then a susceptible person infected today becomes exposed. */
EPI_FN void epi_advance(uint64_t seed, uint32_t person, int day, int infected, uint8_t *state, int *until) {
    const int next = day + 1;
    if (*state == EPI_E && *until <= next) {
        *state = EPI_I;
        *until =
            next + EPI_INFECTIOUS_MIN + (int)(epi_hash(seed, EPI_KEY_INFECTIOUS, person, 0, 0) % EPI_INFECTIOUS_SPAN);
    } else if (*state == EPI_I && *until <= next) {
        *state = EPI_R;
    }
    if (*state == EPI_S && infected) {
        *state = EPI_E;
        *until = next + EPI_LATENT_MIN + (int)(epi_hash(seed, EPI_KEY_LATENT, person, 0, 0) % EPI_LATENT_SPAN);
    }
}

#endif
