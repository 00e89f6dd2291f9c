/* trace.c — the trace layer: the instruction-kind registry (one row per
 * primitive: name, purity, signature, apply), traces as lists of
 * instructions over numbered random variables, the traced schedule that
 * calls a concrete primitive and records it on success, replay onto a fresh
 * schedule (with decision repair), dead-instruction elimination, and the
 * JSON form [[[kind, inputs, attrs, outputs], ...], [[index, decision], ...]]
 * (docs/TRACE.md). Everything that checks arguments does so before touching
 * the schedule, so a bad call or a bad trace never leaves a half-applied
 * instruction behind. */
#include "trace.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockize.h"
#include "layout.h"
#include "sch_int.h"
#include "tensorize.h"

/* ---- resolved values ------------------------------------------------------- */
/* An argument or RV after resolution: 'b' block, 'l' loop (maybe a mark),
 * 'v' integer value, 'n' None, 'i' int literal, 'f' float, 's' string. */
typedef struct sch_val {
  char kind;
  sch_block block;
  sch_loop loop;
  int64_t i;
  double f;
  const char *s;
} sch_val;

typedef struct sch_apply_ctx {
  sch_state *s;
  ts_arena *arena; /* outputs live here */
  int nin;
  const sch_val *in;
  int nattr;
  const sch_attr *attrs;
  const sch_decision *dec; /* NULL: sample */
  sch_decision used;       /* the decision to record (samplers) */
  int nout;
  sch_val *out;
  ts_diag *d;
} sch_apply_ctx;

/* ---- traces ---------------------------------------------------------------- */
struct sch_trace {
  ts_arena arena; /* args, attrs, outputs, decisions, strings */
  int n, cap;
  sch_inst *insts;
  int nrv, caprv;
  char *rvk; /* kind of each RV id, 0 = undefined here */
};

sch_trace *sch_trace_new(void) {
  sch_trace *tr = ts_calloc(1, sizeof *tr);
  if (tr) ts_arena_init(&tr->arena);
  return tr;
}

void sch_trace_free(sch_trace *tr) {
  if (!tr) return;
  ts_arena_fini(&tr->arena);
  ts_free(tr->insts);
  ts_free(tr->rvk);
  ts_free(tr);
}

int sch_trace_len(const sch_trace *tr) { return tr->n; }
const sch_inst *sch_trace_inst(const sch_trace *tr, int i) {
  return i >= 0 && i < tr->n ? &tr->insts[i] : NULL;
}
sch_rv_kind sch_trace_rv_kind(const sch_trace *tr, int rv) {
  return rv >= 0 && rv < tr->nrv ? (sch_rv_kind)tr->rvk[rv] : (sch_rv_kind)0;
}

static ts_status define_rv(sch_trace *tr, int rv, char kind) {
  if (rv >= tr->caprv) {
    int cap = tr->caprv ? tr->caprv : 32;
    while (cap <= rv) cap *= 2;
    char *k = ts_realloc(tr->rvk, (size_t)cap);
    if (!k) return TS_ENOMEM;
    memset(k + tr->caprv, 0, (size_t)(cap - tr->caprv));
    tr->rvk = k;
    tr->caprv = cap;
  }
  tr->rvk[rv] = kind;
  if (rv >= tr->nrv) tr->nrv = rv + 1;
  return TS_OK;
}

static const char *dupstr(ts_arena *a, const char *s) { return s ? ts_arena_strdup(a, s) : NULL; }

/* Deep-copies one instruction into tr (outputs keep their RV ids). */
static ts_status trace_append(sch_trace *tr, sch_inst_kind kind, int nin, const sch_arg *in,
                              int nattr, const sch_attr *attrs, int nout, const int *out,
                              const sch_decision *dec) {
  if (tr->n == tr->cap) {
    int cap = tr->cap ? tr->cap * 2 : 32;
    sch_inst *ni = ts_realloc(tr->insts, sizeof *ni * (size_t)cap);
    if (!ni) return TS_ENOMEM;
    tr->insts = ni;
    tr->cap = cap;
  }
  ts_arena *a = &tr->arena;
  sch_inst x = {.kind = kind, .nin = nin, .nattr = nattr, .nout = nout};
  x.in = TS_ANEWN(a, sch_arg, nin ? nin : 1);
  x.attrs = TS_ANEWN(a, sch_attr, nattr ? nattr : 1);
  x.out = TS_ANEWN(a, int, nout ? nout : 1);
  if (!x.in || !x.attrs || !x.out) return TS_ENOMEM;
  for (int i = 0; i < nin; i++) {
    x.in[i] = in[i];
    if (in[i].kind == SCH_ARG_STR && !(x.in[i].s = dupstr(a, in[i].s))) return TS_ENOMEM;
  }
  for (int i = 0; i < nattr; i++) {
    sch_attr at = attrs[i];
    if (at.kind == SCH_ATTR_STR && !(at.s = dupstr(a, at.s))) return TS_ENOMEM;
    if (at.kind == SCH_ATTR_INTS) {
      at.ints = TS_ANEWN(a, int64_t, at.n ? at.n : 1);
      if (!at.ints) return TS_ENOMEM;
      if (at.n) memcpy(at.ints, attrs[i].ints, sizeof *at.ints * (size_t)at.n);
    }
    if (at.kind == SCH_ATTR_FLOATS) {
      at.floats = TS_ANEWN(a, double, at.n ? at.n : 1);
      if (!at.floats) return TS_ENOMEM;
      if (at.n) memcpy(at.floats, attrs[i].floats, sizeof *at.floats * (size_t)at.n);
    }
    x.attrs[i] = at;
  }
  if (nout) memcpy(x.out, out, sizeof *out * (size_t)nout);
  const sch_inst_kind_info *info = sch_inst_kind_get(kind);
  for (int i = 0; i < nout; i++)
    if (define_rv(tr, out[i], info->out_kind)) return TS_ENOMEM;
  if (dec && dec->n > 0) {
    x.decision.n = dec->n;
    x.decision.v = ts_arena_memdup(a, dec->v, sizeof *dec->v * (size_t)dec->n);
    if (!x.decision.v) return TS_ENOMEM;
  }
  tr->insts[tr->n++] = x;
  return TS_OK;
}

sch_trace *sch_trace_copy(const sch_trace *tr) {
  sch_trace *c = sch_trace_new();
  if (!c) return NULL;
  for (int i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    if (trace_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
      sch_trace_free(c);
      return NULL;
    }
  }
  /* RVs defined elsewhere (a traced schedule's ids) keep their kinds */
  for (int rv = 0; rv < tr->nrv; rv++)
    if (tr->rvk[rv] && define_rv(c, rv, tr->rvk[rv])) {
      sch_trace_free(c);
      return NULL;
    }
  return c;
}

ts_status sch_trace_set_decision(sch_trace *tr, int i, const sch_decision *dec, ts_diag *d) {
  if (i < 0 || i >= tr->n)
    return ts_diag_set(d, TS_EINVAL, "trace: no instruction %d (the trace has %d)", i, tr->n);
  sch_inst *x = &tr->insts[i];
  const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
  if (!info->decision)
    return ts_diag_set(d, TS_EINVAL, "trace: instruction %d (%s) takes no decision", i, info->name);
  if (!dec || dec->n == 0) {
    x->decision.n = 0;
    x->decision.v = NULL;
    return TS_OK;
  }
  if (info->decision == 's' && dec->n != 1)
    return ts_diag_set(d, TS_EINVAL, "trace: instruction %d (%s) takes one index as its decision, got %d values",
                       i, info->name, dec->n);
  if (x->kind == SCH_I_SAMPLE_PERFECT_TILE && dec->n != x->attrs[0].i)
    return ts_diag_set(d, TS_EINVAL, "trace: instruction %d (%s) draws %lld tiles, the decision has %d", i,
                       info->name, (long long)x->attrs[0].i, dec->n);
  int64_t *v = ts_arena_memdup(&tr->arena, dec->v, sizeof *dec->v * (size_t)dec->n);
  if (!v) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  x->decision.n = dec->n;
  x->decision.v = v;
  return TS_OK;
}

sch_trace *sch_trace_simplified(const sch_trace *tr, bool remove_postproc) {
  int n = tr->n;
  if (remove_postproc)
    for (int i = 0; i < tr->n; i++)
      if (tr->insts[i].kind == SCH_I_ENTER_POSTPROC) {
        n = i;
        break;
      }
  bool *used = ts_calloc((size_t)(tr->nrv ? tr->nrv : 1), sizeof *used);
  bool *keep = ts_calloc((size_t)(n ? n : 1), sizeof *keep);
  sch_trace *c = used && keep ? sch_trace_new() : NULL;
  if (!c) goto out;
  for (int i = n - 1; i >= 0; i--) {
    const sch_inst *x = &tr->insts[i];
    bool k = !sch_inst_kind_get(x->kind)->pure;
    for (int j = 0; j < x->nout && !k; j++) k = x->out[j] >= 0 && x->out[j] < tr->nrv && used[x->out[j]];
    keep[i] = k;
    if (!k) continue;
    for (int j = 0; j < x->nin; j++)
      if (x->in[j].kind == SCH_ARG_RV && x->in[j].rv >= 0 && x->in[j].rv < tr->nrv) used[x->in[j].rv] = true;
  }
  for (int i = 0; i < n; i++) {
    const sch_inst *x = &tr->insts[i];
    if (keep[i] &&
        trace_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
      sch_trace_free(c);
      c = NULL;
      break;
    }
  }
out:
  ts_free(used);
  ts_free(keep);
  return c;
}

sch_trace *sch_trace_without_kind(const sch_trace *tr, sch_inst_kind kind) {
  const sch_inst_kind_info *ki = sch_inst_kind_get(kind);
  if (!ki || ki->nout != 0) return NULL;
  sch_trace *c = sch_trace_new();
  for (int i = 0; c && i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    if (x->kind != kind &&
        trace_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
      sch_trace_free(c);
      c = NULL;
    }
  }
  return c;
}

