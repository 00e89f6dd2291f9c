/* verify.c — checks a kernel's outputs against the reference interpreter on
 * the unscheduled function (see verify.h). Small functions are interpreted
 * whole. For large ones, each output stage of the form the DSL produces — a
 * chain of loops around one block whose spatial iter vars are bound to loop
 * vars — is rewritten to iterate over a seeded table of sample points instead
 * of its spatial loops (`for s: let i = samples[s*2]: let j = ...: <its
 * reduction loops> block`), so a 1024³ matmul costs 256 dot products, not a
 * billion interpreter steps. Stages the outputs read are interpreted whole. */
#include "tuner/verify.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"
#include "ir/arith/arith.h"
#include "ir/interp.h"
#include "ir/struct.h"

#define SAMPLES 256
#define HARD_LIMIT 4e8

_Static_assert((int)IR_F32 == (int)TSRT_F32 && (int)IR_BF16 == (int)TSRT_BF16 &&
                   (int)IR_HANDLE == (int)TSRT_HANDLE && (int)IR_BOOL == (int)TSRT_BOOL &&
                   (int)IR_U32 == (int)TSRT_U32,
               "runtime dtype codes follow IR_DTYPE_LIST");

static double work(const ir_stmt *s, double mult) {
  if (!s) return 0;
  int64_t e;
  switch (s->kind) {
  case IR_FOR:
    if (!ir_fold_int(s->u.loop.extent, &e)) return INFINITY;
    return work(s->u.loop.body, mult * (double)(e > 0 ? e : 0));
  case IR_SEQ: {
    double t = 0;
    for (int i = 0; i < s->u.seq.n; i++) t += work(s->u.seq.stmts[i], mult);
    return t;
  }
  case IR_BLOCK_REALIZE:
    return mult + work(s->u.realize.block->init, mult) + work(s->u.realize.block->body, mult);
  case IR_IF:
    return mult + work(s->u.ifs.then_s, mult) + work(s->u.ifs.else_s, mult);
  case IR_LET:
    return mult + work(s->u.let.body, mult);
  case IR_ALLOCATE:
    return work(s->u.alloc.body, mult);
  default:
    return mult;
  }
}

static void tolerance(ir_dtype t, double *rtol, double *atol) {
  if (ir_dtype_is_float(t)) {
    bool half = t.code == IR_F16 || t.code == IR_BF16;
    *rtol = *atol = half ? 2e-2 : 1e-3;
  } else {
    *rtol = *atol = 0;
  }
}

static bool close_enough(double got, double ref, double rtol, double atol) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got);
  if (isinf(ref) || isinf(got)) return got == ref;
  return fabs(got - ref) <= atol + rtol * fabs(ref);
}

/* A tensor view of output k's bytes inside the concatenated outputs. */
static ir_tensor output_view(const ir_func *f, int p, const void *outputs, size_t *offset) {
  ir_tensor t;
  memset(&t, 0, sizeof t);
  const ir_buffer *b = f->params[p];
  t.dtype = b->dtype;
  t.ndim = b->ndim;
  for (int i = 0; i < b->ndim && i < 8; i++) ir_fold_int(b->shape[i], &t.shape[i]);
  t.data = (char *)outputs + *offset;
  *offset += (size_t)ir_tensor_numel(&t) * (size_t)ir_dtype_bytes(b->dtype);
  return t;
}

static void fill_inputs(const ir_func *f, ir_tensor *args, uint64_t seed) {
  for (int i = 0; i < f->ninputs; i++)
    tsrt_fill_random(f->params[i]->dtype.code, args[i].data, ir_tensor_numel(&args[i]), seed + (uint64_t)i);
}

/* The reference: per output (in param order), the expected values at n
 * points (flat indices, or every element in order when flat is NULL). */
typedef struct ref_out {
  int64_t n;
  int64_t *flat;
  double *val;
} ref_out;

