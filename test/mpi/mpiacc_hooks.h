/* libmpiacc's test hooks (exported by the library, not in mpiacc.h), declared once for
 * the MPI tests (p2p_util.h) and the GPU tests (gpu_util.h). */
#ifndef MPIACC_HOOKS_H_INCLUDED
#define MPIACC_HOOKS_H_INCLUDED

/* A named event counter's value: 0 for a counter declared in src/util/counters.def that
 * nothing bumped yet, -1 for a name not declared there (a test bug: a difference of two
 * such readings is 0 whatever happened). */
long long mpiacc_counter_value(const char *name);
/* A numeric knob's value in effect (SIZE in bytes), -1 when unknown. */
long long mpiacc_knob_value(const char *name);

#endif
