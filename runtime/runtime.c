/* runtime.c — version of the runtime library (the pool, loader and measurer
 * live in threadpool.c and measure.c). */
#include "runtime.h"

const char *tsrt_version(void);
const char *tsrt_version(void) { return "0.1.0"; }
