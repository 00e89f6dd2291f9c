/* capi_int.h — what the C API's translation units (capi.c, capi_tune.c)
 * share: the kernel handle's layout and turning a ts_diag into the caller's
 * tessel_error. Not installed. */
#ifndef TESSEL_TUNER_CAPI_INT_H
#define TESSEL_TUNER_CAPI_INT_H

#include "tessel/tessel.h"
#include "base/ts.h"
#include "ir/ir.h"

struct tessel_func {
  ts_arena ar;
  ir_func *func;      /* in ar, no symbolic sizes */
  char *definition;   /* the canonical spec, the DSL text, or the file argument */
  char key[17];
  double flops;       /* built-in workloads only */
};

/* Copies d into err (NULL: nothing) and returns its code (TS_EINTERNAL for
 * a diag nobody set). */
tessel_status capi_fail(tessel_error *err, const ts_diag *d);
/* Sets err to code and the formatted message; returns code. */
tessel_status capi_err(tessel_error *err, tessel_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