/* ---- signatures ------------------------------------------------------------ */
/* The signature character expected at input position i, or 0 if there is no
 * such position. */
static char sig_at(const char *spec, int i) {
  size_t len = strlen(spec);
  if (len >= 2 && (spec[len - 1] == '*' || spec[len - 1] == '+')) {
    int fixed = (int)len - 2;
    return i < fixed ? spec[i] : spec[len - 2];
  }
  return i < (int)len ? spec[i] : 0;
}

static void sig_arity(const char *spec, int *min, int *max) {
  size_t len = strlen(spec);
  if (len >= 2 && (spec[len - 1] == '*' || spec[len - 1] == '+')) {
    *min = (int)len - 2 + (spec[len - 1] == '+');
    *max = -1;
  } else {
    *min = *max = (int)len;
  }
}

static const char *sig_name(char c) {
  switch (c) {
  case 'B': return "a block";
  case 'L': return "a loop";
  case 'T': return "a block or a loop";
  case 'X': return "a split factor (a value variable, None or an integer)";
  case 'V': return "an annotation value (a value variable, a number or a string)";
  case 'i': return "an integer";
  case 'b': return "a bool";
  case 'f': return "a number";
  case 's': return "a string";
  case 'I': return "a list of integers";
  case 'F': return "a list of numbers";
  default: return "?";
  }
}

static const char *rv_kind_name(char k) {
  switch (k) {
  case 'b': return "a block";
  case 'l': return "a loop";
  case 'v': return "a value";
  default: return "undefined";
  }
}

static const char *arg_kind_name(const sch_arg *a, char rvk) {
  switch (a->kind) {
  case SCH_ARG_RV: return rv_kind_name(rvk);
  case SCH_ARG_NONE: return "None";
  case SCH_ARG_INT: return "an integer";
  case SCH_ARG_FLOAT: return "a float";
  case SCH_ARG_STR: return "a string";
  }
  return "?";
}

/* Does argument a (an RV of kind rvk when a->kind is RV) fit character c? */
static bool arg_fits(char c, const sch_arg *a, char rvk) {
  bool rv = a->kind == SCH_ARG_RV;
  switch (c) {
  case 'B': return rv && rvk == 'b';
  case 'L': return rv && rvk == 'l';
  case 'T': return rv && (rvk == 'b' || rvk == 'l');
  case 'X': return (rv && rvk == 'v') || a->kind == SCH_ARG_NONE || a->kind == SCH_ARG_INT;
  case 'V':
    return (rv && rvk == 'v') || a->kind == SCH_ARG_INT || a->kind == SCH_ARG_FLOAT || a->kind == SCH_ARG_STR;
  default: return false;
  }
}

static bool attr_fits(char c, const sch_attr *a) {
  switch (c) {
  case 'i': return a->kind == SCH_ATTR_INT;
  case 'b': return a->kind == SCH_ATTR_BOOL;
  case 'f': return a->kind == SCH_ATTR_FLOAT;
  case 's': return a->kind == SCH_ATTR_STR && a->s;
  case 'I': return a->kind == SCH_ATTR_INTS;
  case 'F': return a->kind == SCH_ATTR_FLOATS;
  default: return false;
  }
}

/* Checks the arity and types of inputs (RV kinds from rvk) and attrs against
 * the kind's signature; errors carry code and "prefix: ..." text. */
static ts_status check_sig(const sch_inst_kind_info *info, int nin, const sch_arg *in, const char *rvk_of,
                           int nrv, int nattr, const sch_attr *attrs, ts_status code, const char *prefix,
                           ts_diag *d) {
  int mn, mx;
  sig_arity(info->inputs, &mn, &mx);
  if (nin < mn || (mx >= 0 && nin > mx)) {
    if (mx == mn)
      return ts_diag_set(d, code, "%s: %s takes %d input%s, got %d", prefix, info->name, mn, mn == 1 ? "" : "s",
                         nin);
    return ts_diag_set(d, code, "%s: %s takes at least %d input%s, got %d", prefix, info->name, mn,
                       mn == 1 ? "" : "s", nin);
  }
  for (int i = 0; i < nin; i++) {
    char c = sig_at(info->inputs, i);
    char k = 0;
    if (in[i].kind == SCH_ARG_RV) {
      if (in[i].rv < 0 || in[i].rv >= nrv || !rvk_of[in[i].rv])
        return ts_diag_set(d, code, "%s: input %d refers to variable #%d, which is not defined", prefix, i,
                           in[i].rv);
      k = rvk_of[in[i].rv];
    }
    if (!arg_fits(c, &in[i], k))
      return ts_diag_set(d, code, "%s: input %d is %s, expected %s", prefix, i, arg_kind_name(&in[i], k),
                         sig_name(c));
    if (in[i].kind == SCH_ARG_STR && !in[i].s)
      return ts_diag_set(d, code, "%s: input %d is a NULL string", prefix, i);
  }
  int na = (int)strlen(info->attrs);
  if (nattr != na)
    return ts_diag_set(d, code, "%s: %s takes %d attr%s, got %d", prefix, info->name, na, na == 1 ? "" : "s",
                       nattr);
  for (int i = 0; i < nattr; i++)
    if (!attr_fits(info->attrs[i], &attrs[i]))
      return ts_diag_set(d, code, "%s: attr %d should be %s", prefix, i, sig_name(info->attrs[i]));
  return TS_OK;
}

/* The number of outputs a kind's signature fixes, or -1 if the primitive
 * decides. */
static int fixed_nout(const sch_inst_kind_info *info, int nin, const sch_attr *attrs) {
  switch (info->nout) {
  case SCH_NOUT_ANY: return -1;
  case SCH_NOUT_INPUTS_MINUS_1: return nin - 1;
  case SCH_NOUT_ATTR0: return (int)attrs[0].i;
  default: return info->nout;
  }
}

/* ---- apply functions ------------------------------------------------------- */
static sch_val *out_alloc(sch_apply_ctx *c, int n, char kind) {
  c->out = TS_ANEWN(c->arena, sch_val, n ? n : 1);
  if (!c->out) return NULL;
  c->nout = n;
  for (int i = 0; i < n; i++) c->out[i].kind = kind;
  return c->out;
}

static ts_status oom(sch_apply_ctx *c) { return ts_diag_set(c->d, TS_ENOMEM, "out of memory"); }

static ts_status out_blocks(sch_apply_ctx *c, int n, const sch_block *b) {
  if (!out_alloc(c, n, 'b')) return oom(c);
  for (int i = 0; i < n; i++) c->out[i].block = b[i];
  return TS_OK;
}

static ts_status out_loops(sch_apply_ctx *c, int n, const sch_loop *l) {
  if (!out_alloc(c, n, 'l')) return oom(c);
  for (int i = 0; i < n; i++) c->out[i].loop = l[i];
  return TS_OK;
}

/* Input i must be a real loop, not a compute-location mark. */
static ts_status real_loop(sch_apply_ctx *c, int i, const char *prim) {
  const sch_loop *l = &c->in[i].loop;
  if (l->mark == SCH_LOC_LOOP && l->var) return TS_OK;
  return ts_diag_set(c->d, TS_ESCHEDULE, "%s: input %d is the %s mark of a compute location, not a loop", prim,
                     i, l->mark == SCH_LOC_ROOT ? "root" : "inline");
}

/* Strings handed to primitives live in the schedule's arena, so whatever
 * the primitive keeps outlives the trace that supplied them. */
static const char *sstr(sch_apply_ctx *c, const char *s) { return ts_arena_strdup(sch_arena(c->s), s); }

static ts_status ap_get_block(sch_apply_ctx *c) {
  sch_block b;
  ts_status st = sch_get_block(c->s, c->attrs[0].s, &b, c->d);
  return st ? st : out_blocks(c, 1, &b);
}

static ts_status ap_get_loops(sch_apply_ctx *c) {
  sch_loop *l;
  int n;
  ts_status st = sch_get_loops(c->s, c->in[0].block, &l, &n, c->d);
  return st ? st : out_loops(c, n, l);
}

static ts_status ap_get_child_blocks(sch_apply_ctx *c) {
  sch_block *b;
  int n;
  ts_status st;
  if (c->in[0].kind == 'b') {
    st = sch_get_child_blocks(c->s, c->in[0].block, &b, &n, c->d);
  } else {
    if ((st = real_loop(c, 0, "get_child_blocks"))) return st;
    st = sch_get_child_blocks_of_loop(c->s, c->in[0].loop, &b, &n, c->d);
  }
  return st ? st : out_blocks(c, n, b);
}

static ts_status ap_get_producers(sch_apply_ctx *c) {
  sch_block *b;
  int n;
  ts_status st = sch_get_producers(c->s, c->in[0].block, &b, &n, c->d);
  return st ? st : out_blocks(c, n, b);
}

static ts_status ap_get_consumers(sch_apply_ctx *c) {
  sch_block *b;
  int n;
  ts_status st = sch_get_consumers(c->s, c->in[0].block, &b, &n, c->d);
  return st ? st : out_blocks(c, n, b);
}

static ts_status ap_split(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "split");
  if (st) return st;
  int n = c->nin - 1;
  int64_t *f = TS_ANEWN(c->arena, int64_t, n);
  sch_loop *l = TS_ANEWN(c->arena, sch_loop, n);
  if (!f || !l) return oom(c);
  for (int i = 0; i < n; i++) f[i] = c->in[i + 1].kind == 'n' ? -1 : c->in[i + 1].i;
  st = sch_split(c->s, c->in[0].loop, n, f, l, c->d);
  return st ? st : out_loops(c, n, l);
}

