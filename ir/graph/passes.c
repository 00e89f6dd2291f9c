/* passes.c — the pass registry and pipeline, and the small passes: constant
 * folding (shape arithmetic included, by running the op's legalised PrimFunc
 * on the reference interpreter), batch-norm folding, simplification of
 * no-op nodes, the Winograd rewrite of 3x3 convolutions, weight layout
 * rewrite and dead-code elimination.
 * Legalisation is legalize.c, fusion fuse.c. docs/PASSES.md describes each. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../interp.h"
#include "ops.h"
#include "passes_int.h"

typedef struct pass_def {
  const char *name;
  ts_status (*fn)(tg_graph *g, ts_diag *d);
} pass_def;

static const pass_def passes[] = {
    {"qdq", tg_pass_qdq},
    {"fold_constants", tg_pass_fold_constants}, {"fold_batchnorm", tg_pass_fold_batchnorm},
    {"simplify", tg_pass_simplify},             {"winograd", tg_pass_winograd},
    {"nchwc", tg_pass_nchwc},                   {"legalize", tg_pass_legalize},
    {"layout_rewrite", tg_pass_layout_rewrite}, {"fuse", tg_pass_fuse},
    {"dce", tg_pass_dce},
};
#define NPASSES ((int)(sizeof passes / sizeof passes[0]))

static const char *const pass_names[NPASSES] = {"qdq",      "fold_constants", "fold_batchnorm", "simplify",
                                                "winograd", "nchwc",          "legalize",       "layout_rewrite",
                                                "fuse",     "dce"};

const char *const *tg_pass_names(int *n) {
  if (n) *n = NPASSES;
  return pass_names;
}

static int find_pass(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (!strcmp(passes[i].name, name)) return i;
  return -1;
}

static ts_status unknown_pass(const char *name, ts_diag *d) {
  char list[256] = "";
  for (int i = 0; i < NPASSES; i++) {
    strcat(list, i ? ", " : "");
    strcat(list, passes[i].name);
  }
  return ts_diag_set(d, TS_ENOTFOUND, "unknown pass '%s'; valid passes: %s", name, list);
}

ts_status tg_run_pass(tg_graph *g, const char *name, ts_diag *d) {
  int i = name ? find_pass(name) : -1;
  if (i < 0) return unknown_pass(name ? name : "(null)", d);
  ts_status st = passes[i].fn(g, d);
  if (st == TS_OK && ts_debug("passes")) {
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    tg_graph_print(g, &sb);
    fprintf(stderr, "[passes] after %s:\n%s", name, sb.data ? sb.data : "");
    ts_strbuf_fini(&sb);
  }
  return st;
}

ts_status tg_run_pipeline(tg_graph *g, const char *stop_after, ts_diag *d) {
  int last = NPASSES - 1;
  if (stop_after) {
    last = find_pass(stop_after);
    if (last < 0) return unknown_pass(stop_after, d);
  }
  for (int i = 0; i <= last; i++) {
    ts_status st = tg_run_pass(g, passes[i].name, d);
    if (st != TS_OK) return st;
  }
  return TS_OK;
}

ts_status tg_run_pipeline_opts(tg_graph *g, const char *stop_after, const tg_pass_opts *o, ts_diag *d) {
  if (stop_after && find_pass(stop_after) < 0) return unknown_pass(stop_after, d);
  if (o) g->opts = *o;
  else memset(&g->opts, 0, sizeof g->opts);
  return tg_run_pipeline(g, stop_after, d);
}

static const char *const winograd_names[] = {"on", "off", "all"};

/* "conv_layout" = nchw | nchwc (the block from the target) | nchwc<B> (B in
 * 1..64, a power of two). */
static ts_status conv_layout_set(tg_pass_opts *o, const char *name, const char *value, ts_diag *d) {
  if (!strcmp(value, "nchw") || !strcmp(value, "nchwc")) {
    o->conv_block = value[4] ? -1 : 0;
    return TS_OK;
  }
  int64_t b;
  if (!strncmp(value, "nchwc", 5) && ts_parse_i64(value + 5, 1, 64, &b, NULL) && !(b & (b - 1))) {
    o->conv_block = (int)b;
    return TS_OK;
  }
  return ts_diag_set(d, TS_EINVAL, "%s: '%s' is not nchw, nchwc or nchwc<B> (B a power of two up to 64)", name, value);
}

ts_status tg_pass_opts_set(tg_pass_opts *o, const char *name, const char *value, ts_diag *d) {
  if (!strcmp(name, "winograd")) {
    for (int i = 0; i < 3; i++)
      if (!strcmp(value, winograd_names[i])) {
        o->winograd = (tg_winograd_mode)i;
        return TS_OK;
      }
    return ts_diag_set(d, TS_EINVAL, "winograd: '%s' is not on, off or all", value);
  }
  if (!strcmp(name, "winograd_tile") || !strcmp(name, "winograd-tile")) {
    if (strcmp(value, "2") && strcmp(value, "4"))
      return ts_diag_set(d, TS_EINVAL, "%s: '%s' is not 2 or 4 (F(2x2, 3x3) or F(4x4, 3x3))", name, value);
    o->winograd_tile = value[0] == '4' ? 0 : 2;
    return TS_OK;
  }
  if (!strcmp(name, "qdq") && !strcmp(value, "nchw")) {
    o->qdq_off = false;
    o->qdq_nchw = true;
    return TS_OK;
  }
  if (!strcmp(name, "qdq")) o->qdq_nchw = false;
  if (!strcmp(name, "polyphase") || !strcmp(name, "qdq")) {
    if (strcmp(value, "on") && strcmp(value, "off"))
      return ts_diag_set(d, TS_EINVAL, "%s: '%s' is not on or off%s", name, value,
                         strcmp(name, "qdq") ? "" : " (or nchw)");
    *(!strcmp(name, "qdq") ? &o->qdq_off : &o->polyphase_off) = !strcmp(value, "off");
    return TS_OK;
  }
  if (!strcmp(name, "conv_layout") || !strcmp(name, "conv-layout")) return conv_layout_set(o, name, value, d);
  return ts_diag_set(d, TS_EINVAL, "unknown graph option '%s' (winograd, winograd_tile, polyphase, qdq, conv_layout)",
                     name);
}

