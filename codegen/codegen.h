/* codegen.h — targets and lowering: the LLVM-free half of codegen/, which the
 * search and cost model also use (validity checks, lowered IR for features).
 * Lowering turns a scheduled PrimFunc into the flat *lowered form* that the
 * backends consume and the reference interpreter still runs, so every
 * lowering step is checkable; cg_check rejects what a target cannot run, with
 * a reason. The lowered form, allocation placement and vectorisation rules:
 * docs/TUNING.md ("Notes by file: codegen/"). */
#ifndef TESSEL_CODEGEN_H
#define TESSEL_CODEGEN_H

#include "ir/ir.h"

typedef enum { CG_TARGET_LLVM, CG_TARGET_CUDA } cg_target_kind;

struct cg_target;
/* What differs between target kinds at codegen level, one row per kind in
 * codegen/target.c (QBE's struct Target): the name, what the lowered form
 * may hold, and the kind's own validity check run after cg_check's common
 * walk. The upper layers keep their own per-kind tables (search's space,
 * the tuner's devices) indexed the same way; see docs/CUDA.md. */
typedef struct cg_target_ops {
  const char *name;     /* "llvm", "cuda" */
  bool gpu;             /* thread-bound loops and shared memory; no parallel loops */
  /* the kind's own check after the common one (NULL: none) */
  ts_status (*check)(const ir_func *f, const struct cg_target *t, ts_diag *d);
} cg_target_ops;

typedef struct cg_target {
  cg_target_kind kind;
  const cg_target_ops *ops; /* set by cg_target_parse; read through cg_target_ops_of */
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
/* The ops row of t's kind (t->ops, or the table's row for a hand-built
 * target whose ops is NULL; the llvm row for t == NULL). */
const cg_target_ops *cg_target_ops_of(const struct cg_target *t);
/* True if the target's triple is the host's (or empty). */
bool cg_target_is_host(const cg_target *t);

typedef struct cg_lowered {
  ir_func *func;       /* lowered form, flat buffers */
  const ir_func *orig; /* the scheduled function (n-d params, for metadata) */
} cg_lowered;

/* Lowers f into arena a. Errors: TS_EUNSUPPORTED with a reason naming the
 * block/loop. On CPU targets the guarded tails of imperfect splits are
 * partitioned off (lower_part.c). */
ts_status cg_lower(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d);
/* The same without the tail partitioning: the cost model's features
 * describe the schedule's loop nest, as TVM extracts them before its
 * LoopPartition. */
ts_status cg_lower_unpartitioned(ts_arena *a, const ir_func *f, const cg_target *t, cg_lowered *out, ts_diag *d);
/* Checks that a scheduled function can be built for t (used by search's
 * postprocessors before spending a build on it). */
ts_status cg_check(const ir_func *f, const cg_target *t, ts_diag *d);

#endif
