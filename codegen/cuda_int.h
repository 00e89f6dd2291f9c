/* cuda_int.h — internals shared by the CUDA emitter's files (SQLite's
 * xxxInt.h): the emission context, the thread tags, the printing helpers,
 * and the entry points of each stage. cuda_emit.c walks the lowered kernel
 * and prints it; cuda_barrier.c places __syncthreads() (the barrier pass);
 * cuda_reduce.c turns cross-thread reductions into warp-shuffle
 * all-reduces; cuda_wmma.c prints the tensor-core (WMMA) calls and
 * fragments. The contract is cuda.h; the details docs/CUDA.md. */
#ifndef TESSEL_CODEGEN_CUDA_INT_H
#define TESSEL_CODEGEN_CUDA_INT_H

#include <stdarg.h>
#include <string.h>

#include "codegen/cuda.h"
#include "codegen/lower_int.h"

/* ---- thread tags ---------------------------------------------------------- */

enum { TAG_NONE = -1, TAG_BX, TAG_BY, TAG_BZ, TAG_TX, TAG_TY, TAG_TZ, TAG_VTHREAD, TAG_COUNT };
#define THREAD_BITS ((1u << TAG_TX) | (1u << TAG_TY) | (1u << TAG_TZ))

/* ---- context -------------------------------------------------------------- */

#define MAXSH 64 /* shared buffers tracked by the barrier pass */

typedef struct accset {
  const ir_buffer *r[MAXSH], *w[MAXSH];
  int nr, nw;
  bool overflow;
} accset;

typedef struct name_ent {
  const void *key;
  char *name;
} name_ent;

/* A var with the thread tags its value depends on (bit per TAG_*). */
typedef struct var_mask {
  const ir_var *var;
  unsigned mask;
  int tag;     /* TAG_* when the var is a thread-bound loop var, else TAG_NONE */
  int lanes;   /* vector let: emitted as an array */
} var_mask;

typedef struct preload {
  const ir_expr *load;
  int id, width;
} preload;

typedef struct cctx {
  ts_arena *a;
  ts_diag *d;
  ts_status st;
  const cg_cuda_opts *o;
  const ir_func *f;
  ts_strbuf *out;
  int ind;
  ir_analyzer an;
  bool idx32;
  ir_stmt *sync; /* the barrier sentinel */
  name_ent *names;
  int nnames, capnames;
  var_mask *vars;
  int nvars, capvars;
  int64_t launch[6];
  int tmp;
  preload pre[64];
  int npre;
  int nvector, nshuffle, nsync, nwmma;
  int64_t unroll_max; /* pragma_auto_unroll_max_step of the enclosing loops (0: none) */
  bool uses_wmma;
  /* barrier pass */
  const ir_buffer **shared;
  int nshared;
  /* module-level buffers */
  const ir_buffer **globals;
  int nglobals, capglobals;
  int64_t shared_bytes;
  /* the thread loops enclosing the statement being emitted */
  const ir_stmt *tloops[32];
  int ntloops;
  const ir_expr *conds[32]; /* enclosing if conditions (race exemption) */
  int nconds;
  /* a cross-thread reduction's store, printed as `_red<id> = _red<id> op rhs`
   * while try_allreduce emits the thread's partial */
  const ir_stmt *red_store;
  const ir_expr *red_rhs;
  const char *red_acc;
  ir_expr_kind red_op;
  int red_id;
} cctx;

static inline void *failp(cctx *c, ts_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void *failp(cctx *c, ts_status code, const char *fmt, ...) {
  if (!c->st) {
    va_list ap;
    va_start(ap, fmt);
    ts_diag_vset(c->d, code, fmt, ap);
    va_end(ap);
    c->st = code;
  }
  return NULL;
}
#define FAIL(c, ...) ((void)failp((c), TS_EUNSUPPORTED, __VA_ARGS__))

static inline void P(cctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void P(cctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_strbuf_vprintf(c->out, fmt, ap);
  va_end(ap);
}
static inline void indent(cctx *c) {
  for (int i = 0; i < c->ind; i++) ts_strbuf_append(c->out, "  ");
}

static inline bool is_half(ir_dtype t) { return t.code == IR_F16 || t.code == IR_BF16; }
static inline const char *to_f32(ir_dtype t) { return t.code == IR_F16 ? "__half2float" : "__bfloat162float"; }
static inline const char *from_f32(ir_dtype t) { return t.code == IR_F16 ? "__float2half" : "__float2bfloat16"; }
static inline bool is_shared(const ir_buffer *b) { return b && b->scope && strncmp(b->scope, "shared", 6) == 0; }

/* ---- the stages' entry points ------------------------------------------- */
/* cuda_emit.c: the thread tag of a binding (TAG_*), names, types, masks,
 * expressions and statements */
int cu_tag_of(const char *t);
const char *cu_vname(cctx *c, const ir_var *v);
const char *cu_bname(cctx *c, const ir_buffer *b);
const char *cu_ctype(cctx *c, ir_dtype t);
void cu_push_var(cctx *c, const ir_var *v, unsigned mask, int tag, int lanes);
unsigned cu_expr_mask(cctx *c, const ir_expr *e, bool *has_load);
void cu_ex(cctx *c, const ir_expr *e, int lane);
void cu_st(cctx *c, const ir_stmt *s);
void cu_st_store(cctx *c, const ir_stmt *s);
bool cu_reduction_form(const ir_stmt *s, ir_expr_kind *op, const ir_expr **rhs);
/* cuda_barrier.c: the shared-memory accesses of s, whether they conflict
 * with the pending ones, and the pass itself (s rebuilt with c->sync
 * sentinels where __syncthreads() goes) */
void cu_accesses(const ir_stmt *s, accset *out);
bool cu_conflicts(const accset *pend, const accset *x);
ir_stmt *cu_sync_stmt(cctx *c, ir_stmt *s, accset *pend, bool converged, const char *where);
/* cuda_reduce.c: a threadIdx.x loop printed as a warp all-reduce (false:
 * not the pattern, nothing printed); a reduction store inside one */
bool cu_try_allreduce(cctx *c, const ir_stmt *loop);
void cu_red_accumulate(cctx *c, const ir_stmt *s);
/* cuda_wmma.c: a tessel.wmma.* call, and a wmma.* fragment's declaration */
void cu_st_wmma(cctx *c, const ir_expr *call);
void cu_decl_fragment(cctx *c, const ir_stmt *alloc);

#endif