/* Appends ",name=value" (no comma first) to buf. */
static void opt_put(char *buf, size_t n, const char *name, const char *value) {
  size_t l = strlen(buf);
  if (l < n) snprintf(buf + l, n - l, "%s%s=%s", l ? "," : "", name, value);
}

const char *tg_pass_opts_str(const tg_pass_opts *o, char *buf, size_t n) {
  if (!n) return buf;
  buf[0] = 0;
  if (o->winograd) opt_put(buf, n, "winograd", winograd_names[o->winograd]);
  if (o->winograd_tile == 2) opt_put(buf, n, "winograd_tile", "2");
  if (o->polyphase_off) opt_put(buf, n, "polyphase", "off");
  if (o->qdq_off) opt_put(buf, n, "qdq", "off");
  if (o->qdq_nchw) opt_put(buf, n, "qdq", "nchw");
  /* the model compiler's default is nchwc with the target's block (-1) */
  if (o->conv_block >= 0) {
    char v[32];
    if (o->conv_block == 0) snprintf(v, sizeof v, "nchw");
    else snprintf(v, sizeof v, "nchwc%d", o->conv_block);
    opt_put(buf, n, "conv_layout", v);
  }
  return buf;
}

ts_status tg_pass_opts_parse(const char *s, tg_pass_opts *o, ts_diag *d) {
  memset(o, 0, sizeof *o);
  o->conv_block = -1; /* the model compiler's default, which the string leaves out */
  while (s && *s) {
    const char *comma = strchr(s, ','), *end = comma ? comma : s + strlen(s), *eq = memchr(s, '=', (size_t)(end - s));
    char name[32], value[32];
    if (!eq || (size_t)(eq - s) >= sizeof name || (size_t)(end - eq - 1) >= sizeof value)
      return ts_diag_set(d, TS_EPARSE, "graph options '%s': expected name=value,...", s);
    snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
    snprintf(value, sizeof value, "%.*s", (int)(end - eq - 1), eq + 1);
    ts_status st = tg_pass_opts_set(o, name, value, d);
    if (st != TS_OK) return st;
    s = comma ? comma + 1 : end;
  }
  return TS_OK;
}

int tg_count_called_funcs(const tg_graph *g) {
  int cnt = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead || n->op != TG_OP_CALL || !n->callee) continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) {
      const tg_node *p = g->nodes[j];
      seen = !p->dead && p->op == TG_OP_CALL && p->callee && !strcmp(p->callee, n->callee);
    }
    if (!seen) cnt++;
  }
  return cnt;
}

/* ---- helpers -------------------------------------------------------------------- */

bool tg_is_graph_output(const tg_graph *g, int vid) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == vid) return true;
  return false;
}

static bool all_static(const tg_value *v) { return tg_value_is_static(v); }

/* A value name not yet in g: base, base_1, base_2 ... (stack buffer). */
const char *tg_fresh_value_name(const tg_graph *g, const char *base, char *buf, size_t n) {
  snprintf(buf, n, "%s", base);
  for (int i = 1; tg_value_find(g, buf) >= 0; i++) snprintf(buf, n, "%s_%d", base, i);
  return buf;
}

/* Adds a constant value with the given dims and data. Returns its id or -1. */
int tg_add_const(tg_graph *g, const char *base, ir_dtype dt, int nd, const tg_dim *dims, const void *data,
                     size_t nbytes, ts_diag *d) {
  char name[256];
  tg_fresh_value_name(g, base, name, sizeof name);
  int id = tg_value_add(g, name, TG_V_CONST, dt, nd, dims, d);
  if (id < 0) return -1;
  if (tg_value_set_data(g, id, data, nbytes, d) != TS_OK) return -1;
  return id;
}

/* Turns value vid into a constant holding t's data (the node producing it is
 * marked dead by the caller). */
static ts_status make_const(tg_graph *g, int vid, const ir_tensor *t, ts_diag *d) {
  tg_value *v = g->values[vid];
  size_t nbytes = (size_t)ir_tensor_numel(t) * (size_t)ir_dtype_bytes(t->dtype);
  ts_status st = tg_value_set_data(g, vid, t->data, nbytes, d);
  if (st != TS_OK) return st;
  v->kind = TG_V_CONST;
  v->producer = -1;
  return TS_OK;
}

/* ---- fold_constants -------------------------------------------------------------- */

#define FOLD_MAX_ELEMS (INT64_C(1) << 24)

static bool foldable_op(tg_op op) {
  return op != TG_OP_CALL && op != TG_OP_CONSTANT && op != TG_OP_COUNT;
}

static ts_status set_const(tg_graph *g, tg_node *n, tg_value *y, const void *data, size_t nbytes, ts_diag *d) {
  ts_status st = tg_value_set_data(g, y->id, data, nbytes, d);
  if (st != TS_OK) return st;
  y->kind = TG_V_CONST;
  y->producer = -1;
  n->dead = true;
  return TS_OK;
}