static ts_status loops_of_inputs(sch_apply_ctx *c, const char *prim, sch_loop **out) {
  *out = TS_ANEWN(c->arena, sch_loop, c->nin);
  if (!*out) return oom(c);
  for (int i = 0; i < c->nin; i++) {
    ts_status st = real_loop(c, i, prim);
    if (st) return st;
    (*out)[i] = c->in[i].loop;
  }
  return TS_OK;
}

static ts_status ap_fuse(sch_apply_ctx *c) {
  sch_loop *l, f;
  ts_status st = loops_of_inputs(c, "fuse", &l);
  if (!st) st = sch_fuse(c->s, c->nin, l, &f, c->d);
  return st ? st : out_loops(c, 1, &f);
}

static ts_status ap_reorder(sch_apply_ctx *c) {
  sch_loop *l;
  ts_status st = loops_of_inputs(c, "reorder", &l);
  return st ? st : sch_reorder(c->s, c->nin, l, c->d);
}

static ts_status ap_parallel(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "parallel");
  return st ? st : sch_parallel(c->s, c->in[0].loop, c->d);
}

static ts_status ap_vectorize(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "vectorize");
  return st ? st : sch_vectorize(c->s, c->in[0].loop, c->d);
}

static ts_status ap_unroll(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "unroll");
  return st ? st : sch_unroll(c->s, c->in[0].loop, c->d);
}

static ts_status ap_bind(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "bind");
  if (st) return st;
  const char *th = sstr(c, c->attrs[0].s);
  return th ? sch_bind(c->s, c->in[0].loop, th, c->d) : oom(c);
}

static ts_status ap_annotate(sch_apply_ctx *c) {
  ir_annot ann = {.key = sstr(c, c->attrs[0].s)};
  const sch_val *v = &c->in[1];
  switch (v->kind) {
  case 'f':
    ann.kind = IR_ANN_FLOAT;
    ann.v.f = v->f;
    break;
  case 's':
    ann.kind = IR_ANN_STR;
    if (!(ann.v.s = sstr(c, v->s))) return oom(c);
    break;
  default: /* an int literal or a value variable */
    ann.kind = IR_ANN_INT;
    ann.v.i = v->i;
    break;
  }
  if (!ann.key) return oom(c);
  if (c->in[0].kind == 'b') return sch_annotate_block(c->s, c->in[0].block, ann, c->d);
  ts_status st = real_loop(c, 0, "annotate");
  return st ? st : sch_annotate_loop(c->s, c->in[0].loop, ann, c->d);
}

static ts_status ap_add_unit_loop(sch_apply_ctx *c) {
  sch_loop l;
  ts_status st;
  if (c->in[0].kind == 'b') {
    st = sch_add_unit_loop_block(c->s, c->in[0].block, &l, c->d);
  } else {
    if ((st = real_loop(c, 0, "add_unit_loop"))) return st;
    st = sch_add_unit_loop_loop(c->s, c->in[0].loop, &l, c->d);
  }
  return st ? st : out_loops(c, 1, &l);
}

/* compute_at onto the marks: the root mark leaves the block where it is, the
 * inline mark inlines it (as TVM's ConcreteSchedule does). */
static ts_status ap_compute_at(sch_apply_ctx *c) {
  sch_loop l = c->in[1].loop;
  if (l.mark == SCH_LOC_ROOT) {
    sch_path p;
    return sch_find_block(c->s, c->in[0].block.name, &p, "compute_at", c->d);
  }
  if (l.mark == SCH_LOC_INLINE) return sch_compute_inline(c->s, c->in[0].block, c->d);
  return sch_compute_at(c->s, c->in[0].block, l, c->attrs[0].i != 0, (int)c->attrs[1].i, c->d);
}

static ts_status ap_reverse_compute_at(sch_apply_ctx *c) {
  sch_loop l = c->in[1].loop;
  if (l.mark == SCH_LOC_ROOT) {
    sch_path p;
    return sch_find_block(c->s, c->in[0].block.name, &p, "reverse_compute_at", c->d);
  }
  if (l.mark == SCH_LOC_INLINE) return sch_reverse_compute_inline(c->s, c->in[0].block, c->d);
  return sch_reverse_compute_at(c->s, c->in[0].block, l, c->attrs[0].i != 0, (int)c->attrs[1].i, c->d);
}

static ts_status ap_compute_inline(sch_apply_ctx *c) { return sch_compute_inline(c->s, c->in[0].block, c->d); }
static ts_status ap_reverse_compute_inline(sch_apply_ctx *c) {
  return sch_reverse_compute_inline(c->s, c->in[0].block, c->d);
}

static ts_status ap_cache(sch_apply_ctx *c, bool write) {
  int nc = c->nin - 1;
  sch_block *cons = TS_ANEWN(c->arena, sch_block, nc ? nc : 1);
  const char *scope = sstr(c, c->attrs[1].s);
  if (!cons || !scope) return oom(c);
  for (int i = 0; i < nc; i++) cons[i] = c->in[i + 1].block;
  sch_block out;
  int idx = (int)c->attrs[0].i;
  ts_status st = write ? sch_cache_write(c->s, c->in[0].block, idx, scope, nc, cons, &out, c->d)
                       : sch_cache_read(c->s, c->in[0].block, idx, scope, nc, cons, &out, c->d);
  return st ? st : out_blocks(c, 1, &out);
}
static ts_status ap_cache_read(sch_apply_ctx *c) { return ap_cache(c, false); }
static ts_status ap_cache_write(sch_apply_ctx *c) { return ap_cache(c, true); }

static ts_status ap_set_scope(sch_apply_ctx *c) {
  const char *scope = sstr(c, c->attrs[1].s);
  return scope ? sch_set_scope(c->s, c->in[0].block, (int)c->attrs[0].i, scope, c->d) : oom(c);
}

static ts_status ap_storage_align(sch_apply_ctx *c) {
  return sch_storage_align(c->s, c->in[0].block, (int)c->attrs[0].i, (int)c->attrs[1].i, c->attrs[2].i,
                           c->attrs[3].i, c->d);
}

static ts_status ap_decompose_reduction(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 1, "decompose_reduction");
  sch_block out;
  if (!st) st = sch_decompose_reduction(c->s, c->in[0].block, c->in[1].loop, &out, c->d);
  return st ? st : out_blocks(c, 1, &out);
}

static ts_status ap_rfactor(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "rfactor");
  sch_block out;
  if (!st) st = sch_rfactor(c->s, c->in[0].loop, (int)c->attrs[0].i, &out, c->d);
  return st ? st : out_blocks(c, 1, &out);
}

static ts_status ap_blockize(sch_apply_ctx *c) {
  ts_status st = real_loop(c, 0, "blockize");
  sch_block out;
  if (!st) st = sch_blockize(c->s, c->in[0].loop, &out, c->d);
  return st ? st : out_blocks(c, 1, &out);
}

static ts_status ap_tensorize(sch_apply_ctx *c) {
  const char *name = sstr(c, c->attrs[0].s);
  if (!name) return oom(c);
  if (c->in[0].kind == 'b') return sch_tensorize_block(c->s, c->in[0].block, name, c->d);
  ts_status st = real_loop(c, 0, "tensorize");
  return st ? st : sch_tensorize_loop(c->s, c->in[0].loop, name, NULL, c->d);
}

static ts_status ap_sample_perfect_tile(sch_apply_ctx *c) {
  int64_t n = c->attrs[0].i;
  if (n < 1 || n > 64)
    return ts_diag_set(c->d, TS_EINVAL, "sample_perfect_tile: n = %lld tiles (want 1..64)", (long long)n);
  if (c->dec && c->dec->n != n)
    return ts_diag_set(c->d, TS_EINVAL, "sample_perfect_tile: the decision has %d tiles, want %lld", c->dec->n,
                       (long long)n);
  ts_status st = real_loop(c, 0, "sample_perfect_tile");
  int64_t *v = TS_ANEWN(c->arena, int64_t, n);
  if (!v) return oom(c);
  if (!st)
    st = sch_sample_perfect_tile(c->s, c->in[0].loop, (int)n, c->attrs[1].i, c->dec ? c->dec->v : NULL, v, c->d);
  if (st) return st;
  if (!out_alloc(c, (int)n, 'v')) return oom(c);
  for (int i = 0; i < n; i++) c->out[i].i = v[i];
  c->used.n = (int)n;
  c->used.v = v;
  return TS_OK;
}

static ts_status ap_sample_categorical(sch_apply_ctx *c) {
  const sch_attr *cand = &c->attrs[0], *probs = &c->attrs[1];
  if (cand->n != probs->n)
    return ts_diag_set(c->d, TS_EINVAL, "sample_categorical: %d candidates but %d probabilities", cand->n,
                       probs->n);
  if (c->dec && c->dec->n != 1)
    return ts_diag_set(c->d, TS_EINVAL, "sample_categorical: the decision should be one index");
  int dec = 0, idx = 0;
  if (c->dec) {
    if (c->dec->v[0] < 0 || c->dec->v[0] >= cand->n)
      return ts_diag_set(c->d, TS_EINVAL, "sample_categorical: decision %lld is not an index into %d candidates",
                         (long long)c->dec->v[0], cand->n);
    dec = (int)c->dec->v[0];
  }
  int64_t val;
  ts_status st = sch_sample_categorical(c->s, cand->n, cand->ints, probs->floats, c->dec ? &dec : NULL, &val,
                                        &idx, c->d);
  if (st) return st;
  int64_t *u = TS_ANEW(c->arena, int64_t);
  if (!u || !out_alloc(c, 1, 'v')) return oom(c);
  c->out[0].i = val;
  *u = idx;
  c->used.n = 1;
  c->used.v = u;
  return TS_OK;
}

