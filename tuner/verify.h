/* verify.h — output verification: a built kernel's outputs are compared,
 * with dtype-aware tolerance, against the reference interpreter running the
 * *unscheduled* function on the same seeded inputs (never against another
 * build). When interpreting the whole function would be too slow, the output
 * stages are interpreted only at a seeded sample of output points; an
 * intermediate stage read pointwise by exactly one sampled stage (an
 * elementwise epilogue chain such as conv -> bias -> add -> relu) runs only at
 * the points its reader needs; other stages are interpreted whole. */
#ifndef TESSEL_TUNER_VERIFY_H
#define TESSEL_TUNER_VERIFY_H

#include "ir/ir.h"

typedef struct tun_verify_result {
  bool matched;
  bool sampled;        /* only a sample of output elements was checked */
  int64_t checked;     /* output elements compared */
  int sampled_stages;  /* stages run only at sample points (outputs and the
                          intermediates feeding them pointwise) */
  double max_abs_err;
  char detail[512];    /* the first mismatch, or why verification was partial */
} tun_verify_result;

/* Interpreter work (statement executions) above which output stages are
 * sampled. */
#define TUN_VERIFY_FULL_BUDGET 20000000.0

/* f: the unscheduled function (constant shapes). Inputs are regenerated with
 * tsrt_fill_random(dtype, seed + i) for input i — what every runner uses.
 * outputs: the kernel's outputs concatenated in param order (outputs_bytes in
 * all). Tolerance: exact for integers and bool; f32/f64 |got-ref| <= 1e-3 +
 * 1e-3|ref|; f16/bf16 2e-2 + 2e-2|ref|. */
ts_status tun_verify(const ir_func *f, uint64_t seed, const void *outputs, size_t outputs_bytes,
                     tun_verify_result *r, ts_diag *d);

#endif