typedef struct ref_set {
  int nout;
  ref_out *outs;
  bool sampled;
  int sampled_stages;
  double cost;
  char error[256]; /* non-empty: the reference cannot be trusted (reported as a mismatch) */
} ref_set;

static void ref_set_fini(ref_set *rs) {
  for (int i = 0; i < rs->nout; i++) {
    ts_free(rs->outs[i].flat);
    ts_free(rs->outs[i].val);
  }
  ts_free(rs->outs);
  memset(rs, 0, sizeof *rs);
}

static ts_status ref_full(const ir_func *f, uint64_t seed, ref_set *rs, ts_diag *d) {
  int np = f->nparams;
  ir_tensor *args = ts_calloc((size_t)np, sizeof *args);
  rs->nout = f->nparams - f->ninputs;
  rs->outs = ts_calloc((size_t)(rs->nout > 0 ? rs->nout : 1), sizeof *rs->outs);
  if (!args || !rs->outs) {
    ts_free(args);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ts_status st = ir_tensors_for_func(f, NULL, args, d);
  if (st == TS_OK) {
    fill_inputs(f, args, seed);
    st = ir_interp_run(f, args, d);
  }
  for (int p = f->ninputs; p < np && st == TS_OK; p++) {
    ref_out *o = &rs->outs[p - f->ninputs];
    o->n = ir_tensor_numel(&args[p]);
    o->val = ts_malloc(sizeof *o->val * (size_t)(o->n > 0 ? o->n : 1));
    if (!o->val) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      break;
    }
    for (int64_t i = 0; i < o->n; i++) o->val[i] = ir_tensor_get(&args[p], i);
  }
  for (int i = 0; i < np; i++) ir_tensor_free(&args[i]);
  ts_free(args);
  return st;
}

/* ---- sampled verification ---- */
typedef struct sampled_stage {
  int stage;            /* index among the root body's statements */
  int param;            /* output param index in f */
  const ir_block *block;
  int nsp;              /* spatial loops */
  ir_var *sp_vars[8];
  int64_t sp_ext[8];
  ir_buffer *samples;   /* i64[SAMPLES * nsp] */
  int nsamples;
  /* Intermediate stages (param < 0) run only at the points their single,
   * sampled reader needs: sp_val[i] is loop var i's value as an expression of
   * the root stage's sample var (root: a load from its sample table). */
  int root;             /* index of the output stage whose samples drive this one */
  ir_var *sv;           /* the root's sample var (placeholder in sp_val) */
  ir_expr *sp_val[8];
} sampled_stage;

static int param_index(const ir_func *f, const ir_buffer *b) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == b) return i;
  return -1;
}

/* The realize of a stage FOR* -> REALIZE, its loops (outermost first, at
 * most 64) in chain; NULL for any other shape. */
static const ir_stmt *stage_realize(const ir_stmt *s, const ir_stmt **chain, int *nchain) {
  *nchain = 0;
  while (s->kind == IR_FOR && *nchain < 64) {
    chain[(*nchain)++] = s;
    s = s->u.loop.body;
  }
  return s->kind == IR_BLOCK_REALIZE ? s : NULL;
}