static ts_status ap_sample_compute_location(sch_apply_ctx *c) {
  if (c->dec && c->dec->n != 1)
    return ts_diag_set(c->d, TS_EINVAL, "sample_compute_location: the decision should be one index");
  int dec = c->dec ? (int)c->dec->v[0] : 0, idx = 0;
  sch_loop l;
  ts_status st = sch_sample_compute_location(c->s, c->in[0].block, c->dec ? &dec : NULL, &l, &idx, c->d);
  if (st) return st;
  int64_t *u = TS_ANEW(c->arena, int64_t);
  if (!u) return oom(c);
  *u = idx;
  c->used.n = 1;
  c->used.v = u;
  return out_loops(c, 1, &l);
}

static ts_status ap_enter_postproc(sch_apply_ctx *c) {
  (void)c;
  return TS_OK;
}

/* layout.h: the map is in the attrs, so replay never re-derives it */
static ts_status ap_transform_layout(sch_apply_ctx *c) {
  sch_layout_map m;
  ts_status st = sch_layout_from_attrs(sch_func(c->s), c->nattr, c->attrs, &m, c->d);
  return st ? (st == TS_EINVAL ? TS_ESCHEDULE : st) : sch_transform_layout(c->s, &m, c->d);
}

/* The registry. Later kinds (RFactor, Blockize, Tensorize) add rows here and
 * to SCH_INST_KIND_LIST. */
static const sch_inst_kind_info kinds[SCH_INST_KIND_COUNT] = {
    [SCH_I_GET_BLOCK] = {"GetBlock", true, "", "ss", 'b', 1, 0, ap_get_block},
    [SCH_I_GET_LOOPS] = {"GetLoops", true, "B", "", 'l', SCH_NOUT_ANY, 0, ap_get_loops},
    [SCH_I_GET_CHILD_BLOCKS] = {"GetChildBlocks", true, "T", "", 'b', SCH_NOUT_ANY, 0, ap_get_child_blocks},
    [SCH_I_GET_PRODUCERS] = {"GetProducers", true, "B", "", 'b', SCH_NOUT_ANY, 0, ap_get_producers},
    [SCH_I_GET_CONSUMERS] = {"GetConsumers", true, "B", "", 'b', SCH_NOUT_ANY, 0, ap_get_consumers},
    [SCH_I_SPLIT] = {"Split", false, "LX+", "", 'l', SCH_NOUT_INPUTS_MINUS_1, 0, ap_split},
    [SCH_I_FUSE] = {"Fuse", false, "L+", "", 'l', 1, 0, ap_fuse},
    [SCH_I_REORDER] = {"Reorder", false, "L+", "", 0, 0, 0, ap_reorder},
    [SCH_I_PARALLEL] = {"Parallel", false, "L", "", 0, 0, 0, ap_parallel},
    [SCH_I_VECTORIZE] = {"Vectorize", false, "L", "", 0, 0, 0, ap_vectorize},
    [SCH_I_UNROLL] = {"Unroll", false, "L", "", 0, 0, 0, ap_unroll},
    [SCH_I_BIND] = {"Bind", false, "L", "s", 0, 0, 0, ap_bind},
    [SCH_I_ANNOTATE] = {"Annotate", false, "TV", "s", 0, 0, 0, ap_annotate},
    [SCH_I_ADD_UNIT_LOOP] = {"AddUnitLoop", false, "T", "", 'l', 1, 0, ap_add_unit_loop},
    [SCH_I_COMPUTE_AT] = {"ComputeAt", false, "BL", "bi", 0, 0, 0, ap_compute_at},
    [SCH_I_REVERSE_COMPUTE_AT] = {"ReverseComputeAt", false, "BL", "bi", 0, 0, 0, ap_reverse_compute_at},
    [SCH_I_COMPUTE_INLINE] = {"ComputeInline", false, "B", "", 0, 0, 0, ap_compute_inline},
    [SCH_I_REVERSE_COMPUTE_INLINE] = {"ReverseComputeInline", false, "B", "", 0, 0, 0,
                                      ap_reverse_compute_inline},
    [SCH_I_CACHE_READ] = {"CacheRead", false, "BB*", "is", 'b', 1, 0, ap_cache_read},
    [SCH_I_CACHE_WRITE] = {"CacheWrite", false, "BB*", "is", 'b', 1, 0, ap_cache_write},
    [SCH_I_SET_SCOPE] = {"SetScope", false, "B", "is", 0, 0, 0, ap_set_scope},
    [SCH_I_STORAGE_ALIGN] = {"StorageAlign", false, "B", "iiii", 0, 0, 0, ap_storage_align},
    [SCH_I_DECOMPOSE_REDUCTION] = {"DecomposeReduction", false, "BL", "", 'b', 1, 0, ap_decompose_reduction},
    [SCH_I_RFACTOR] = {"RFactor", false, "L", "i", 'b', 1, 0, ap_rfactor},
    [SCH_I_BLOCKIZE] = {"Blockize", false, "L", "", 'b', 1, 0, ap_blockize},
    [SCH_I_TENSORIZE] = {"Tensorize", false, "T", "s", 0, 0, 0, ap_tensorize},
    [SCH_I_SAMPLE_PERFECT_TILE] = {"SamplePerfectTile", true, "L", "ii", 'v', SCH_NOUT_ATTR0, 'a',
                                   ap_sample_perfect_tile},
    [SCH_I_SAMPLE_CATEGORICAL] = {"SampleCategorical", true, "", "IF", 'v', 1, 's', ap_sample_categorical},
    [SCH_I_SAMPLE_COMPUTE_LOCATION] = {"SampleComputeLocation", true, "B", "", 'l', 1, 's',
                                       ap_sample_compute_location},
    [SCH_I_ENTER_POSTPROC] = {"EnterPostproc", false, "", "", 0, 0, 0, ap_enter_postproc},
    [SCH_I_TRANSFORM_LAYOUT] = {"TransformLayout", false, "", "iII", 0, 0, 0, ap_transform_layout},
};

const sch_inst_kind_info *sch_inst_kind_get(sch_inst_kind k) {
  return k >= 0 && k < SCH_INST_KIND_COUNT ? &kinds[k] : NULL;
}

bool sch_inst_kind_lookup(const char *name, sch_inst_kind *out) {
  for (int k = 0; k < SCH_INST_KIND_COUNT; k++)
    if (kinds[k].name && !strcmp(kinds[k].name, name)) {
      *out = (sch_inst_kind)k;
      return true;
    }
  return false;
}

/* ---- the traced schedule ---------------------------------------------------- */
struct sch_traced {
  sch_state *s;
  sch_trace *trace;
  sch_trace *failed; /* the last call whose primitive failed (one instruction) */
  ts_arena arena; /* outputs handed to callers, scratch */
  int nrv, caprv;
  sch_val *rv;
};

sch_traced *sch_traced_new(const ir_func *f, uint64_t seed, ts_diag *d) {
  sch_traced *t = ts_calloc(1, sizeof *t);
  if (!t) {
    ts_diag_set(d, TS_ENOMEM, "out of memory creating a traced schedule");
    return NULL;
  }
  ts_arena_init(&t->arena);
  t->s = sch_create(f, seed, d);
  t->trace = t->s ? sch_trace_new() : NULL;
  if (!t->trace) {
    if (t->s) ts_diag_set(d, TS_ENOMEM, "out of memory creating a traced schedule");
    sch_traced_free(t);
    return NULL;
  }
  return t;
}

void sch_traced_free(sch_traced *t) {
  if (!t) return;
  sch_free(t->s);
  sch_trace_free(t->trace);
  sch_trace_free(t->failed);
  ts_arena_fini(&t->arena);
  ts_free(t->rv);
  ts_free(t);
}

sch_state *sch_traced_state(sch_traced *t) { return t->s; }
ir_func *sch_traced_func(sch_traced *t) { return sch_func(t->s); }
const sch_trace *sch_traced_trace(sch_traced *t) { return t->trace; }

static const sch_val *rv_val(const sch_traced *t, int rv) {
  return rv >= 0 && rv < t->nrv ? &t->rv[rv] : NULL;
}
sch_rv_kind sch_t_rv_kind(const sch_traced *t, int rv) {
  const sch_val *v = rv_val(t, rv);
  return v ? (sch_rv_kind)v->kind : (sch_rv_kind)0;
}
sch_block sch_t_block(const sch_traced *t, int rv) {
  const sch_val *v = rv_val(t, rv);
  return v && v->kind == 'b' ? v->block : (sch_block){NULL};
}
sch_loop sch_t_loop(const sch_traced *t, int rv) {
  const sch_val *v = rv_val(t, rv);
  return v && v->kind == 'l' ? v->loop : (sch_loop){NULL, SCH_LOC_LOOP};
}
int64_t sch_t_value(const sch_traced *t, int rv) {
  const sch_val *v = rv_val(t, rv);
  return v && v->kind == 'v' ? v->i : 0;
}

/* Keeps the call that just failed so that sch_traced_failure_json can show
 * it; best effort (silently nothing on OOM). */
static void record_failure(sch_traced *t, sch_inst_kind kind, int nin, const sch_arg *in, int nattr,
                           const sch_attr *attrs, int nout, const sch_decision *dec) {
  sch_trace_free(t->failed);
  t->failed = sch_trace_new();
  if (nout < 0) nout = 0;
  int *ids = ts_malloc(sizeof *ids * (size_t)(nout ? nout : 1));
  for (int i = 0; ids && i < nout; i++) ids[i] = t->nrv + i;
  if (!t->failed || !ids || trace_append(t->failed, kind, nin, in, nattr, attrs, nout, ids, dec)) {
    sch_trace_free(t->failed);
    t->failed = NULL;
  }
  ts_free(ids);
}

