/* libmpiacc's test hooks (exported by the library, not in mpiacc.h), declared once for
 * the MPI tests (p2p_util.h) and the GPU tests (gpu_util.h). */
#ifndef MPIACC_HOOKS_H_INCLUDED
#define MPIACC_HOOKS_H_INCLUDED

/* A named event counter's value (0 when it does not exist). */
long long mpiacc_counter_value(const char *name);
/* A numeric knob's value in effect (SIZE in bytes), -1 when unknown. */
long long mpiacc_knob_value(const char *name);

#endif
