/* api.c — libtessel's own translation unit: the version query of the public
 * embedding API (include/tessel/tessel.h). The modules' objects are linked
 * whole into the library. */
#include "tessel/tessel.h"
#include "tessel_config.h"

const char *tessel_version(void) { return TESSEL_VERSION; }