char *sch_traced_failure_json(const sch_traced *t) {
  sch_trace *c = sch_trace_copy(t->trace);
  if (!c) return NULL;
  if (t->failed && t->failed->n) {
    const sch_inst *x = &t->failed->insts[0];
    if (trace_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
      sch_trace_free(c);
      return NULL;
    }
  }
  char *j = sch_trace_to_json(c);
  sch_trace_free(c);
  return j;
}

ts_status sch_traced_call(sch_traced *t, sch_inst_kind kind, int nin, const sch_arg *in, int nattr,
                          const sch_attr *attrs, const sch_decision *dec, const int **out, int *nout,
                          ts_diag *d) {
  const sch_inst_kind_info *info = sch_inst_kind_get(kind);
  if (!info || !info->name) return ts_diag_set(d, TS_EINVAL, "trace: unknown instruction kind %d", (int)kind);
  /* the RV kinds of this schedule, for the signature check */
  char *rvk = ts_malloc((size_t)(t->nrv ? t->nrv : 1));
  if (!rvk) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < t->nrv; i++) rvk[i] = t->rv[i].kind;
  ts_status st = check_sig(info, nin, in, rvk, t->nrv, nattr, attrs, TS_EINVAL, info->name, d);
  ts_free(rvk);
  if (st) return st;
  if (dec && dec->n == 0) dec = NULL;
  if (dec && !info->decision) return ts_diag_set(d, TS_EINVAL, "%s: takes no decision", info->name);

  sch_val *vals = TS_ANEWN(&t->arena, sch_val, nin ? nin : 1);
  if (!vals) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < nin; i++) {
    switch (in[i].kind) {
    case SCH_ARG_RV: vals[i] = t->rv[in[i].rv]; break;
    case SCH_ARG_NONE: vals[i].kind = 'n'; break;
    case SCH_ARG_INT: vals[i].kind = 'i'; vals[i].i = in[i].i; break;
    case SCH_ARG_FLOAT: vals[i].kind = 'f'; vals[i].f = in[i].f; break;
    case SCH_ARG_STR: vals[i].kind = 's'; vals[i].s = in[i].s; break;
    }
  }
  sch_apply_ctx c = {.s = t->s, .arena = &t->arena, .nin = nin, .in = vals, .nattr = nattr, .attrs = attrs,
                     .dec = dec, .d = d};
  st = info->apply(&c);
  int want = fixed_nout(info, nin, attrs);
  if (st) {
    record_failure(t, kind, nin, in, nattr, attrs, want, dec);
    return st;
  }
  if (want >= 0 && c.nout != want)
    return ts_diag_set(d, TS_EINTERNAL, "%s: produced %d outputs, expected %d", info->name, c.nout, want);

  /* define the outputs and record the instruction */
  if (t->nrv + c.nout > t->caprv) {
    int cap = t->caprv ? t->caprv : 32;
    while (cap < t->nrv + c.nout) cap *= 2;
    sch_val *nv = ts_realloc(t->rv, sizeof *nv * (size_t)cap);
    if (!nv) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    t->rv = nv;
    t->caprv = cap;
  }
  int *ids = TS_ANEWN(&t->arena, int, c.nout ? c.nout : 1);
  if (!ids) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < c.nout; i++) ids[i] = t->nrv + i;
  if (trace_append(t->trace, kind, nin, in, nattr, attrs, c.nout, ids, c.used.n ? &c.used : NULL))
    return ts_diag_set(d, TS_ENOMEM, "out of memory recording the trace");
  for (int i = 0; i < c.nout; i++) t->rv[t->nrv++] = c.out[i];
  if (out) *out = ids;
  if (nout) *nout = c.nout;
  return TS_OK;
}

/* ---- the sch_t_* wrappers ---------------------------------------------------- */
static sch_attr at_int(int64_t v) { return (sch_attr){.kind = SCH_ATTR_INT, .i = v}; }
static sch_attr at_bool(bool v) { return (sch_attr){.kind = SCH_ATTR_BOOL, .i = v}; }
static sch_attr at_str(const char *s) { return (sch_attr){.kind = SCH_ATTR_STR, .s = s}; }

static ts_status call1(sch_traced *t, sch_inst_kind k, int nin, const sch_arg *in, int nattr,
                       const sch_attr *attrs, int *out1, ts_diag *d) {
  const int *o;
  int n;
  ts_status st = sch_traced_call(t, k, nin, in, nattr, attrs, NULL, &o, &n, d);
  if (!st && out1) *out1 = n ? o[0] : -1;
  return st;
}

ts_status sch_t_get_block(sch_traced *t, const char *name, int *b, ts_diag *d) {
  if (!name) return ts_diag_set(d, TS_EINVAL, "GetBlock: NULL block name");
  sch_attr at[2] = {at_str(name), at_str(sch_func(t->s)->name ? sch_func(t->s)->name : "main")};
  return call1(t, SCH_I_GET_BLOCK, 0, NULL, 2, at, b, d);
}

static ts_status call_list(sch_traced *t, sch_inst_kind k, int rv, const int **out, int *n, ts_diag *d) {
  sch_arg a = sch_arg_rv(rv);
  return sch_traced_call(t, k, 1, &a, 0, NULL, NULL, out, n, d);
}
ts_status sch_t_get_loops(sch_traced *t, int b, const int **loops, int *n, ts_diag *d) {
  return call_list(t, SCH_I_GET_LOOPS, b, loops, n, d);
}
ts_status sch_t_get_child_blocks(sch_traced *t, int target, const int **blocks, int *n, ts_diag *d) {
  return call_list(t, SCH_I_GET_CHILD_BLOCKS, target, blocks, n, d);
}
ts_status sch_t_get_producers(sch_traced *t, int b, const int **blocks, int *n, ts_diag *d) {
  return call_list(t, SCH_I_GET_PRODUCERS, b, blocks, n, d);
}
ts_status sch_t_get_consumers(sch_traced *t, int b, const int **blocks, int *n, ts_diag *d) {
  return call_list(t, SCH_I_GET_CONSUMERS, b, blocks, n, d);
}

static sch_arg *rv_args(sch_traced *t, int first, int n, const int *rest) {
  sch_arg *a = TS_ANEWN(&t->arena, sch_arg, n + 1);
  if (!a) return NULL;
  int k = 0;
  if (first >= 0) a[k++] = sch_arg_rv(first);
  for (int i = 0; i < n; i++) a[k++] = sch_arg_rv(rest[i]);
  return a;
}

ts_status sch_t_split(sch_traced *t, int loop, int n, const sch_arg *factors, int *out, ts_diag *d) {
  if (n < 1) return ts_diag_set(d, TS_EINVAL, "Split: needs at least one factor");
  sch_arg *a = TS_ANEWN(&t->arena, sch_arg, n + 1);
  if (!a) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  a[0] = sch_arg_rv(loop);
  memcpy(a + 1, factors, sizeof *a * (size_t)n);
  const int *o;
  int no;
  ts_status st = sch_traced_call(t, SCH_I_SPLIT, n + 1, a, 0, NULL, NULL, &o, &no, d);
  if (!st && out) memcpy(out, o, sizeof *o * (size_t)no);
  return st;
}

ts_status sch_t_fuse(sch_traced *t, int n, const int *loops, int *out, ts_diag *d) {
  sch_arg *a = rv_args(t, -1, n, loops);
  if (!a) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return call1(t, SCH_I_FUSE, n, a, 0, NULL, out, d);
}

ts_status sch_t_reorder(sch_traced *t, int n, const int *loops, ts_diag *d) {
  sch_arg *a = rv_args(t, -1, n, loops);
  if (!a) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return call1(t, SCH_I_REORDER, n, a, 0, NULL, NULL, d);
}

static ts_status call_loop(sch_traced *t, sch_inst_kind k, int loop, ts_diag *d) {
  sch_arg a = sch_arg_rv(loop);
  return call1(t, k, 1, &a, 0, NULL, NULL, d);
}
ts_status sch_t_parallel(sch_traced *t, int loop, ts_diag *d) { return call_loop(t, SCH_I_PARALLEL, loop, d); }
ts_status sch_t_vectorize(sch_traced *t, int loop, ts_diag *d) { return call_loop(t, SCH_I_VECTORIZE, loop, d); }
ts_status sch_t_unroll(sch_traced *t, int loop, ts_diag *d) { return call_loop(t, SCH_I_UNROLL, loop, d); }

ts_status sch_t_bind(sch_traced *t, int loop, const char *thread, ts_diag *d) {
  if (!thread) return ts_diag_set(d, TS_EINVAL, "Bind: NULL thread tag");
  sch_arg a = sch_arg_rv(loop);
  sch_attr at = at_str(thread);
  return call1(t, SCH_I_BIND, 1, &a, 1, &at, NULL, d);
}

ts_status sch_t_annotate(sch_traced *t, int target, const char *key, sch_arg value, ts_diag *d) {
  if (!key) return ts_diag_set(d, TS_EINVAL, "Annotate: NULL key");
  sch_arg a[2] = {sch_arg_rv(target), value};
  sch_attr at = at_str(key);
  return call1(t, SCH_I_ANNOTATE, 2, a, 1, &at, NULL, d);
}

ts_status sch_t_add_unit_loop(sch_traced *t, int target, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(target);
  return call1(t, SCH_I_ADD_UNIT_LOOP, 1, &a, 0, NULL, out, d);
}

static ts_status call_at(sch_traced *t, sch_inst_kind k, int b, int loop, bool pul, int index, ts_diag *d) {
  sch_arg a[2] = {sch_arg_rv(b), sch_arg_rv(loop)};
  sch_attr at[2] = {at_bool(pul), at_int(index)};
  return call1(t, k, 2, a, 2, at, NULL, d);
}
ts_status sch_t_compute_at(sch_traced *t, int b, int loop, bool preserve_unit_loops, int index, ts_diag *d) {
  return call_at(t, SCH_I_COMPUTE_AT, b, loop, preserve_unit_loops, index, d);
}
ts_status sch_t_reverse_compute_at(sch_traced *t, int b, int loop, bool preserve_unit_loops, int index,
                                   ts_diag *d) {
  return call_at(t, SCH_I_REVERSE_COMPUTE_AT, b, loop, preserve_unit_loops, index, d);
}