/* Can stage s (FOR* -> REALIZE) be sampled? Fills ss. */
static bool sampleable(const ir_func *f, ir_stmt **stages, int nst, int k, sampled_stage *ss) {
  const ir_stmt *chain[64];
  int nchain;
  const ir_stmt *s = stage_realize(stages[k], chain, &nchain);
  if (!s) return false;
  const ir_block *b = s->u.realize.block;
  if (b->nwrites != 1) return false;
  int p = param_index(f, b->writes[0].buf);
  if (p < f->ninputs) return false;
  for (int j = 0; j < b->writes[0].ndim; j++) {
    int64_t one;
    if (!ir_as_int(b->writes[0].ranges[j].extent, &one) || one != 1) return false;
  }
  /* no later stage touches the output */
  for (int j = k + 1; j < nst; j++) {
    ir_stmt *t = stages[j];
    while (t->kind == IR_FOR) t = t->u.loop.body;
    if (t->kind != IR_BLOCK_REALIZE) return false;
    const ir_block *o = t->u.realize.block;
    for (int q = 0; q < o->nreads; q++)
      if (o->reads[q].buf == b->writes[0].buf) return false;
    for (int q = 0; q < o->nwrites; q++)
      if (o->writes[q].buf == b->writes[0].buf) return false;
  }
  memset(ss, 0, sizeof *ss);
  ss->stage = k;
  ss->param = p;
  ss->block = b;
  for (int i = 0; i < b->niter; i++) {
    const ir_expr *v = s->u.realize.iter_values[i];
    if (b->iters[i].type != IR_ITER_S) continue;
    if (v->kind != IR_VAR || ss->nsp == 8) return false;
    const ir_stmt *loop = NULL;
    for (int c = 0; c < nchain; c++)
      if (chain[c]->u.loop.var == v->u.var) loop = chain[c];
    int64_t mn, ex;
    if (!loop || !ir_as_int(loop->u.loop.min, &mn) || mn != 0 || !ir_as_int(loop->u.loop.extent, &ex))
      return false;
    ss->sp_vars[ss->nsp] = v->u.var;
    ss->sp_ext[ss->nsp] = ex;
    ss->nsp++;
  }
  /* every loop of the chain is either spatial or used by no S binding */
  return ss->nsp > 0;
}

static bool is_spatial(const sampled_stage *ss, const ir_var *v) {
  for (int i = 0; i < ss->nsp; i++)
    if (ss->sp_vars[i] == v) return true;
  return false;
}

static ir_stmt *rewrite_stage(ts_arena *a, ir_stmt *st, sampled_stage *ss, const sampled_stage *root) {
  const ir_stmt *chain[64];
  int nchain = 0;
  ir_stmt *s = st;
  while (s->kind == IR_FOR && nchain < 64) {
    chain[nchain++] = s;
    s = s->u.loop.body;
  }
  ir_stmt *inner = s;
  for (int c = nchain - 1; c >= 0; c--) {
    if (is_spatial(ss, chain[c]->u.loop.var)) continue;
    inner = ir_for(a, chain[c]->u.loop.var, chain[c]->u.loop.min, chain[c]->u.loop.extent,
                   chain[c]->u.loop.kind, inner);
  }
  /* each rewritten stage gets its own sample loop var */
  ir_var *sv = ir_var_new(a, "sample", ir_dt(IR_I64));
  ir_var_map m;
  ir_var_map_init(&m);
  ir_var_map_put(&m, root->sv, ir_var_ref(a, sv));
  for (int i = ss->nsp - 1; i >= 0; i--) inner = ir_let(a, ss->sp_vars[i], ir_subst_expr(a, ss->sp_val[i], &m), inner);
  ir_var_map_fini(&m);
  return ir_for(a, sv, ir_i64(a, 0), ir_i64(a, root->nsamples), IR_FOR_SERIAL, inner);
}

/* Stage k writes an intermediate buffer T (not a param) at points, with T's
 * write indices exactly its spatial iter vars bound to bare loop vars, and T
 * is written by no other stage and read by exactly one stage, already sampled,
 * through one point region whose indices depend only on the reader's spatial
 * iter vars (elementwise epilogues: conv -> add -> relu). Then stage k needs to
 * run only at the reader's sample points. Fills ss (param -1). */
