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