static ts_status call_block(sch_traced *t, sch_inst_kind k, int b, ts_diag *d) {
  sch_arg a = sch_arg_rv(b);
  return call1(t, k, 1, &a, 0, NULL, NULL, d);
}
ts_status sch_t_compute_inline(sch_traced *t, int b, ts_diag *d) { return call_block(t, SCH_I_COMPUTE_INLINE, b, d); }
ts_status sch_t_reverse_compute_inline(sch_traced *t, int b, ts_diag *d) {
  return call_block(t, SCH_I_REVERSE_COMPUTE_INLINE, b, d);
}

static ts_status call_cache(sch_traced *t, sch_inst_kind k, int b, int index, const char *scope, int nc,
                            const int *cons, int *out, ts_diag *d) {
  if (!scope) return ts_diag_set(d, TS_EINVAL, "%s: NULL scope", sch_inst_kind_get(k)->name);
  sch_arg *a = rv_args(t, b, nc, cons);
  if (!a) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  sch_attr at[2] = {at_int(index), at_str(scope)};
  return call1(t, k, nc + 1, a, 2, at, out, d);
}
ts_status sch_t_cache_read(sch_traced *t, int b, int read_index, const char *scope, int nconsumers,
                           const int *consumers, int *out, ts_diag *d) {
  return call_cache(t, SCH_I_CACHE_READ, b, read_index, scope, nconsumers, consumers, out, d);
}
ts_status sch_t_cache_write(sch_traced *t, int b, int write_index, const char *scope, int nconsumers,
                            const int *consumers, int *out, ts_diag *d) {
  return call_cache(t, SCH_I_CACHE_WRITE, b, write_index, scope, nconsumers, consumers, out, d);
}

ts_status sch_t_set_scope(sch_traced *t, int b, int write_index, const char *scope, ts_diag *d) {
  if (!scope) return ts_diag_set(d, TS_EINVAL, "SetScope: NULL scope");
  sch_arg a = sch_arg_rv(b);
  sch_attr at[2] = {at_int(write_index), at_str(scope)};
  return call1(t, SCH_I_SET_SCOPE, 1, &a, 2, at, NULL, d);
}

ts_status sch_t_storage_align(sch_traced *t, int b, int write_index, int axis, int64_t factor, int64_t offset,
                              ts_diag *d) {
  sch_arg a = sch_arg_rv(b);
  sch_attr at[4] = {at_int(write_index), at_int(axis), at_int(factor), at_int(offset)};
  return call1(t, SCH_I_STORAGE_ALIGN, 1, &a, 4, at, NULL, d);
}

ts_status sch_t_decompose_reduction(sch_traced *t, int b, int loop, int *out, ts_diag *d) {
  sch_arg a[2] = {sch_arg_rv(b), sch_arg_rv(loop)};
  return call1(t, SCH_I_DECOMPOSE_REDUCTION, 2, a, 0, NULL, out, d);
}

ts_status sch_t_rfactor(sch_traced *t, int loop, int factor_axis, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(loop);
  sch_attr at = at_int(factor_axis);
  return call1(t, SCH_I_RFACTOR, 1, &a, 1, &at, out, d);
}

ts_status sch_t_blockize(sch_traced *t, int loop, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(loop);
  return call1(t, SCH_I_BLOCKIZE, 1, &a, 0, NULL, out, d);
}

ts_status sch_t_tensorize(sch_traced *t, int target, const char *intrin, ts_diag *d) {
  if (!intrin) return ts_diag_set(d, TS_EINVAL, "Tensorize: NULL intrinsic name");
  sch_arg a = sch_arg_rv(target);
  sch_attr at = at_str(intrin);
  return call1(t, SCH_I_TENSORIZE, 1, &a, 1, &at, NULL, d);
}

ts_status sch_t_sample_perfect_tile(sch_traced *t, int loop, int n, int64_t max_innermost,
                                    const int64_t *decision, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(loop);
  sch_attr at[2] = {at_int(n), at_int(max_innermost)};
  sch_decision dec = {decision ? n : 0, (int64_t *)decision};
  const int *o;
  int no;
  ts_status st = sch_traced_call(t, SCH_I_SAMPLE_PERFECT_TILE, 1, &a, 2, at, decision ? &dec : NULL, &o, &no, d);
  if (!st && out) memcpy(out, o, sizeof *o * (size_t)no);
  return st;
}

ts_status sch_t_sample_categorical(sch_traced *t, int n, const int64_t *candidates, const double *probs,
                                   const int *decision, int *out, ts_diag *d) {
  if (n < 0 || (n > 0 && (!candidates || !probs)))
    return ts_diag_set(d, TS_EINVAL, "SampleCategorical: bad candidate list");
  sch_attr at[2] = {{.kind = SCH_ATTR_INTS, .n = n, .ints = (int64_t *)candidates},
                    {.kind = SCH_ATTR_FLOATS, .n = n, .floats = (double *)probs}};
  int64_t dv = decision ? *decision : 0;
  sch_decision dec = {1, &dv};
  const int *o;
  int no;
  ts_status st = sch_traced_call(t, SCH_I_SAMPLE_CATEGORICAL, 0, NULL, 2, at, decision ? &dec : NULL, &o, &no, d);
  if (!st && out) *out = o[0];
  return st;
}

ts_status sch_t_sample_compute_location(sch_traced *t, int b, const int *decision, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(b);
  int64_t dv = decision ? *decision : 0;
  sch_decision dec = {1, &dv};
  const int *o;
  int no;
  ts_status st = sch_traced_call(t, SCH_I_SAMPLE_COMPUTE_LOCATION, 1, &a, 0, NULL, decision ? &dec : NULL, &o,
                                 &no, d);
  if (!st && out) *out = o[0];
  return st;
}

ts_status sch_t_transform_layout(sch_traced *t, const sch_layout_map *m, ts_diag *d) {
  int64_t comps[3 * SCH_LAYOUT_MAX_COMPS], groups[SCH_LAYOUT_MAX_AXES];
  if (m->ncomp < 0 || m->ncomp > SCH_LAYOUT_MAX_COMPS || m->naxes < 0 || m->naxes > SCH_LAYOUT_MAX_AXES)
    return ts_diag_set(d, TS_EINVAL, "TransformLayout: %d components and %d axes (at most %d and %d)", m->ncomp,
                       m->naxes, SCH_LAYOUT_MAX_COMPS, SCH_LAYOUT_MAX_AXES);
  for (int j = 0; j < m->ncomp; j++) {
    comps[3 * j] = m->comp[j].dim;
    comps[3 * j + 1] = m->comp[j].stride;
    comps[3 * j + 2] = m->comp[j].extent;
  }
  for (int a = 0; a < m->naxes; a++) groups[a] = m->group[a];
  sch_attr at[3] = {{.kind = SCH_ATTR_INT, .i = m->param},
                    {.kind = SCH_ATTR_INTS, .n = 3 * m->ncomp, .ints = comps},
                    {.kind = SCH_ATTR_INTS, .n = m->naxes, .ints = groups}};
  return sch_traced_call(t, SCH_I_TRANSFORM_LAYOUT, 0, NULL, 3, at, NULL, NULL, NULL, d);
}

ts_status sch_t_enter_postproc(sch_traced *t, ts_diag *d) {
  return sch_traced_call(t, SCH_I_ENTER_POSTPROC, 0, NULL, 0, NULL, NULL, NULL, NULL, d);
}

/* ---- replay ------------------------------------------------------------------ */
ts_status sch_trace_apply(const sch_trace *tr, sch_traced *t, bool resample, int *failed_at, ts_diag *d) {
  if (failed_at) *failed_at = -1;
  if (tr == t->trace) {
    /* applying a schedule's own trace to itself: work from a copy, since
     * the trace grows while it is read */
    sch_trace *c = sch_trace_copy(tr);
    if (!c) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    ts_status st = sch_trace_apply(c, t, resample, failed_at, d);
    sch_trace_free(c);
    return st;
  }
  int *map = ts_malloc(sizeof *map * (size_t)(tr->nrv ? tr->nrv : 1));
  sch_arg *args = NULL;
  int cap = 0;
  if (!map) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < tr->nrv; i++) map[i] = -1;
  ts_status st = TS_OK;
  int i;
  for (i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const char *name = sch_inst_kind_get(x->kind)->name;
    if (x->nin > cap) {
      cap = x->nin * 2;
      sch_arg *na = ts_realloc(args, sizeof *na * (size_t)cap);
      if (!na) {
        st = ts_diag_set(d, TS_ENOMEM, "out of memory");
        break;
      }
      args = na;
    }
    for (int j = 0; j < x->nin; j++) {
      args[j] = x->in[j];
      if (x->in[j].kind != SCH_ARG_RV) continue;
      int rv = x->in[j].rv;
      if (rv < 0 || rv >= tr->nrv || map[rv] < 0) {
        st = ts_diag_set(d, TS_EINVAL, "instruction %d (%s): input %d uses a variable no earlier instruction defines",
                         i, name, j);
        break;
      }
      args[j].rv = map[rv];
    }
    if (st) break;
    const sch_decision *dec = resample || x->decision.n == 0 ? NULL : &x->decision;
    ts_diag ld;
    ts_diag_clear(&ld);
    const int *out;
    int nout;
    st = sch_traced_call(t, x->kind, x->nin, args, x->nattr, x->attrs, dec, &out, &nout, &ld);
    if (st) {
      ts_diag_set(d, st, "instruction %d (%s): %s", i, name, ld.msg);
      break;
    }
    if (nout != x->nout) {
      st = ts_diag_set(d, TS_ESCHEDULE, "instruction %d (%s): gives %d outputs now, but the trace names %d", i,
                       name, nout, x->nout);
      break;
    }
    for (int j = 0; j < nout; j++)
      if (x->out[j] >= 0 && x->out[j] < tr->nrv) map[x->out[j]] = out[j];
  }
  if (st && failed_at) *failed_at = i;
  ts_free(map);
  ts_free(args);
  return st;
}