static bool sampleable_intermediate(const ir_func *f, ts_arena *a, ir_stmt **stages, int nst, int k,
                                    const sampled_stage *done, int ndone, sampled_stage *ss) {
  const ir_stmt *chain[64];
  int nchain;
  const ir_stmt *s = stage_realize(stages[k], chain, &nchain);
  if (!s) return false;
  const ir_block *b = s->u.realize.block;
  if (b->nwrites != 1 || param_index(f, b->writes[0].buf) >= 0) return false;
  const ir_buffer *tb = b->writes[0].buf;
  const ir_region *w = &b->writes[0];
  if (w->ndim > 8) return false;
  memset(ss, 0, sizeof *ss);
  ss->stage = k;
  ss->param = -1;
  ss->block = b;
  int nspatial = 0;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type == IR_ITER_S) nspatial++;
  if (nspatial != w->ndim) return false;
  /* write dim d is spatial iter var it_d, bound to a bare loop var of the chain */
  for (int d = 0; d < w->ndim; d++) {
    int64_t one;
    if (!ir_as_int(w->ranges[d].extent, &one) || one != 1 || w->ranges[d].min->kind != IR_VAR) return false;
    int it = -1;
    for (int i = 0; i < b->niter; i++)
      if (b->iters[i].var == w->ranges[d].min->u.var && b->iters[i].type == IR_ITER_S) it = i;
    if (it < 0) return false;
    const ir_expr *v = s->u.realize.iter_values[it];
    if (v->kind != IR_VAR) return false;
    bool in_chain = false;
    for (int c = 0; c < nchain; c++)
      if (chain[c]->u.loop.var == v->u.var) in_chain = true;
    if (!in_chain) return false;
    for (int e = 0; e < d; e++)
      if (ss->sp_vars[e] == v->u.var) return false;
    ss->sp_vars[d] = v->u.var;
  }
  ss->nsp = w->ndim;
  /* the single reader */
  const sampled_stage *reader = NULL;
  const ir_region *rr = NULL;
  const ir_stmt *reader_realize = NULL;
  for (int j = 0; j < nst; j++) {
    if (j == k) continue;
    const ir_stmt *t = stages[j];
    while (t->kind == IR_FOR) t = t->u.loop.body;
    if (t->kind != IR_BLOCK_REALIZE) return false;
    const ir_block *o = t->u.realize.block;
    for (int q = 0; q < o->nwrites; q++)
      if (o->writes[q].buf == tb) return false;
    for (int q = 0; q < o->nreads; q++) {
      if (o->reads[q].buf != tb) continue;
      if (rr) return false; /* a second read */
      rr = &o->reads[q];
      reader_realize = t;
      for (int x = 0; x < ndone; x++)
        if (done[x].stage == j) reader = &done[x];
    }
  }
  if (!rr || !reader || rr->ndim != w->ndim) return false;
  const ir_block *ob = reader->block;
  /* reader iter var -> its value in terms of the root's sample var */
  ir_var_map lm, im;
  ir_var_map_init(&lm);
  ir_var_map_init(&im);
  for (int j = 0; j < reader->nsp; j++) ir_var_map_put(&lm, reader->sp_vars[j], reader->sp_val[j]);
  bool ok = true;
  for (int i = 0; i < ob->niter; i++)
    if (ob->iters[i].type == IR_ITER_S)
      ir_var_map_put(&im, ob->iters[i].var, ir_subst_expr(a, reader_realize->u.realize.iter_values[i], &lm));
  for (int d = 0; d < rr->ndim && ok; d++) {
    int64_t one;
    if (!ir_as_int(rr->ranges[d].extent, &one) || one != 1) ok = false;
    for (int i = 0; i < ob->niter && ok; i++)
      if (ob->iters[i].type != IR_ITER_S && ir_expr_uses_var(rr->ranges[d].min, ob->iters[i].var)) ok = false;
    if (ok) ss->sp_val[d] = ir_subst_expr(a, rr->ranges[d].min, &im);
  }
  ir_var_map_fini(&lm);
  ir_var_map_fini(&im);
  if (!ok) return false;
  ss->root = reader->root;
  ss->sv = reader->sv;
  return true;
}