/* Shape of a value whose dims are all constant needs no data at all. */
static ts_status fold_shape(tg_graph *g, tg_node *n, bool *done, ts_diag *d) {
  *done = false;
  const tg_value *x = g->values[n->inputs[0]];
  if (!all_static(x)) return TS_OK;
  int r = x->ndim;
  int64_t st = tg_attr_int(n, "start", 0), en = tg_attr_int(n, "end", r);
  tg_shape_range(r, &st, &en);
  int64_t vals[8];
  int cnt = 0;
  for (int64_t i = st; i < en; i++) vals[cnt++] = x->dims[i].value;
  tg_value *y = g->values[n->outputs[0]];
  if (y->dtype.code != IR_I64 || tg_value_numel(y) != cnt)
    return ts_diag_set(d, TS_ESHAPE, "node '%s' (Shape): output %s does not hold %d i64 dims", n->name, y->name,
                       cnt);
  ts_status s = set_const(g, n, y, vals, (size_t)cnt * sizeof(int64_t), d);
  *done = s == TS_OK;
  return s;
}

/* Evaluates node n (all inputs constant) on the interpreter. */
static ts_status fold_eval(tg_graph *g, tg_node *n, ts_diag *d) {
  ts_status st = lg_normalize(g, n, d);
  if (st != TS_OK) return st;
  for (int i = 0; i < n->nout; i++) {
    const tg_value *y = g->values[n->outputs[i]];
    if (!all_static(y) || tg_value_numel(y) > FOLD_MAX_ELEMS) return TS_OK; /* leave it to run time */
  }
  ir_module *scratch = ir_module_new();
  if (!scratch) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ir_func *f = NULL;
  ts_diag ld;
  ts_diag_clear(&ld);
  st = lg_node_func(g, n, scratch, &f, &ld);
  if (st == TS_EUNSUPPORTED) { /* not ours to fold; legalize will report it if it matters */
    ir_module_free(scratch);
    return TS_OK;
  }
  if (st != TS_OK) {
    ir_module_free(scratch);
    return ts_diag_set(d, st, "folding constants: %s", ld.msg);
  }
  ir_tensor args[80];
  int na = 0;
  memset(args, 0, sizeof args);
  for (int i = 0; i < n->nin && st == TS_OK; i++) {
    if (n->inputs[i] < 0) continue;
    const tg_value *v = g->values[n->inputs[i]];
    ir_tensor *t = &args[na++];
    t->dtype = v->dtype;
    t->ndim = v->ndim;
    for (int k = 0; k < v->ndim; k++) t->shape[k] = v->dims[k].value;
    t->data = v->data; /* read-only: the interpreter never writes inputs */
  }
  int first_out = na;
  for (int i = 0; i < n->nout && st == TS_OK; i++) {
    const tg_value *y = g->values[n->outputs[i]];
    int64_t shp[8];
    for (int k = 0; k < y->ndim; k++) shp[k] = y->dims[k].value;
    st = ir_tensor_alloc(&args[na++], y->dtype, y->ndim, shp);
    if (st != TS_OK) ts_diag_set(d, st, "out of memory folding '%s'", n->name);
  }
  if (st == TS_OK) {
    ts_diag_clear(&ld);
    st = ir_interp_run(f, args, &ld);
    if (st != TS_OK) ts_diag_set(d, st, "node '%s' (%s): evaluating on constants: %s", n->name,
                                 tg_op_name(n->op), ld.msg);
  }
  for (int i = 0; i < n->nout && st == TS_OK; i++) st = make_const(g, n->outputs[i], &args[first_out + i], d);
  if (st == TS_OK) n->dead = true;
  for (int i = first_out; i < na; i++) ir_tensor_free(&args[i]);
  ir_module_free(scratch);
  return st;
}

static ts_status fold_constant_node(tg_graph *g, tg_node *n, ts_diag *d) {
  /* the importer turns Constant nodes into constants; a hand-built graph may
   * still have one with value_float(s) / value_int(s) */
  tg_value *y = g->values[n->outputs[0]];
  if (y->data) {
    y->kind = TG_V_CONST;
    y->producer = -1;
    n->dead = true;
    return TS_OK;
  }
  const tg_attr *a;
  int64_t numel = tg_value_numel(y);
  if ((a = tg_node_attr(n, "value_float")) && y->dtype.code == IR_F32 && numel == 1) {
    float f = (float)a->f;
    return set_const(g, n, y, &f, sizeof f, d);
  }
  if ((a = tg_node_attr(n, "value_int")) && y->dtype.code == IR_I64 && numel == 1) {
    int64_t v = a->i;
    return set_const(g, n, y, &v, sizeof v, d);
  }
  if ((a = tg_node_attr(n, "value_ints")) && a->kind == TG_A_INTS && y->dtype.code == IR_I64 && numel == a->n)
    return set_const(g, n, y, a->ints, (size_t)a->n * sizeof(int64_t), d);
  if ((a = tg_node_attr(n, "value_floats")) && a->kind == TG_A_FLOATS && y->dtype.code == IR_F32 &&
      numel == a->n) {
    float *buf = ts_malloc((size_t)a->n * sizeof(float) + 1);
    if (!buf) return ts_diag_set(d, TS_ENOMEM, "out of memory folding '%s'", n->name);
    for (int i = 0; i < a->n; i++) buf[i] = (float)a->floats[i];
    ts_status st = set_const(g, n, y, buf, (size_t)a->n * sizeof(float), d);
    ts_free(buf);
    return st;
  }
  return ts_diag_set(d, TS_EUNSUPPORTED,
                     "node '%s' (Constant): no value this pass can read (value_float(s)/value_int(s) of the "
                     "output's dtype and size, or data on the output value)",
                     n->name);
}