sch_traced *sch_trace_replay(const sch_trace *tr, const ir_func *f, uint64_t seed, ts_diag *d) {
  sch_traced *t = sch_traced_new(f, seed, d);
  if (!t) return NULL;
  if (sch_trace_apply(tr, t, false, NULL, d)) {
    sch_traced_free(t);
    return NULL;
  }
  return t;
}

/* ---- JSON --------------------------------------------------------------------- */
/* Names RVs by a running count of definitions, in instruction order. */
static int *rv_names(const sch_trace *tr) {
  int *num = ts_malloc(sizeof *num * (size_t)(tr->nrv ? tr->nrv : 1));
  if (!num) return NULL;
  for (int i = 0; i < tr->nrv; i++) num[i] = -1;
  int k = 0;
  for (int i = 0; i < tr->n; i++)
    for (int j = 0; j < tr->insts[i].nout; j++) {
      int rv = tr->insts[i].out[j];
      if (rv >= 0 && rv < tr->nrv) num[rv] = k++;
    }
  return num;
}

static void rv_name(const sch_trace *tr, const int *num, int rv, char *buf, size_t n) {
  if (rv < 0 || rv >= tr->nrv || num[rv] < 0) snprintf(buf, n, "?%d", rv);
  else snprintf(buf, n, "%c%d", tr->rvk[rv], num[rv]);
}

static json_t *arg_json(const sch_trace *tr, const int *num, const sch_arg *a) {
  char buf[64];
  switch (a->kind) {
  case SCH_ARG_RV:
    rv_name(tr, num, a->rv, buf, sizeof buf);
    return json_string(buf);
  case SCH_ARG_NONE: return json_string("None");
  case SCH_ARG_INT: return json_integer(a->i);
  case SCH_ARG_FLOAT: return json_real(a->f);
  case SCH_ARG_STR: {
    size_t len = strlen(a->s);
    char *q = ts_malloc(len + 3);
    if (!q) return NULL;
    q[0] = '"';
    memcpy(q + 1, a->s, len);
    q[len + 1] = '"';
    q[len + 2] = '\0';
    json_t *j = json_string(q);
    ts_free(q);
    return j;
  }
  }
  return NULL;
}

static json_t *attr_json(const sch_attr *a) {
  switch (a->kind) {
  case SCH_ATTR_INT: return json_integer(a->i);
  case SCH_ATTR_BOOL: return json_boolean(a->i);
  case SCH_ATTR_FLOAT: return json_real(a->f);
  case SCH_ATTR_STR: return json_string(a->s);
  case SCH_ATTR_INTS: {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->n; i++) json_array_append_new(arr, json_integer(a->ints[i]));
    return arr;
  }
  case SCH_ATTR_FLOATS: {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->n; i++) json_array_append_new(arr, json_real(a->floats[i]));
    return arr;
  }
  }
  return NULL;
}

static json_t *trace_json(const sch_trace *tr) {
  int *num = rv_names(tr);
  json_t *insts = json_array(), *decs = json_array(), *top = json_array();
  if (!num || !insts || !decs || !top) goto fail;
  for (int i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
    json_t *in = json_array(), *at = json_array(), *out = json_array(), *row = json_array();
    if (!in || !at || !out || !row) {
      json_decref(in);
      json_decref(at);
      json_decref(out);
      json_decref(row);
      goto fail;
    }
    for (int j = 0; j < x->nin; j++) json_array_append_new(in, arg_json(tr, num, &x->in[j]));
    for (int j = 0; j < x->nattr; j++) json_array_append_new(at, attr_json(&x->attrs[j]));
    for (int j = 0; j < x->nout; j++) {
      char buf[64];
      rv_name(tr, num, x->out[j], buf, sizeof buf);
      json_array_append_new(out, json_string(buf));
    }
    json_array_append_new(row, json_string(info->name));
    json_array_append_new(row, in);
    json_array_append_new(row, at);
    json_array_append_new(row, out);
    json_array_append_new(insts, row);
    if (x->decision.n && info->decision) {
      json_t *dv;
      if (info->decision == 's') {
        dv = json_integer(x->decision.v[0]);
      } else {
        dv = json_array();
        for (int j = 0; dv && j < x->decision.n; j++) json_array_append_new(dv, json_integer(x->decision.v[j]));
      }
      json_t *pair = json_array();
      json_array_append_new(pair, json_integer(i));
      json_array_append_new(pair, dv);
      json_array_append_new(decs, pair);
    }
  }
  json_array_append_new(top, insts);
  json_array_append_new(top, decs);
  ts_free(num);
  return top;
fail:
  ts_free(num);
  json_decref(insts);
  json_decref(decs);
  json_decref(top);
  return NULL;
}

char *sch_trace_to_json(const sch_trace *tr) {
  json_t *j = trace_json(tr);
  if (!j) return NULL;
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (!s) return NULL;
  char *r = ts_strdup(s);
  free(s);
  return r;
}

static const char *json_type_name(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a bool";
  case JSON_NULL: return "null";
  }
  return "?";
}

typedef struct parse_ctx {
  sch_trace *tr;
  json_t *names; /* name -> RV id */
  ts_diag *d;
  int nrv;
} parse_ctx;

static ts_status perr(parse_ctx *p, int i, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ts_status perr(parse_ctx *p, int i, const char *kind, const char *fmt, ...) {
  char msg[1500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (i < 0) return ts_diag_set(p->d, TS_EPARSE, "trace JSON: %s", msg);
  if (kind) return ts_diag_set(p->d, TS_EPARSE, "trace JSON: instruction %d (%s): %s", i, kind, msg);
  return ts_diag_set(p->d, TS_EPARSE, "trace JSON: instruction %d: %s", i, msg);
}

static ts_status parse_arg(parse_ctx *p, int i, const char *kname, int j, json_t *v, sch_arg *out,
                           ts_arena *a) {
  if (json_is_integer(v)) {
    *out = sch_arg_int(json_integer_value(v));
    return TS_OK;
  }
  if (json_is_real(v)) {
    *out = sch_arg_float(json_real_value(v));
    return TS_OK;
  }
  if (!json_is_string(v))
    return perr(p, i, kname, "input %d is %s; expected a variable name, \"None\", a number or a quoted string", j,
                json_type_name(v));
  const char *s = json_string_value(v);
  size_t len = strlen(s);
  if (!strcmp(s, "None")) {
    *out = sch_arg_none();
    return TS_OK;
  }
  if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
    const char *lit = ts_arena_strndup(a, s + 1, len - 2);
    if (!lit) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    *out = sch_arg_str(lit);
    return TS_OK;
  }
  json_t *id = json_object_get(p->names, s);
  if (!id) return perr(p, i, kname, "input %d: variable '%s' is not defined by an earlier instruction", j, s);
  *out = sch_arg_rv((int)json_integer_value(id));
  return TS_OK;
}

static ts_status parse_attr(parse_ctx *p, int i, const char *kname, int j, char c, json_t *v, sch_attr *out,
                            ts_arena *a) {
  memset(out, 0, sizeof *out);
  switch (c) {
  case 'i':
    if (!json_is_integer(v)) break;
    out->kind = SCH_ATTR_INT;
    out->i = json_integer_value(v);
    return TS_OK;
  case 'b':
    if (!json_is_boolean(v)) break;
    out->kind = SCH_ATTR_BOOL;
    out->i = json_is_true(v);
    return TS_OK;
  case 'f':
    if (!json_is_number(v)) break;
    out->kind = SCH_ATTR_FLOAT;
    out->f = json_number_value(v);
    return TS_OK;
  case 's':
    if (!json_is_string(v)) break;
    out->kind = SCH_ATTR_STR;
    if (!(out->s = ts_arena_strdup(a, json_string_value(v)))) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    return TS_OK;
  case 'I':
  case 'F': {
    if (!json_is_array(v)) break;
    int n = (int)json_array_size(v);
    out->kind = c == 'I' ? SCH_ATTR_INTS : SCH_ATTR_FLOATS;
    out->n = n;
    if (c == 'I') out->ints = TS_ANEWN(a, int64_t, n ? n : 1);
    else out->floats = TS_ANEWN(a, double, n ? n : 1);
    if (!out->ints && !out->floats) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
      json_t *e = json_array_get(v, (size_t)k);
      if (c == 'I' ? !json_is_integer(e) : !json_is_number(e))
        return perr(p, i, kname, "attr %d: element %d is %s, expected %s", j, k, json_type_name(e),
                    c == 'I' ? "an integer" : "a number");
      if (c == 'I') out->ints[k] = json_integer_value(e);
      else out->floats[k] = json_number_value(e);
    }
    return TS_OK;
  }
  }
  return perr(p, i, kname, "attr %d is %s, expected %s", j, json_type_name(v), sig_name(c));
}

