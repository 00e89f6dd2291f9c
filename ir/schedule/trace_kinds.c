/* trace_kinds.c — the instruction-kind registry: one row per primitive
 * (name, purity, signature, apply), the signature checks every call and
 * every parsed trace goes through, and the apply functions that resolve an
 * instruction's arguments and call the concrete primitive (docs/TRACE.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_int.h"

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

const char *trc_sig_name(char c) {
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
ts_status trc_check_sig(const sch_inst_kind_info *info, int nin, const sch_arg *in, const char *rvk_of,
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
                         trc_sig_name(c));
    if (in[i].kind == SCH_ARG_STR && !in[i].s)
      return ts_diag_set(d, code, "%s: input %d is a NULL string", prefix, i);
  }
  int nmin, na = trc_attr_count(info, &nmin);
  if (nattr < nmin || nattr > na) {
    if (nmin == na)
      return ts_diag_set(d, code, "%s: %s takes %d attr%s, got %d", prefix, info->name, na, na == 1 ? "" : "s",
                         nattr);
    return ts_diag_set(d, code, "%s: %s takes %d to %d attrs, got %d", prefix, info->name, nmin, na, nattr);
  }
  for (int i = 0; i < nattr; i++)
    if (!attr_fits(trc_attr_sig(info, i), &attrs[i]))
      return ts_diag_set(d, code, "%s: attr %d should be %s", prefix, i, trc_sig_name(trc_attr_sig(info, i)));
  return TS_OK;
}

int trc_attr_count(const sch_inst_kind_info *info, int *min) {
  const char *q = strchr(info->attrs, '?');
  int n = (int)strlen(info->attrs);
  *min = q ? (int)(q - info->attrs) : n;
  return q ? n - 1 : n;
}

char trc_attr_sig(const sch_inst_kind_info *info, int j) {
  const char *q = strchr(info->attrs, '?');
  return q && j >= (int)(q - info->attrs) ? info->attrs[j + 1] : info->attrs[j];
}

/* The number of outputs a kind's signature fixes, or -1 if the primitive
 * decides. */
int trc_fixed_nout(const sch_inst_kind_info *info, int nin, const sch_attr *attrs) {
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

/* The blocks fn lists for the input block, as outputs. */
static ts_status blocks_of(sch_apply_ctx *c,
                           ts_status (*fn)(sch_state *, sch_block, sch_block **, int *, ts_diag *)) {
  sch_block *b;
  int n;
  ts_status st = fn(c->s, c->in[0].block, &b, &n, c->d);
  return st ? st : out_blocks(c, n, b);
}
static ts_status ap_get_producers(sch_apply_ctx *c) { return blocks_of(c, sch_get_producers); }
static ts_status ap_get_consumers(sch_apply_ctx *c) { return blocks_of(c, sch_get_consumers); }

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
static ts_status compute_at_either(sch_apply_ctx *c, bool reverse) {
  sch_loop l = c->in[1].loop;
  sch_block b = c->in[0].block;
  if (l.mark == SCH_LOC_ROOT) {
    sch_path p;
    return sch_find_block(c->s, b.name, &p, reverse ? "reverse_compute_at" : "compute_at", c->d);
  }
  if (l.mark == SCH_LOC_INLINE)
    return reverse ? sch_reverse_compute_inline(c->s, b, c->d) : sch_compute_inline(c->s, b, c->d);
  bool preserve = c->attrs[0].i != 0;
  int index = (int)c->attrs[1].i;
  return reverse ? sch_reverse_compute_at(c->s, b, l, preserve, index, c->d)
                 : sch_compute_at(c->s, b, l, preserve, index, c->d);
}

static ts_status ap_compute_at(sch_apply_ctx *c) { return compute_at_either(c, false); }
static ts_status ap_reverse_compute_at(sch_apply_ctx *c) { return compute_at_either(c, true); }

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

static ts_status ap_set_dtype(sch_apply_ctx *c) {
  ir_dtype dt;
  if (!ir_dtype_parse(c->attrs[1].s, &dt) || dt.lanes != 1)
    return ts_diag_set(c->d, TS_ESCHEDULE, "SetDType: '%s' is no scalar dtype", c->attrs[1].s);
  return sch_set_dtype(c->s, c->in[0].block, (int)c->attrs[0].i, dt, c->d);
}

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

static ts_status ap_shift_to_unsigned(sch_apply_ctx *c) {
  sch_block out[2];
  ts_status st = sch_shift_to_unsigned(c->s, c->in[0].block, out, c->d);
  return st ? st : out_blocks(c, 2, out);
}

static ts_status ap_pad_einsum(sch_apply_ctx *c) {
  sch_block out;
  ts_status st = sch_pad_einsum(c->s, c->in[0].block, c->attrs[0].n, c->attrs[0].ints, &out, c->d);
  return st ? (st == TS_EINVAL ? TS_ESCHEDULE : st) : out_blocks(c, 1, &out);
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
    [SCH_I_TRANSFORM_LAYOUT] = {"TransformLayout", false, "", "iII?s", 0, 0, 0, ap_transform_layout},
    [SCH_I_SHIFT_TO_UNSIGNED] = {"ShiftToUnsigned", false, "B", "", 'b', 2, 0, ap_shift_to_unsigned},
    [SCH_I_PAD_EINSUM] = {"PadEinsum", false, "B", "I", 'b', 1, 0, ap_pad_einsum},
    [SCH_I_SET_DTYPE] = {"SetDType", false, "B", "is", 0, 0, 0, ap_set_dtype},
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