ts_status tg_pass_fold_constants(tg_graph *g, ts_diag *d) {
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    ts_status st = TS_OK;
    if (n->op == TG_OP_CONSTANT) {
      st = fold_constant_node(g, n, d);
    } else if (n->op == TG_OP_SHAPE) {
      bool done;
      st = fold_shape(g, n, &done, d);
    } else if (foldable_op(n->op) && (n->nin > 0 || (tg_op_def_of(n->op)->flags & TG_OPF_NO_INPUTS))) {
      bool all_const = true;
      for (int j = 0; j < n->nin && all_const; j++)
        all_const = n->inputs[j] < 0 || g->values[n->inputs[j]]->kind == TG_V_CONST;
      if (all_const) st = fold_eval(g, n, d);
    }
    if (st != TS_OK) return st;
  }
  return tg_pass_dce(g, d);
}

/* ---- fold_batchnorm --------------------------------------------------------------- */

static const float *f32_data(const tg_graph *g, int vid, int64_t want) {
  if (vid < 0) return NULL;
  const tg_value *v = g->values[vid];
  if (v->kind != TG_V_CONST || !v->data || v->dtype.code != IR_F32 || tg_value_numel(v) != want) return NULL;
  return v->data;
}

static ts_status fold_bn_with(tg_graph *g, tg_node *bn, int64_t C, double eps, const float *scale,
                              const float *bias, const float *mean, const float *var, float *s, float *sh,
                              float *nb, ts_diag *d);

static ts_status fold_one_bn(tg_graph *g, tg_node *bn, ts_diag *d) {
  if (bn->nin < 5 || tg_attr_int(bn, "training_mode", 0) || bn->nout < 1) return TS_OK;
  for (int j = 1; j < bn->nout; j++)
    if (bn->outputs[j] >= 0 && tg_value_consumers(g, bn->outputs[j], NULL, 0) > 0) return TS_OK;
  const tg_value *x = g->values[bn->inputs[0]];
  if (x->ndim < 2 || x->dims[1].sym || x->dtype.code != IR_F32) return TS_OK;
  int64_t C = x->dims[1].value;
  const float *scale = f32_data(g, bn->inputs[1], C), *bias = f32_data(g, bn->inputs[2], C),
              *mean = f32_data(g, bn->inputs[3], C), *var = f32_data(g, bn->inputs[4], C);
  if (!scale || !bias || !mean || !var) return TS_OK;
  double eps = tg_attr_float(bn, "epsilon", 1e-5);
  float *s = ts_malloc((size_t)(3 * C) * sizeof(float)), *sh = s ? s + C : NULL, *nb = s ? s + 2 * C : NULL;
  if (!s) return ts_diag_set(d, TS_ENOMEM, "out of memory folding batch norm '%s'", bn->name);
  ts_status st = fold_bn_with(g, bn, C, eps, scale, bias, mean, var, s, sh, nb, d);
  ts_free(s);
  return st;
}

static ts_status fold_bn_with(tg_graph *g, tg_node *bn, int64_t C, double eps, const float *scale,
                              const float *bias, const float *mean, const float *var, float *s, float *sh,
                              float *nb, ts_diag *d) {
  const tg_value *x = g->values[bn->inputs[0]];
  for (int64_t c = 0; c < C; c++) {
    s[c] = (float)(scale[c] / sqrt((double)var[c] + eps));
    sh[c] = (float)(bias[c] - mean[c] * (double)s[c]);
  }
  int yv = bn->outputs[0];
  int xp = x->producer;
  tg_node *conv = xp >= 0 ? g->nodes[xp] : NULL;
  bool into_conv = conv && !conv->dead && conv->op == TG_OP_CONV && conv->nout == 1 &&
                   tg_value_consumers(g, x->id, NULL, 0) == 1 && !tg_is_graph_output(g, x->id);
  const float *w = NULL, *cb = NULL;
  if (into_conv) {
    const tg_value *wv = g->values[conv->inputs[1]];
    int64_t wn = tg_value_numel(wv);
    w = wn > 0 && wv->dims[0].value == C ? f32_data(g, conv->inputs[1], wn) : NULL;
    if (conv->nin > 2 && conv->inputs[2] >= 0) {
      cb = f32_data(g, conv->inputs[2], C);
      if (!cb) w = NULL;
    }
    into_conv = w != NULL;
  }
  if (into_conv) {
    /* W'[o] = W[o] * s[o]; b'[o] = (b[o] - mean[o]) * s[o] + B[o] */
    const tg_value *wv = g->values[conv->inputs[1]];
    int64_t wn = tg_value_numel(wv), per = wn / C;
    float *nw = ts_malloc((size_t)wn * sizeof(float));
    if (!nw) return ts_diag_set(d, TS_ENOMEM, "out of memory folding batch norm '%s'", bn->name);
    for (int64_t o = 0; o < C; o++)
      for (int64_t i = 0; i < per; i++) nw[o * per + i] = w[o * per + i] * s[o];
    for (int64_t o = 0; o < C; o++) nb[o] = (cb ? cb[o] : 0.0f) * s[o] + sh[o];
    char base[200];
    snprintf(base, sizeof base, "%s_bnfolded", wv->name);
    int wid = tg_add_const(g, base, wv->dtype, wv->ndim, wv->dims, nw, (size_t)wn * sizeof(float), d);
    ts_free(nw);
    if (wid < 0) return d && d->code ? d->code : TS_ENOMEM;
    tg_dim bd = {C, NULL};
    snprintf(base, sizeof base, "%s_bias", bn->name);
    int bid = tg_add_const(g, base, ir_dt(IR_F32), 1, &bd, nb, (size_t)C * sizeof(float), d);
    if (bid < 0) return d && d->code ? d->code : TS_ENOMEM;
    int ins[3] = {conv->inputs[0], wid, bid};
    int *arr = TS_ANEWN(g->mod->arena, int, 3);
    if (!arr) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    memcpy(arr, ins, sizeof ins);
    conv->inputs = arr;
    conv->nin = 3;
    /* the conv now produces the batch norm's output value (its name is the
     * one consumers and graph outputs know) */
    conv->outputs[0] = yv;
    g->values[yv]->producer = conv->id;
    bn->dead = true;
    return TS_OK;
  }
  /* standalone: Y = X * s + shift with s, shift of shape [C, 1, ..] (rank r-1) */
  int r = g->values[bn->inputs[0]]->ndim;
  tg_dim cd[8];
  cd[0] = (tg_dim){C, NULL};
  for (int i = 1; i < r - 1; i++) cd[i] = (tg_dim){1, NULL};
  char base[200];
  snprintf(base, sizeof base, "%s_scale", bn->name);
  int sid = tg_add_const(g, base, ir_dt(IR_F32), r - 1, cd, s, (size_t)C * sizeof(float), d);
  snprintf(base, sizeof base, "%s_shift", bn->name);
  int hid = sid < 0 ? -1 : tg_add_const(g, base, ir_dt(IR_F32), r - 1, cd, sh, (size_t)C * sizeof(float), d);
  if (hid < 0) return d && d->code ? d->code : TS_ENOMEM;
  const tg_value *xv = g->values[bn->inputs[0]];
  snprintf(base, sizeof base, "%s_scaled", bn->name);
  char nm[256];
  int tid = tg_value_add(g, tg_fresh_value_name(g, base, nm, sizeof nm), TG_V_INTER, xv->dtype, xv->ndim, xv->dims, d);
  if (tid < 0) return d && d->code ? d->code : TS_ENOMEM;
  int min[2] = {bn->inputs[0], sid}, ain[2] = {tid, hid};
  snprintf(base, sizeof base, "%s_mul", bn->name);
  bn->dead = true; /* before adding the Add that takes over its output value */
  int mid = tg_node_add(g, TG_OP_MUL, base, 2, min, 1, &tid, d);
  if (mid < 0) return d && d->code ? d->code : TS_ENOMEM;
  snprintf(base, sizeof base, "%s_add", g->nodes[mid]->name);
  int aid = tg_node_add(g, TG_OP_ADD, base, 2, ain, 1, &yv, d);
  if (aid < 0) return d && d->code ? d->code : TS_ENOMEM;
  return TS_OK;
}

