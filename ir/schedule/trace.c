/* trace.c — traces as lists of instructions over numbered random variables
 * (append, copy, decisions, dead-instruction elimination) and the traced
 * schedule: a thin wrapper that calls a concrete primitive through the
 * instruction-kind registry (trace_kinds.c) and records it on success,
 * plus the typed sch_t_* calls. Replay is trace_replay.c, the JSON form
 * trace_json.c (docs/TRACE.md). Everything that checks arguments does so
 * before touching the schedule, so a bad call never leaves a half-applied
 * instruction behind. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_int.h"

/* ---- traces ---------------------------------------------------------------- */

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
ts_status trc_append(sch_trace *tr, sch_inst_kind kind, int nin, const sch_arg *in,
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
    if (trc_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
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
        trc_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
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
        trc_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
      sch_trace_free(c);
      c = NULL;
    }
  }
  return c;
}

/* ---- the traced schedule ---------------------------------------------------- */

sch_traced *sch_traced_new(const ir_func *f, uint64_t seed, ts_diag *d) {
  sch_traced *t = ts_calloc(1, sizeof *t);
  if (t) {
    ts_arena_init(&t->arena);
    t->s = sch_create(f, seed, d); /* says why when it fails */
    t->trace = t->s ? sch_trace_new() : NULL;
  }
  if (t && t->trace) return t;
  if (!t || t->s) ts_diag_set(d, TS_ENOMEM, "out of memory creating a traced schedule");
  sch_traced_free(t);
  return NULL;
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
  if (!t->failed || !ids || trc_append(t->failed, kind, nin, in, nattr, attrs, nout, ids, dec)) {
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
    if (trc_append(c, x->kind, x->nin, x->in, x->nattr, x->attrs, x->nout, x->out, &x->decision)) {
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
  ts_status st = trc_check_sig(info, nin, in, rvk, t->nrv, nattr, attrs, TS_EINVAL, info->name, d);
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
  int want = trc_fixed_nout(info, nin, attrs);
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
  if (trc_append(t->trace, kind, nin, in, nattr, attrs, c.nout, ids, c.used.n ? &c.used : NULL))
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

ts_status sch_t_set_dtype(sch_traced *t, int b, int write_index, ir_dtype dtype, ts_diag *d) {
  char dt[16];
  ir_dtype_str(dtype, dt, sizeof dt);
  sch_arg a = sch_arg_rv(b);
  sch_attr at[2] = {at_int(write_index), at_str(dt)};
  return call1(t, SCH_I_SET_DTYPE, 1, &a, 2, at, NULL, d);
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

ts_status sch_t_shift_to_unsigned(sch_traced *t, int b, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(b);
  const int *o;
  int n;
  ts_status st = sch_traced_call(t, SCH_I_SHIFT_TO_UNSIGNED, 1, &a, 0, NULL, NULL, &o, &n, d);
  if (!st && out) {
    out[0] = n > 0 ? o[0] : -1;
    out[1] = n > 1 ? o[1] : -1;
  }
  return st;
}

ts_status sch_t_pad_einsum(sch_traced *t, int b, int n, const int64_t *mult, int *out, ts_diag *d) {
  sch_arg a = sch_arg_rv(b);
  sch_attr at = {.kind = SCH_ATTR_INTS, .n = n, .ints = (int64_t *)mult};
  return call1(t, SCH_I_PAD_EINSUM, 1, &a, 1, &at, out, d);
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
  char dt[16];
  if (m->dtype.lanes) ir_dtype_str(m->dtype, dt, sizeof dt);
  sch_attr at[4] = {{.kind = SCH_ATTR_INT, .i = m->param},
                    {.kind = SCH_ATTR_INTS, .n = 3 * m->ncomp, .ints = comps},
                    {.kind = SCH_ATTR_INTS, .n = m->naxes, .ints = groups},
                    {.kind = SCH_ATTR_STR, .s = dt}};
  return sch_traced_call(t, SCH_I_TRANSFORM_LAYOUT, 0, NULL, m->dtype.lanes ? 4 : 3, at, NULL, NULL, NULL, d);
}

ts_status sch_t_enter_postproc(sch_traced *t, ts_diag *d) {
  return sch_traced_call(t, SCH_I_ENTER_POSTPROC, 0, NULL, 0, NULL, NULL, NULL, NULL, d);
}
