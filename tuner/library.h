/* library.h — library candidates: a task a vendor library covers (an f32
 * matrix product, batched or not, B plain or transposed: OpenBLAS's
 * cblas_sgemm / cblas_sgemv and oneDNN's dnnl_sgemm; an int8 one, u8 or i8
 * times i8 into i32: oneDNN's dnnl_gemm_u8s8s32 / s8s8s32) gets the library call as
 * one more candidate kernel. The kernel is the task's function with the
 * product's loop nest replaced by the call (call_extern of the C function on
 * the task's buffers, a loop over the batch when A and B both carry it; a
 * fused epilogue stays, default-scheduled), so it is built, measured
 * and verified like any schedule, and an artifact or model holding it links
 * the library (codegen/llvm.c) — nothing else does. Its record has kind
 * "library" and the call's parameters in place of a trace (docs/LOG.md);
 * replaying one matches the task again and picks the candidate with the same
 * parameters. docs/TUNING.md, "Library candidates". */
#ifndef TESSEL_TUNER_LIBRARY_H
#define TESSEL_TUNER_LIBRARY_H

#include "codegen/codegen.h"
#include "ir/schedule/trace.h"
#include "tuner/database.h"

#define TUN_LIB_MAX_CANDS 4

/* One library call for a task. */
typedef struct tun_lib_cand {
  const char *lib;  /* "openblas", "dnnl" */
  const char *fn;   /* "cblas_sgemm", "cblas_sgemv", "dnnl_sgemm", "dnnl_gemm_u8s8s32", ... */
  char params[512]; /* the record's "params": a JSON object's text, keys sorted */
  uint64_t hash;    /* the record's trace_hash (XXH3 of params, never 0) */
} tun_lib_cand;

/* True when t can run library kernels: an llvm target for this host (not a
 * cross triple, not CUDA); the caller adds "not through RPC". */
bool tun_library_target_ok(const cg_target *t);
/* The library calls that compute f on t (0 when none: f is not a plain
 * matrix product, or no library was found when tessel was built), at most
 * max of them in out. */
int tun_library_candidates(const ir_func *f, const cg_target *t, tun_lib_cand *out, int max);
/* The kernel of candidate c for f on t as a schedule: the statement that
 * computes the product replaced by the call; f's other blocks (an epilogue
 * such as a bias add, which reads the product) keep their computation under
 * the default schedule for t. NULL with d set when f does not match c's
 * parameters (TS_EINVAL). */
sch_traced *tun_library_schedule(const ir_func *f, const cg_target *t, const tun_lib_cand *c, ts_diag *d);
/* The kernel of record r for f: a trace record's trace replayed, or a
 * library record's call rebuilt (its parameters must match one of f's
 * candidates on t). NULL with d set when it does not apply. */
sch_traced *tun_record_schedule(const tun_record *r, const ir_func *f, const cg_target *t, ts_diag *d);
/* The kernel of library record r, measured on some binding of f's size
 * vars (a bucket, the --sym values), as a call on f at any size: the
 * candidate of f with the record's library and the same structure (batch
 * mode, transposed B, other blocks), its extents f's own (symbolic ones
 * pass into the call at run time); the call is cblas_sgemv or cblas_sgemm
 * as f's extents say. NULL with d set when f has no such candidate
 * (TS_EUNSUPPORTED) or r is no library record (TS_EINVAL). What the model
 * build replays as a bucket's covering kernel and as the generic kernel
 * (docs/TUNING.md "Library candidates", "Any size"). */
sch_traced *tun_record_schedule_any_size(const tun_record *r, const ir_func *f, const cg_target *t, ts_diag *d);
/* A record of the packed call (tsrt_dnnl_sgemm_packed: oneDNN packs the
 * weight once and reuses the pack, so the weight must not change between
 * calls): the index of the weight's parameter; -1 for any other record. */
int tun_library_packed_param(const tun_record *r);
/* A library record's call ("cblas_sgemm", "tsrt_dnnl_sgemm_packed") in call
 * (n bytes; "" when none); false for any other record. */
bool tun_record_library_call(const tun_record *r, char *call, size_t n);

/* True for a record of kind "library"; its library's name ("openblas") in
 * lib (n bytes) when asked. */
bool tun_record_is_library(const tun_record *r, char *lib, size_t n);

/* The best verified library record of (key, target) at `threads` threads
 * (TUN_ANY_THREADS: any count) and the best verified trace record at the
 * same count: their mean seconds (0: none) and the library's name (lib, n
 * bytes; "" when none). What the per-task tables say: which tasks went to a
 * library and by how much. */
void tun_library_split(const tun_db *db, const char *key, const char *target, int threads, double *lib_s, char *lib,
                       size_t n, double *kernel_s);
/* The table cell for that split: "dnnl 1.31x" (the library is the task's
 * kernel, 1.31x faster than the best generated one), "kernel 1.15x" (a
 * generated kernel won, 1.15x faster than the best library call), "dnnl"
 * (nothing to compare), "-" (no library record). */
void tun_library_cell(double lib_s, const char *lib, double kernel_s, char *buf, size_t n);

#endif