static ts_status parse_inst(parse_ctx *p, int i, json_t *row) {
  ts_arena *a = &p->tr->arena;
  if (!json_is_array(row) || json_array_size(row) != 4)
    return perr(p, i, NULL, "expected [kind, inputs, attrs, outputs], got %s%s", json_type_name(row),
                json_is_array(row) ? " of the wrong length" : "");
  json_t *jk = json_array_get(row, 0), *jin = json_array_get(row, 1), *jat = json_array_get(row, 2),
         *jout = json_array_get(row, 3);
  if (!json_is_string(jk)) return perr(p, i, NULL, "the kind is %s, expected a string", json_type_name(jk));
  sch_inst_kind kind;
  if (!sch_inst_kind_lookup(json_string_value(jk), &kind))
    return perr(p, i, NULL, "unknown instruction kind '%s'", json_string_value(jk));
  const sch_inst_kind_info *info = sch_inst_kind_get(kind);
  const char *kn = info->name;
  if (!json_is_array(jin)) return perr(p, i, kn, "inputs are %s, expected an array", json_type_name(jin));
  if (!json_is_array(jat)) return perr(p, i, kn, "attrs are %s, expected an array", json_type_name(jat));
  if (!json_is_array(jout)) return perr(p, i, kn, "outputs are %s, expected an array", json_type_name(jout));
  int nin = (int)json_array_size(jin), nattr = (int)json_array_size(jat), nout = (int)json_array_size(jout);
  sch_arg *in = TS_ANEWN(a, sch_arg, nin ? nin : 1);
  sch_attr *at = TS_ANEWN(a, sch_attr, nattr ? nattr : 1);
  int *out = TS_ANEWN(a, int, nout ? nout : 1);
  if (!in || !at || !out) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  ts_status st;
  for (int j = 0; j < nin; j++)
    if ((st = parse_arg(p, i, kn, j, json_array_get(jin, (size_t)j), &in[j], a))) return st;
  int na = (int)strlen(info->attrs);
  if (nattr != na)
    return perr(p, i, kn, "takes %d attr%s, got %d", na, na == 1 ? "" : "s", nattr);
  for (int j = 0; j < nattr; j++)
    if ((st = parse_attr(p, i, kn, j, info->attrs[j], json_array_get(jat, (size_t)j), &at[j], a))) return st;
  /* signature (arity and RV kinds) */
  ts_diag sd;
  ts_diag_clear(&sd);
  if (check_sig(info, nin, in, p->tr->rvk, p->tr->nrv, nattr, at, TS_EPARSE, "x", &sd))
    return perr(p, i, kn, "%s", sd.msg + 3);
  int want = fixed_nout(info, nin, at);
  if (want >= 0 && nout != want)
    return perr(p, i, kn, "names %d output%s, but gives %d", nout, nout == 1 ? "" : "s", want);
  if (kind == SCH_I_SAMPLE_PERFECT_TILE && (at[0].i < 1 || at[0].i > 64))
    return perr(p, i, kn, "n = %lld tiles (want 1..64)", (long long)at[0].i);
  for (int j = 0; j < nout; j++) {
    json_t *o = json_array_get(jout, (size_t)j);
    if (!json_is_string(o)) return perr(p, i, kn, "output %d is %s, expected a name", j, json_type_name(o));
    const char *s = json_string_value(o);
    if (!*s || !strcmp(s, "None") || s[0] == '"')
      return perr(p, i, kn, "output %d: '%s' cannot name a variable", j, s);
    if (json_object_get(p->names, s)) return perr(p, i, kn, "output %d: variable '%s' is defined twice", j, s);
    out[j] = p->nrv++;
    if (json_object_set_new(p->names, s, json_integer(out[j])))
      return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  }
  if (trace_append(p->tr, kind, nin, in, nattr, at, nout, out, NULL))
    return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

static ts_status parse_decision(parse_ctx *p, int k, json_t *pair, bool *seen) {
  if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_integer(json_array_get(pair, 0)))
    return perr(p, -1, NULL, "decision %d: expected [instruction index, decision]", k);
  json_int_t i = json_integer_value(json_array_get(pair, 0));
  json_t *v = json_array_get(pair, 1);
  if (i < 0 || i >= p->tr->n)
    return perr(p, -1, NULL, "decision %d: instruction %lld does not exist (the trace has %d)", k, (long long)i,
                p->tr->n);
  sch_inst *x = &p->tr->insts[i];
  const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
  if (!info->decision) return perr(p, (int)i, info->name, "takes no decision, but decision %d names it", k);
  if (seen[i]) return perr(p, (int)i, info->name, "has two decisions");
  seen[i] = true;
  int64_t buf[64];
  int n = 0;
  if (info->decision == 's') {
    if (!json_is_integer(v))
      return perr(p, (int)i, info->name, "the decision is %s, expected an integer index", json_type_name(v));
    buf[n++] = json_integer_value(v);
  } else {
    if (!json_is_array(v))
      return perr(p, (int)i, info->name, "the decision is %s, expected a list of integers", json_type_name(v));
    if ((int64_t)json_array_size(v) != x->attrs[0].i)
      return perr(p, (int)i, info->name, "the decision has %d tiles, but the instruction draws %lld",
                  (int)json_array_size(v), (long long)x->attrs[0].i);
    for (size_t j = 0; j < json_array_size(v); j++) {
      json_t *e = json_array_get(v, j);
      if (!json_is_integer(e))
        return perr(p, (int)i, info->name, "decision element %d is %s, expected an integer", (int)j,
                    json_type_name(e));
      buf[n++] = json_integer_value(e);
    }
  }
  sch_decision dec = {n, buf};
  ts_diag sd;
  ts_diag_clear(&sd);
  if (sch_trace_set_decision(p->tr, (int)i, &dec, &sd)) return ts_diag_set(p->d, sd.code, "%s", sd.msg);
  return TS_OK;
}

sch_trace *sch_trace_from_json(const char *text, ts_diag *d) {
  if (!text) {
    ts_diag_set(d, TS_EPARSE, "trace JSON: no text");
    return NULL;
  }
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  if (!j) {
    ts_diag_set(d, TS_EPARSE, "trace JSON: line %d column %d: %s", err.line, err.column, err.text);
    return NULL;
  }
  parse_ctx p = {.tr = sch_trace_new(), .names = json_object(), .d = d};
  bool *seen = NULL;
  ts_status st = TS_OK;
  if (!p.tr || !p.names) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  if (!json_is_array(j) || json_array_size(j) != 2 || !json_is_array(json_array_get(j, 0)) ||
      !json_is_array(json_array_get(j, 1))) {
    st = perr(&p, -1, NULL, "expected [[instructions...], [decisions...]], got %s%s", json_type_name(j),
              json_is_array(j) ? " of another shape" : "");
    goto out;
  }
  json_t *insts = json_array_get(j, 0), *decs = json_array_get(j, 1);
  for (size_t i = 0; i < json_array_size(insts) && !st; i++)
    st = parse_inst(&p, (int)i, json_array_get(insts, i));
  if (st) goto out;
  seen = ts_calloc(json_array_size(insts) + 1, sizeof *seen);
  if (!seen) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t k = 0; k < json_array_size(decs) && !st; k++)
    st = parse_decision(&p, (int)k, json_array_get(decs, k), seen);
out:
  ts_free(seen);
  json_decref(p.names);
  json_decref(j);
  if (st) {
    sch_trace_free(p.tr);
    return NULL;
  }
  return p.tr;
}

/* ---- text form ------------------------------------------------------------------ */
char *sch_trace_to_text(const sch_trace *tr) {
  int *num = rv_names(tr);
  if (!num) return NULL;
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  char buf[64];
  for (int i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
    for (int j = 0; j < x->nout; j++) {
      rv_name(tr, num, x->out[j], buf, sizeof buf);
      ts_strbuf_printf(&sb, "%s%s", j ? ", " : "", buf);
    }
    ts_strbuf_printf(&sb, "%s%s(", x->nout ? " = " : "", info->name);
    for (int j = 0; j < x->nin; j++) {
      const sch_arg *a = &x->in[j];
      if (j) ts_strbuf_append(&sb, ", ");
      switch (a->kind) {
      case SCH_ARG_RV:
        rv_name(tr, num, a->rv, buf, sizeof buf);
        ts_strbuf_append(&sb, buf);
        break;
      case SCH_ARG_NONE: ts_strbuf_append(&sb, "None"); break;
      case SCH_ARG_INT: ts_strbuf_printf(&sb, "%lld", (long long)a->i); break;
      case SCH_ARG_FLOAT: ts_strbuf_printf(&sb, "%g", a->f); break;
      case SCH_ARG_STR: ts_strbuf_printf(&sb, "\"%s\"", a->s); break;
      }
    }
    for (int j = 0; j < x->nattr; j++) {
      const sch_attr *a = &x->attrs[j];
      ts_strbuf_append(&sb, j ? ", " : "; ");
      switch (a->kind) {
      case SCH_ATTR_INT: ts_strbuf_printf(&sb, "%lld", (long long)a->i); break;
      case SCH_ATTR_BOOL: ts_strbuf_append(&sb, a->i ? "true" : "false"); break;
      case SCH_ATTR_FLOAT: ts_strbuf_printf(&sb, "%g", a->f); break;
      case SCH_ATTR_STR: ts_strbuf_printf(&sb, "\"%s\"", a->s); break;
      case SCH_ATTR_INTS:
      case SCH_ATTR_FLOATS:
        ts_strbuf_append(&sb, "[");
        for (int k = 0; k < a->n; k++) {
          if (a->kind == SCH_ATTR_INTS) ts_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)a->ints[k]);
          else ts_strbuf_printf(&sb, "%s%g", k ? ", " : "", a->floats[k]);
        }
        ts_strbuf_append(&sb, "]");
        break;
      }
    }
    ts_strbuf_append(&sb, ")");
    if (x->decision.n) {
      ts_strbuf_append(&sb, " [");
      for (int k = 0; k < x->decision.n; k++) ts_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)x->decision.v[k]);
      ts_strbuf_append(&sb, "]");
    }
    ts_strbuf_append(&sb, "\n");
  }
  ts_free(num);
  if (sb.oom) {
    ts_strbuf_fini(&sb);
    return NULL;
  }
  if (!sb.data) return ts_strdup("");
  return ts_strbuf_take(&sb);
}