static ts_status ref_sampled(const ir_func *f0, uint64_t seed, double cost, ref_set *rs, ts_diag *d) {
  ts_arena a;
  ts_arena_init(&a);
  ts_status st = TS_OK;
  ir_tensor *args = NULL;
  int np = 0;
  ir_func *f = ir_func_copy(&a, f0);
  if (!f) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  ir_block *root = f->body->u.realize.block;
  ir_stmt **stages = &root->body;
  int nst = 1;
  if (root->body->kind == IR_SEQ) {
    stages = root->body->u.seq.stmts;
    nst = root->body->u.seq.n;
  }
  sampled_stage ss[32];
  int nss = 0;
  for (int k = 0; k < nst && nss < 16; k++)
    if (sampleable(f, stages, nst, k, &ss[nss])) nss++;
  int nroot = nss;
  if (nss == 0) {
    if (cost > HARD_LIMIT) {
      st = ts_diag_set(d, TS_EUNSUPPORTED,
                       "verification: '%s' is too large to interpret (%.3g steps) and its output stages cannot be sampled",
                       f0->name, cost);
      goto out;
    }
    ts_arena_fini(&a);
    return ref_full(f0, seed, rs, d);
  }
  /* rewrite the sampled stages and add their sample tables as inputs */
  ts_rng rng;
  ts_rng_seed(&rng, seed ^ 0x5A5A5A5Aull);
  ir_stmt **nstages = TS_ANEWN(&a, ir_stmt *, nst);
  memcpy(nstages, stages, sizeof *nstages * (size_t)nst);
  ir_buffer **params = TS_ANEWN(&a, ir_buffer *, f->nparams + nroot);
  memcpy(params, f->params, sizeof *params * (size_t)f->ninputs);
  for (int i = 0; i < nroot; i++) {
    int64_t space = 1;
    for (int j = 0; j < ss[i].nsp; j++) space *= ss[i].sp_ext[j];
    ss[i].nsamples = space < SAMPLES ? (int)space : SAMPLES;
    ir_expr *shape = ir_i64(&a, (int64_t)ss[i].nsamples * ss[i].nsp);
    char name[32];
    snprintf(name, sizeof name, "__samples%d", i);
    ss[i].samples = ir_buffer_new(&a, name, ir_dt(IR_I64), 1, &shape, NULL);
    ss[i].root = i;
    ss[i].sv = ir_var_new(&a, "sample", ir_dt(IR_I64));
    for (int j = 0; j < ss[i].nsp; j++) {
      ir_expr *idx = ir_add(&a, ir_mul(&a, ir_var_ref(&a, ss[i].sv), ir_i64(&a, ss[i].nsp)), ir_i64(&a, j));
      ss[i].sp_val[j] = ir_load(&a, ss[i].samples, 1, &idx);
    }
    params[f->ninputs + i] = ss[i].samples;
  }
  /* intermediates feeding sampled stages pointwise, last stage first (chains) */
  for (int k = nst - 1; k >= 0 && nss < 32; k--) {
    bool done = false;
    for (int i = 0; i < nss; i++)
      if (ss[i].stage == k) done = true;
    if (!done && sampleable_intermediate(f, &a, stages, nst, k, ss, nss, &ss[nss])) nss++;
  }
  for (int i = 0; i < nss; i++)
    nstages[ss[i].stage] = rewrite_stage(&a, nstages[ss[i].stage], &ss[i], &ss[ss[i].root]);
  memcpy(params + f->ninputs + nroot, f->params + f->ninputs,
         sizeof *params * (size_t)(f->nparams - f->ninputs));
  ir_block *nrootb = ir_block_clone(&a, root);
  nrootb->body = nst == 1 ? nstages[0] : ir_seq(&a, nst, nstages);
  f->body = ir_realize(&a, nrootb, NULL, NULL);
  f->params = params;
  f->nparams += nroot;
  f->ninputs += nroot;
  np = f->nparams;
  args = ts_calloc((size_t)np, sizeof *args);
  if (!args) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  st = ir_tensors_for_func(f, NULL, args, d);
  if (st) goto out;
  for (int i = 0; i < f0->ninputs; i++)
    tsrt_fill_random(f0->params[i]->dtype.code, args[i].data, ir_tensor_numel(&args[i]), seed + (uint64_t)i);
  for (int i = 0; i < nroot; i++) {
    int64_t *tab = args[f0->ninputs + i].data;
    for (int s = 0; s < ss[i].nsamples; s++)
      for (int j = 0; j < ss[i].nsp; j++)
        tab[s * ss[i].nsp + j] = (int64_t)ts_rng_below(&rng, (uint64_t)ss[i].sp_ext[j]);
  }
  st = ir_interp_run(f, args, d);
  if (st) goto out;
  /* the reference: non-sampled outputs whole, sampled ones at their points */
  rs->sampled = true;
  rs->sampled_stages = nss;
  rs->nout = f0->nparams - f0->ninputs;
  rs->outs = ts_calloc((size_t)(rs->nout > 0 ? rs->nout : 1), sizeof *rs->outs);
  if (!rs->outs) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  ir_analyzer an;
  ir_analyzer_init(&an, &a);
  for (int p = f0->ninputs; p < f0->nparams && !st && !rs->error[0]; p++) {
    ir_tensor *ref = &args[p + nroot];
    ref_out *o = &rs->outs[p - f0->ninputs];
    const sampled_stage *mine = NULL;
    for (int i = 0; i < nroot; i++)
      if (ss[i].param == p) mine = &ss[i];
    o->n = mine ? mine->nsamples : ir_tensor_numel(ref);
    o->val = ts_malloc(sizeof *o->val * (size_t)(o->n > 0 ? o->n : 1));
    o->flat = mine ? ts_malloc(sizeof *o->flat * (size_t)(o->n > 0 ? o->n : 1)) : NULL;
    if (!o->val || (mine && !o->flat)) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      break;
    }
    for (int64_t s = 0; s < o->n && !rs->error[0]; s++) {
      int64_t flat = s;
      if (mine) {
        const int64_t *tab = args[f0->ninputs + (mine - ss)].data;
        ir_var_map m;
        ir_var_map_init(&m);
        const ir_block *b = mine->block;
        /* iter var -> its loop var's sampled value (bindings are bare loop vars) */
        for (int j = 0; j < mine->nsp; j++) ir_var_map_put(&m, mine->sp_vars[j], ir_i64(&a, tab[s * mine->nsp + j]));
        flat = 0;
        const ir_stmt *chain = stages[mine->stage];
        while (chain->kind == IR_FOR) chain = chain->u.loop.body;
        ir_var_map im;
        ir_var_map_init(&im);
        for (int i = 0; i < b->niter; i++)
          ir_var_map_put(&im, b->iters[i].var, ir_subst_expr(&a, chain->u.realize.iter_values[i], &m));
        for (int dd = 0; dd < b->writes[0].ndim; dd++) {
          int64_t v = 0, ext = ref->shape[dd];
          ir_expr *e = ir_simplify(&an, ir_subst_expr(&a, b->writes[0].ranges[dd].min, &im));
          if (!ir_as_int(e, &v) || v < 0 || v >= ext)
            snprintf(rs->error, sizeof rs->error, "internal: sample index of %s is not constant", f0->params[p]->name);
          flat = flat * ext + v;
        }
        ir_var_map_fini(&m);
        ir_var_map_fini(&im);
        o->flat[s] = flat;
      }
      o->val[s] = ir_tensor_get(ref, flat);
    }
  }
  ir_analyzer_fini(&an);
