/* intrin.h — the registry of tensor intrinsics (TVM's TensorIntrin table):
 * per intrinsic a description and an implementation, both loop-IR script
 * parsed on demand, plus the architecture and features it needs. The table
 * is static and read-only. docs/TENSORIZE.md, docs/IR.md ("Notes by file"). */
#ifndef TESSEL_IR_SCHEDULE_INTRIN_H
#define TESSEL_IR_SCHEDULE_INTRIN_H

#include "../ir.h"

typedef struct sch_intrin {
  const char *name;     /* "x86.avx512.vnni.i8i8.4x16x4", ... */
  const char *arch;     /* "x86_64", "aarch64" or "cuda" */
  const char *features; /* comma-separated LLVM features ("avx512f,avx512vnni"), or
                           for cuda the minimum arch ("sm_70") */
  /* the shape of one call: rows (M), lanes (N), reduction (K) */
  int m, n, k;
  const char *desc; /* loop-IR script of the description */
  const char *impl; /* loop-IR script of the implementation */
} sch_intrin;

/* Number of registered intrinsics and the i-th (0 <= i < count). */
int sch_intrin_count(void);
const sch_intrin *sch_intrin_at(int i);
/* The intrinsic of that name, or NULL. */
const sch_intrin *sch_intrin_get(const char *name);

/* Parses the description and the implementation into arena a (fresh vars
 * and buffers per call). Errors: TS_EPARSE & co. from the parser (a bug in
 * the table), with the intrinsic named. */
ts_status sch_intrin_funcs(const sch_intrin *in, ts_arena *a, ir_func **desc, ir_func **impl,
                           ts_diag *d);

/* Whether a target offers the intrinsic. arch: "x86_64", "aarch64" (an LLVM
 * triple's first component is accepted too: "x86_64-pc-linux-gnu") or
 * "cuda". features: LLVM -mattr style ("+avx512f,+avx512vnni,-avx2"); cpu:
 * an LLVM CPU name whose feature set is known here (znver4, sapphirerapids,
 * icelake-server, cascadelake, neoverse-n1, neoverse-v1, cortex-a76, apple-m1
 * ...), used when features does not list a needed one; cuda_arch: "sm_80". */
bool sch_intrin_available(const sch_intrin *in, const char *arch, const char *cpu,
                          const char *features, const char *cuda_arch);

#endif