ts_status tg_pass_fold_batchnorm(tg_graph *g, ts_diag *d) {
  int nn = g->nnodes;
  bool changed = false;
  for (int i = 0; i < nn; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || n->op != TG_OP_BATCH_NORM) continue;
    ts_status st = fold_one_bn(g, n, d);
    if (st != TS_OK) return st;
    changed = true;
  }
  return changed ? tg_pass_dce(g, d) : TS_OK;
}

/* ---- simplify ------------------------------------------------------------------------ */

static bool noop_node(const tg_graph *g, const tg_node *n) {
  tg_op op = n->op;
  if (n->nin < 1 || n->inputs[0] < 0 || n->nout != 1) return false;
  const tg_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
  if (!ir_dtype_eq(x->dtype, y->dtype) || x->ndim != y->ndim) return false;
  for (int i = 0; i < x->ndim; i++)
    if (!tg_dim_eq(x->dims[i], y->dims[i])) return false;
  const tg_op_def *def = tg_op_def_of(op);
  if (def && (def->flags & TG_OPF_NOOP_SAME_SHAPE)) return true;
  switch (op) {
    case TG_OP_TRANSPOSE: {
      int c;
      const int64_t *perm = tg_attr_ints(n, "perm", &c);
      if (!perm || c != x->ndim) return x->ndim <= 1;
      for (int i = 0; i < c; i++)
        if (perm[i] != i) return false;
      return true;
    }
    case TG_OP_PAD: {
      int c;
      const int64_t *p = tg_attr_ints(n, "pads", &c);
      for (int i = 0; p && i < c; i++)
        if (p[i]) return false;
      return n->nin == 1;
    }
    case TG_OP_CONCAT:
      return n->nin == 1;
    default:
      return false;
  }
}

/* A 1x1 Conv (float or integer) with strides > 1 and no padding (ResNet's downsampling
 * projections): the kernel would read its input at a stride along the
 * vectorized W axis, a gather per vector; a Slice with those steps in front
 * and stride 1 after reads it once and leaves the Conv unit-stride loads. */
static bool strided_pointwise_conv(const tg_graph *g, const tg_node *n) {
  /* the float convolution and the integer ones (x input 0, w input 1 or QLinearConv's 3) */
  int wi = n->op == TG_OP_QLINEAR_CONV ? 3 : 1;
  if (n->dead || (n->op != TG_OP_CONV && n->op != TG_OP_CONV_INTEGER && n->op != TG_OP_QLINEAR_CONV) ||
      n->nin <= wi || n->nout != 1 || n->inputs[0] < 0 || n->inputs[wi] < 0)
    return false;
  const tg_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[wi]], *y = g->values[n->outputs[0]];
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || w->dims[2].sym || w->dims[3].sym || w->dims[2].value != 1 ||
      w->dims[3].value != 1)
    return false;
  int c;
  const int64_t *st = tg_attr_ints(n, "strides", &c);
  if (!st || c != 2 || st[0] < 1 || st[1] < 1 || (st[0] == 1 && st[1] == 1)) return false;
  const int64_t *p = tg_attr_ints(n, "pads", &c);
  for (int i = 0; p && i < c; i++)
    if (p[i]) return false;
  const char *ap = tg_attr_str(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return false;
  /* the nchwc pass's convolutions read the strided input as broadcast
   * scalars of contiguous rows: no Slice (it would be a layout border) */
  int blk = g->opts.conv_block < 0 ? 8 : g->opts.conv_block;
  if (n->op == TG_OP_CONV && blk && !y->dims[1].sym && y->dims[1].value % blk == 0) return false;
  /* the output's spatial dims are the Slice's: ceil(H / s) */
  for (int i = 2; i < 4; i++)
    if (x->dims[i].sym || y->dims[i].sym || y->dims[i].value != (x->dims[i].value + st[i - 2] - 1) / st[i - 2])
      return false;
  return true;
}