out:
  for (int i = 0; i < np; i++) ir_tensor_free(&args[i]);
  ts_free(args);
  ts_arena_fini(&a);
  return st;
}

/* References per process: every candidate of a tuning run is verified
 * against the same function and seed, so the interpreter runs once per
 * function; tune-model alternates between tasks, so several are kept (the
 * least recently used one goes). Keyed by the function's structural hash and
 * the seed. */
#define REF_CACHE 24
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  bool valid;
  uint64_t hash, seed, used;
  ref_set rs;
} cache[REF_CACHE];
static uint64_t cache_clock;

static void compare(const ir_func *f, const ref_set *rs, const void *outputs, tun_verify_result *r) {
  r->matched = true;
  r->sampled = rs->sampled;
  r->sampled_stages = rs->sampled_stages;
  if (rs->error[0]) {
    r->matched = false;
    snprintf(r->detail, sizeof r->detail, "%s", rs->error);
    return;
  }
  size_t off = 0;
  for (int p = f->ninputs; p < f->nparams && r->matched; p++) {
    ir_tensor got = output_view(f, p, outputs, &off);
    const ref_out *o = &rs->outs[p - f->ninputs];
    double rtol, atol;
    tolerance(f->params[p]->dtype, &rtol, &atol);
    for (int64_t s = 0; s < o->n; s++) {
      int64_t flat = o->flat ? o->flat[s] : s;
      double g = ir_tensor_get(&got, flat), e = o->val[s];
      double err = fabs(g - e);
      if (err > r->max_abs_err || isnan(err)) r->max_abs_err = err;
      r->checked++;
      if (!close_enough(g, e, rtol, atol)) {
        r->matched = false;
        snprintf(r->detail, sizeof r->detail, "%s[%lld] = %.9g, expected %.9g", f->params[p]->name,
                 (long long)flat, g, e);
        break;
      }
    }
  }
  if (r->matched && rs->sampled)
    snprintf(r->detail, sizeof r->detail, "sampled %lld output elements (whole run: %.3g interpreter steps)",
             (long long)r->checked, rs->cost);
}

