/* Turning a SIGBUS on a mapped file (truncated by another process while icl reads it) into an error. */
#ifndef ICL_SIGBUS_GUARD_H
#define ICL_SIGBUS_GUARD_H

#include <stddef.h>

#include "icl/icl.h"

/* Runs *rc = fn(ud, err) on this thread; returns 1 if it was cut short by a SIGBUS on an address in
 * [base, base + size), 0 if it ran to its end. A SIGBUS elsewhere goes to the previous handler. */
int icl_sigbus_guard(const void *base, size_t size, int (*fn)(void *ud, icl_error *err), void *ud, icl_error *err,
                     int *rc);

#endif