static ts_status subsample_conv_input(tg_graph *g, int i, ts_diag *d) {
  tg_node *n = g->nodes[i];
  const int64_t *st = tg_attr_ints(n, "strides", NULL);
  int64_t s0 = st[0], s1 = st[1];
  const tg_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
  tg_dim dims[4] = {x->dims[0], x->dims[1], y->dims[2], y->dims[3]};
  char base[200], nm[256];
  snprintf(base, sizeof base, "%s_subsampled", n->name);
  int sv = tg_value_add(g, tg_fresh_value_name(g, base, nm, sizeof nm), TG_V_INTER, x->dtype, 4, dims, d);
  if (sv < 0) return d && d->code ? d->code : TS_ENOMEM;
  int xin = g->nodes[i]->inputs[0];
  int sid = tg_node_add(g, TG_OP_SLICE, base, 1, &xin, 1, &sv, d);
  if (sid < 0) return d && d->code ? d->code : TS_ENOMEM;
  tg_node *sl = g->nodes[sid];
  n = g->nodes[i];
  int64_t starts[2] = {0, 0}, ends[2] = {INT64_MAX, INT64_MAX}, axes[2] = {2, 3}, steps[2] = {s0, s1}, one[2] = {1, 1};
  tg_attr at[4] = {{.name = "starts", .kind = TG_A_INTS, .n = 2, .ints = starts},
                   {.name = "ends", .kind = TG_A_INTS, .n = 2, .ints = ends},
                   {.name = "axes", .kind = TG_A_INTS, .n = 2, .ints = axes},
                   {.name = "steps", .kind = TG_A_INTS, .n = 2, .ints = steps}};
  tg_attr sa = {.name = "strides", .kind = TG_A_INTS, .n = 2, .ints = one};
  for (int k = 0; k < 4; k++)
    if (tg_node_set_attr(g, sl, &at[k]) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  if (tg_node_set_attr(g, n, &sa) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  n->inputs[0] = sv;
  return TS_OK;
}

ts_status tg_pass_simplify(tg_graph *g, ts_diag *d) {
  bool changed = false;
  for (int i = 0, nn = g->nnodes; i < nn; i++) {
    if (!strided_pointwise_conv(g, g->nodes[i])) continue;
    ts_status st = subsample_conv_input(g, i, d);
    if (st != TS_OK) return st;
    changed = true;
  }
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || !noop_node(g, n)) continue;
    int y = n->outputs[0], x = n->inputs[0];
    /* a graph output keeps its name: replace it only if x is an
     * intermediate nobody else names as an output */
    if (tg_is_graph_output(g, y)) continue;
    tg_replace_uses(g, y, x);
    n->dead = true;
    changed = true;
  }
  return changed ? tg_pass_dce(g, d) : TS_OK;
}

/* ---- layout_rewrite ------------------------------------------------------------------ */

/* Transposes a constant 2-d value [N, K] (Gemm's B with transB=1) into a new
 * constant [K, N]. */
static int transposed_const(tg_graph *g, int vid, ts_diag *d) {
  const tg_value *v = g->values[vid];
  int64_t N = v->dims[0].value, K = v->dims[1].value;
  size_t es = (size_t)ir_dtype_bytes(v->dtype);
  unsigned char *buf = ts_malloc((size_t)(K * N) * es + 1);
  if (!buf) {
    ts_diag_set(d, TS_ENOMEM, "out of memory packing %s", v->name);
    return -1;
  }
  const unsigned char *src = v->data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) memcpy(buf + (size_t)(k * N + n) * es, src + (size_t)(n * K + k) * es, es);
  tg_dim dims[2] = {{K, NULL}, {N, NULL}};
  char base[256];
  snprintf(base, sizeof base, "%s_packed_kn", v->name);
  int id = tg_add_const(g, base, v->dtype, 2, dims, buf, (size_t)(K * N) * es, d);
  ts_free(buf);
  return id;
}

static bool const_2d(const tg_graph *g, int vid) {
  if (vid < 0) return false;
  const tg_value *v = g->values[vid];
  return v->kind == TG_V_CONST && v->data && v->ndim == 2 && tg_value_is_static(v);
}

/* The layout every CPU schedule here reads best is B [K, N], the output axis
 * contiguous: the register-tiled default and the plain schedule both
 * vectorize the innermost output axis, so B's loads are unit-stride vectors
 * (B [N, K] made them gathers: ConvNeXt-Tiny's pointwise MatMuls ran at a
 * fifth of the speed). MatMul's B already is [K, N]; a Gemm with transB=1
 * and a constant B gets it transposed and transB=0. */