ts_status tun_verify(const ir_func *f, uint64_t seed, const void *outputs, size_t outputs_bytes,
                     tun_verify_result *r, ts_diag *d) {
  memset(r, 0, sizeof *r);
  size_t want = 0;
  for (int p = 0; p < f->nparams; p++) {
    int64_t n = ir_buffer_const_size(f->params[p]);
    if (n < 0) return ts_diag_set(d, TS_EINVAL, "verification: parameter %s has a symbolic shape", f->params[p]->name);
    if (p >= f->ninputs) want += (size_t)n * (size_t)ir_dtype_bytes(f->params[p]->dtype);
  }
  if (!outputs || outputs_bytes != want)
    return ts_diag_set(d, TS_EINVAL, "verification: got %zu output bytes, '%s' produces %zu", outputs_bytes,
                       f->name, want);
  uint64_t h = ir_struct_hash_func(f);
  pthread_mutex_lock(&cache_mu);
  ts_status st = TS_OK;
  int slot = -1, victim = 0;
  for (int i = 0; i < REF_CACHE && slot < 0; i++) {
    if (cache[i].valid && cache[i].hash == h && cache[i].seed == seed) slot = i;
    else if (!cache[i].valid || (cache[victim].valid && cache[i].used < cache[victim].used)) victim = i;
  }
  if (slot < 0) {
    if (cache[victim].valid) ref_set_fini(&cache[victim].rs);
    cache[victim].valid = false;
    ref_set rs;
    memset(&rs, 0, sizeof rs);
    rs.cost = work(f->body, 1);
    st = rs.cost <= TUN_VERIFY_FULL_BUDGET ? ref_full(f, seed, &rs, d) : ref_sampled(f, seed, rs.cost, &rs, d);
    if (st) {
      ref_set_fini(&rs);
    } else {
      cache[victim].valid = true;
      cache[victim].hash = h;
      cache[victim].seed = seed;
      cache[victim].rs = rs;
      slot = victim;
    }
  }
  if (!st) {
    cache[slot].used = ++cache_clock;
    compare(f, &cache[slot].rs, outputs, r);
  }
  pthread_mutex_unlock(&cache_mu);
  return st;
}
