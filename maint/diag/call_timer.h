/* Shared by the timing shims in maint/diag: a monotonic clock in microseconds, and WRAP,
 * which defines `name` to call the next definition of it (the real one, found with
 * dlsym(RTLD_NEXT)) and hand its duration to the shim's own
 *     static void note(const char *name, double us);
 * Include after <dlfcn.h> and the headers declaring the wrapped functions. */
#ifndef MPIACC_DIAG_CALL_TIMER_H
#define MPIACC_DIAG_CALL_TIMER_H
#include "clock_us.h"

static void note(const char *name, double us);

#define WRAP(ret, name, params, args)                             \
    ret name params {                                             \
        static ret(*real) params;                                 \
        if (!real) real = (ret(*) params)dlsym(RTLD_NEXT, #name); \
        double t0_ = now_us();                                    \
        ret rv_ = real args;                                      \
        note(#name, now_us() - t0_);                              \
        return rv_;                                               \
    }

#endif