ts_status tg_pass_layout_rewrite(tg_graph *g, ts_diag *d) {
  bool changed = false;
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || n->nin < 2) continue;
    if (lg_node_op(n) != TG_OP_GEMM || !tg_attr_int(n, "transB", 0) || !const_2d(g, n->inputs[1])) continue;
    int nb = transposed_const(g, n->inputs[1], d);
    if (nb < 0) return d && d->code ? d->code : TS_ENOMEM;
    n = g->nodes[i];
    tg_attr a = {.name = "transB", .kind = TG_A_INT, .i = 0};
    if (tg_node_set_attr(g, n, &a) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    n->inputs[1] = nb;
    if (n->op == TG_OP_CALL) {
      ir_func *f = NULL;
      ts_status st = lg_node_func(g, n, g->mod, &f, d);
      if (st != TS_OK) return st;
      n->callee = f->name;
    }
    changed = true;
  }
  if (!changed) return TS_OK;
  ts_status st = tg_pass_dce(g, d);
  return st;
}

/* ---- winograd ------------------------------------------------------------------------- */

/* F(m x m, 3x3) (Lavin & Gray): Y = AT [(G g GT) . (BT d B)] A over
 * alpha x alpha input tiles (alpha = m + 2) that overlap by 2, giving m x m
 * outputs each. F(4x4): 36 multiplies per 16 outputs and input channel where
 * the direct 3x3 convolution needs 144 (4x fewer); F(2x2): 16 per 4 (2.25x
 * fewer) with smaller transforms and exact small coefficients. Rows of a
 * form's matrices are stored at the F(4x4) width (6). */
typedef struct wg_form {
  int m, alpha;
  const char *bt_name, *at_name;
  double bt[6][6], g[6][3], at[4][6];
} wg_form;

static const wg_form wg_forms[] = {
    {4,
     6,
     "winograd_f4x3_BT",
     "winograd_f4x3_AT",
     {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0},
      {0, 4, 0, -5, 0, 1}},
     {{1.0 / 4, 0, 0},
      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
      {1.0 / 24, 1.0 / 12, 1.0 / 6},
      {1.0 / 24, -1.0 / 12, 1.0 / 6},
      {0, 0, 1}},
     {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}},
    {2,
     4,
     "winograd_f2x3_BT",
     "winograd_f2x3_AT",
     {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
     {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
     {{1, 1, 1, 0}, {0, 1, -1, -1}}},
};

/* The form of g->opts.winograd_tile. */
static const wg_form *wg_form_of(const tg_graph *g) { return &wg_forms[g->opts.winograd_tile == 2 ? 1 : 0]; }

/* g->opts.winograd as winograd_ok's mode: 0 off, 1 on for the convolutions
 * that gain from it, 2 without the size thresholds (tests). */
static int winograd_mode(const tg_graph *g) {
  switch (g->opts.winograd) {
  case TG_WINOGRAD_OFF: return 0;
  case TG_WINOGRAD_ALL: return 2;
  case TG_WINOGRAD_ON: break;
  }
  return 1;
}

static bool ints_all(const tg_node *n, const char *name, int64_t v, int want) {
  int c;
  const int64_t *a = tg_attr_ints(n, name, &c);
  if (!a) return true;
  if (c != want) return false;
  for (int i = 0; i < c; i++)
    if (a[i] != v) return false;
  return true;
}

/* A Conv the F(4x4, 3x3) rewrite applies to: 2-D, f32, 3x3 constant weights,
 * stride 1, dilation 1, one group, explicit (or no) padding, constant
 * spatial sizes; with mode 1 also at least 16 input and output channels and
 * 8 output tiles per image. */
static bool winograd_ok(const tg_graph *g, const tg_node *n, int mode) {
  if (n->dead || n->op != TG_OP_CONV || n->nin < 2 || n->nout != 1 || tg_node_attr(n, "tessel.winograd")) return false;
  const tg_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]], *y = g->values[n->outputs[0]];
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || x->dtype.code != IR_F32 || w->dtype.code != IR_F32 ||
      y->dtype.code != IR_F32)
    return false;
  if (w->kind != TG_V_CONST || !w->data || !tg_value_is_static(w)) return false;
  if (w->dims[2].value != 3 || w->dims[3].value != 3) return false;
  for (int i = 2; i < 4; i++)
    if (x->dims[i].sym || y->dims[i].sym) return false;
  if (x->dims[1].sym || x->dims[1].value != w->dims[1].value || y->dims[1].sym || y->dims[1].value != w->dims[0].value)
    return false;
  if (tg_attr_int(n, "group", 1) != 1 || !ints_all(n, "strides", 1, 2) || !ints_all(n, "dilations", 1, 2)) return false;
  const char *ap = tg_attr_str(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return false;
  int c;
  const int64_t *p = tg_attr_ints(n, "pads", &c);
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  if (p && strcmp(ap, "VALID")) {
    if (c != 4) return false;
    pt = p[0], pl = p[1], pb = p[2], pr = p[3];
  }
  if (pt < 0 || pl < 0 || pb < 0 || pr < 0 || pt > 2 || pl > 2) return false;
  if (y->dims[2].value != x->dims[2].value + pt + pb - 2 || y->dims[3].value != x->dims[3].value + pl + pr - 2)
    return false;
  if (y->dims[2].value < 1 || y->dims[3].value < 1) return false;
  /* Below 16 channels the transforms outweigh the saved multiplies; below 8
   * output tiles per image (ResNet-18's 7x7 layers: 4 tiles, 30 % of them
   * padding) the 4x larger transformed weights and the skinny matmuls do:
   * measured 4.9 ms against the direct convolution's 2.8. */
  int64_t tiles = ((y->dims[2].value + 3) / 4) * ((y->dims[3].value + 3) / 4); /* of 4x4, for either form */
  if (mode == 1 && (w->dims[0].value < 16 || w->dims[1].value < 16 || tiles < 8)) return false;
  return true;
}

