/* codegen.h — targets and lowering: the LLVM-free half of codegen/, which the
 * search and cost model also use (validity checks, lowered IR for features).
 *
 * Lowering turns a scheduled PrimFunc (blocks, multi-dimensional buffers)
 * into the *lowered form* that backends consume and the reference
 * interpreter still runs (so every lowering step is checkable):
 *  - no block realizes: iter vars are replaced by their bindings; a block
 *    predicate becomes an IR_IF; a reduction's init runs under an IR_IF that
 *    tests every R iter var at the start of its domain (or, after
 *    decompose_reduction, is its own loop nest);
 *  - every buffer is flat (ndim 1, shape [number of elements incl. padding
 *    from storage_align/strides]); loads and stores carry exactly one index;
 *    params keep their order, are flattened the same way, and
 *    cg_lowered.orig keeps the n-d originals for artifact metadata;
 *  - buffers allocated by blocks become IR_ALLOCATE statements placed at the
 *    allocating block's position, with their storage scope kept ("global":
 *    heap or stack by size, "local": stack);
 *  - a vectorized loop with constant extent L whose body can be expressed in
 *    lanes becomes straight-line vector code: the loop var is replaced by
 *    ramp(0, 1, L) and expressions are widened (ramp/broadcast; contiguous
 *    indices become ramp(base, 1, L) so backends emit vector loads/stores;
 *    other indices become gathers); a vectorized loop that cannot be
 *    expressed this way stays an IR_FOR of kind vectorized, which backends
 *    must treat as a serial loop plus a vectorization hint (correct fallback);
 *  - parallel, unrolled and thread-bound loops stay IR_FOR of their kind,
 *    with annotations kept (e.g. "pragma_auto_unroll_max_step");
 *  - index expressions are simplified (ir_simplify) under loop ranges.
 *
 * Validity (cg_check): what a target cannot run is rejected with a reason
 * (thread-bound loops on CPU, vector lanes over 64, nested parallel loops,
 * shared/local scopes on CPU are fine, warp scopes are not). */
#ifndef TESSEL_CODEGEN_H
#define TESSEL_CODEGEN_H

#include "ir/ir.h"

typedef enum { CG_TARGET_LLVM, CG_TARGET_CUDA } cg_target_kind;

typedef struct cg_target {
  cg_target_kind kind;
  char triple[128]; /* empty: host */
  char cpu[64];     /* empty: host CPU (llvm) */
  char attrs[512];  /* -mattr=..., comma separated */
  char arch[32];    /* cuda: sm_90 */
  int vector_bits;  /* widest SIMD register in bits (0: unknown -> 128) */
  int num_cores;    /* 0: unknown */
  char text[700];   /* canonical target string, for logs */
} cg_target;

/* Parses "llvm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
 * "llvm -mattr=+avx2,+fma", "cuda -arch=sm_90". Unknown kinds or keys are
 * TS_EINVAL naming them. Host details are filled in by the backend. */
ts_status cg_target_parse(const char *s, cg_target *t, ts_diag *d);
/* True if the target's triple is the host's (or empty). */
bool cg_target_is_host(const cg_target *t);

typedef struct cg_lowered {
  ir_func *func;       /* lowered form, flat buffers */
  const ir_func *orig; /* the scheduled function (n-d params, for metadata) */
} cg_lowered;

/* Lowers f into arena a. Errors: TS_EUNSUPPORTED with a reason naming the
 * block/loop. */
ts_status cg_lower(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d);
/* Checks that a scheduled function can be built for t (used by search's
 * postprocessors before spending a build on it). */
ts_status cg_check(const ir_func *f, const cg_target *t, ts_diag *d);

#endif