static ts_status winograd_one(tg_graph *g, tg_node *n, ts_diag *d) {
  const wg_form *fm = wg_form_of(g);
  int al = fm->alpha, mo = fm->m;
  const tg_value *w = g->values[n->inputs[1]];
  int64_t K = w->dims[0].value, C = w->dims[1].value;
  const float *wd = w->data;
  size_t un = (size_t)(al * al) * (size_t)C * (size_t)K;
  float *u = ts_malloc(un * sizeof(float));
  if (!u) return ts_diag_set(d, TS_ENOMEM, "out of memory transforming the weights of '%s'", n->name);
  /* U[e][v][c][k] = sum_ij G[e][i] w[k][c][i][j] G[v][j] */
  for (int64_t k = 0; k < K; k++)
    for (int64_t ci = 0; ci < C; ci++) {
      const float *gk = wd + (k * C + ci) * 9;
      double t[6][3];
      for (int e = 0; e < al; e++)
        for (int j = 0; j < 3; j++) t[e][j] = fm->g[e][0] * gk[j] + fm->g[e][1] * gk[3 + j] + fm->g[e][2] * gk[6 + j];
      for (int e = 0; e < al; e++)
        for (int v = 0; v < al; v++)
          u[(((size_t)e * (size_t)al + (size_t)v) * (size_t)C + (size_t)ci) * (size_t)K + (size_t)k] =
              (float)(t[e][0] * fm->g[v][0] + t[e][1] * fm->g[v][1] + t[e][2] * fm->g[v][2]);
    }
  char base[200];
  snprintf(base, sizeof base, "%s_winograd", w->name);
  tg_dim ud[4] = {{al, NULL}, {al, NULL}, {C, NULL}, {K, NULL}};
  int uid = tg_add_const(g, base, ir_dt(IR_F32), 4, ud, u, un * sizeof(float), d);
  ts_free(u);
  if (uid < 0) return d && d->code ? d->code : TS_ENOMEM;
  /* already the layout the batched matmul reads best (output channels
   * innermost, as sgemm's B); re-laying it per candidate would also make
   * every candidate's verification reference a new full interpretation */
  g->values[uid]->fixed_layout = true;
  float bt[36], at[24];
  for (int i = 0; i < al * al; i++) bt[i] = (float)fm->bt[i / al][i % al];
  for (int i = 0; i < mo * al; i++) at[i] = (float)fm->at[i / al][i % al];
  /* the transform matrices: one constant each per graph (shared by every rewritten conv) */
  int bid = tg_value_find(g, fm->bt_name), aid = tg_value_find(g, fm->at_name);
  if (bid < 0) {
    tg_dim bd[2] = {{al, NULL}, {al, NULL}};
    bid = tg_add_const(g, fm->bt_name, ir_dt(IR_F32), 2, bd, bt, sizeof(float) * (size_t)(al * al), d);
  }
  if (aid < 0 && bid >= 0) {
    tg_dim ad[2] = {{mo, NULL}, {al, NULL}};
    aid = tg_add_const(g, fm->at_name, ir_dt(IR_F32), 2, ad, at, sizeof(float) * (size_t)(mo * al), d);
  }
  if (bid < 0 || aid < 0) return d && d->code ? d->code : TS_ENOMEM;
  g->values[bid]->fixed_layout = g->values[aid]->fixed_layout = true;
  /* The Winograd form's inputs are positional (x, U, bias, BT, AT) and a
   * call takes no omitted argument before a given one (legalize), so a conv
   * without a bias gets a zero one: K adds per output pixel beside the
   * transforms' 36 multiply-adds per input channel. */
  int cb = n->nin > 2 ? n->inputs[2] : -1;
  if (cb < 0) {
    float *zero = ts_calloc((size_t)K, sizeof(float));
    if (!zero) return ts_diag_set(d, TS_ENOMEM, "out of memory adding a zero bias to '%s'", n->name);
    snprintf(base, sizeof base, "%s_winograd_bias", n->name);
    tg_dim kd = {K, NULL};
    cb = tg_add_const(g, base, ir_dt(IR_F32), 1, &kd, zero, (size_t)K * sizeof(float), d);
    ts_free(zero);
    if (cb < 0) return d && d->code ? d->code : TS_ENOMEM;
  }
  int *arr = TS_ANEWN(g->mod->arena, int, 5);
  if (!arr) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  arr[0] = n->inputs[0];
  arr[1] = uid;
  arr[2] = cb;
  arr[3] = bid;
  arr[4] = aid;
  n->inputs = arr;
  n->nin = 5;
  tg_attr a = {.name = "tessel.winograd", .kind = TG_A_INT, .i = mo};
  if (tg_node_set_attr(g, n, &a) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

ts_status tg_pass_winograd(tg_graph *g, ts_diag *d) {
  int mode = winograd_mode(g);
  if (!mode) return TS_OK;
  bool changed = false;
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (!winograd_ok(g, n, mode)) continue;
    ts_status st = winograd_one(g, n, d);
    if (st != TS_OK) return st;
    changed = true;
  }
  return changed ? tg_pass_dce(g, d) : TS_OK;
}

/* ---- dce ---------------------------------------------------------------------------- */

ts_status tg_pass_dce(tg_graph *g, ts_diag *d) {
  for (int i = g->nnodes - 1; i >= 0; i--) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    bool used = false;
    for (int j = 0; j < n->nout && !used; j++) {
      int v = n->outputs[j];
      if (v < 0) continue;
      used = tg_is_graph_output(g, v) || tg_value_consumers(g, v, NULL, 0) > 0;
    }
    if (!used) n->dead = true;
  }
  ts_status st = tg_graph_compact(g, d);
  if (st != TS_OK) return st;
  lg_module_drop_unused(g);
  return TS_OK;
}
