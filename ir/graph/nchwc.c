/* nchwc.c — the nchwc pass: float convolutions in the channel-blocked layout.
 *
 * With g->opts.conv_block = b (--conv-layout nchwc; the model compiler sets b
 * from the target's vector width, 8 floats on AVX2, 16 with AVX-512), every
 * float 2-D Conv with constant channel and spatial sizes and constant weights, groups 1 or
 * depthwise (group = C = K), whose output channels are a multiple of b
 * (the batch may be symbolic),
 * computes in the layout oneDNN and MLAS use (docs/SEARCH.md,
 * "Channel-blocked convolution"):
 *   x [N, C/cb, H, W, cb], w [K/b, C/cb, R, S, cb, b] (depthwise
 *   [C/b, R, S, b]), y [N, K/b, P, Q, b]
 * with cb = b when b divides C, else cb = 1 and x stays plain NCHW (a stem
 * with 3 input channels). The node gets the attribute "tessel.nchwc" = b
 * (and "tessel.nchwc_cb" = cb); its weights are re-laid at compile time into
 * a new constant; the bias stays [K]. op_nn.c writes its kernel.
 *
 * The pass walks the graph once in topological order and keeps, for each
 * plain 4-D value, its blocked twin when one exists:
 *   - a convolution above writes its blocked output, and the old NCHW value
 *     is computed from it by Transpose [0,1,4,2,3] + Reshape (the "border
 *     out"); its blocked input is the twin of x, made by Reshape +
 *     Transpose [0,1,3,4,2] (the "border in") when x has none yet;
 *   - an elementwise or broadcasting node (the registry's pattern) whose
 *     4-D inputs have its output's channels (the other dims its output's or
 *     1), one of them with a twin, the rest single elements, runs on the
 *     twins (elementwise ops do not see the layout; a [N, C, 1, 1] twin
 *     broadcasts as its plain form does), the others crossing in;
 *     a per-channel constant ([C, 1, 1]: a batch norm before a convolution)
 *     is re-laid [1, C/b, 1, 1, b];
 *   - a channel Concat of values whose channel counts b divides, one with a
 *     twin, concatenates the twins (DenseNet);
 *   - a 2-D MaxPool or undilated AveragePool of a value with a twin pools
 *     the twin ("tessel.nchwc").
 * A border out that nothing reads any more is dropped by dce, so the
 * conversions left are the region's borders (the stem's input, the pooled
 * tail). A grouped convolution whose channels per group (in and out) the
 * block divides reads its group's input blocks (op_nn.c). A convolution whose
 * output channels the block does not divide, another grouped one, or one with
 * a symbolic channel or spatial size stays NCHW (the fallback: no padding of
 * channels). A Winograd one (the winograd pass runs first;
 * --winograd off leaves every 3x3 to this pass) keeps its transformed
 * weights and reads and writes the blocked forms when the block divides
 * both its channel counts (winograd_step). docs/PASSES.md. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "passes_int.h"

static const int64_t TO_BLOCKED[5] = {0, 1, 3, 4, 2}, FROM_BLOCKED[5] = {0, 1, 4, 2, 3};

typedef struct nc_state {
  tg_graph *g;
  int b;      /* the channel block */
  int *twin;  /* per value id: its blocked twin, or -1 */
  int ntwin;
  ts_diag *d;
} nc_state;

static ts_status nc_oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory in the nchwc pass"); }

static ts_status fail_code(ts_diag *d) { return d && d->code ? d->code : TS_ENOMEM; }

static int twin_of(const nc_state *s, int vid) { return vid >= 0 && vid < s->ntwin ? s->twin[vid] : -1; }

static ts_status set_twin(nc_state *s, int vid, int tw) {
  if (vid >= s->ntwin) {
    int n = s->g->nvalues + 64;
    int *t = ts_realloc(s->twin, (size_t)n * sizeof *t);
    if (!t) return nc_oom(s->d);
    for (int i = s->ntwin; i < n; i++) t[i] = -1;
    s->twin = t;
    s->ntwin = n;
  }
  s->twin[vid] = tw;
  return TS_OK;
}

static bool static_f32(const tg_value *v, int nd) {
  return v->ndim == nd && v->dtype.code == IR_F32 && v->dtype.lanes == 1 && tg_value_is_static(v);
}

/* An f32 activation [N, C, H, W]: N may be symbolic (a batch), the rest not. */
static bool act_f32(const tg_value *v) {
  if (v->ndim != 4 || v->dtype.code != IR_F32 || v->dtype.lanes != 1) return false;
  for (int i = 1; i < 4; i++)
    if (v->dims[i].sym) return false;
  return true;
}

/* A Reshape's shape attribute for dims: a symbolic dim is 0 (copied from
 * the input's, which is the same symbol). */
static void shape_attr(const tg_dim *dims, int nd, int64_t *out) {
  for (int i = 0; i < nd; i++) out[i] = dims[i].sym ? 0 : dims[i].value;
}

/* A new intermediate value named after vid's with the given dims. */
static int new_value(tg_graph *g, int vid, const char *suffix, int nd, const tg_dim *dims, ts_diag *d) {
  char base[256], nm[256];
  snprintf(base, sizeof base, "%s_%s", g->values[vid]->name, suffix);
  return tg_value_add(g, tg_fresh_value_name(g, base, nm, sizeof nm), TG_V_INTER, g->values[vid]->dtype, nd, dims,
                      d);
}

/* One conversion node op(x) -> y with an INTS attribute (perm or shape). */
static ts_status add_conv_node(tg_graph *g, tg_op op, int x, int y, const char *aname, const int64_t *av, int an,
                               ts_diag *d) {
  char nm[256];
  snprintf(nm, sizeof nm, "%s_%s", g->values[y]->name, op == TG_OP_TRANSPOSE ? "transpose" : "reshape");
  int id = tg_node_add(g, op, nm, 1, &x, 1, &y, d);
  if (id < 0) return fail_code(d);
  int64_t v[5];
  memcpy(v, av, (size_t)an * sizeof *v);
  tg_attr a = {.name = aname, .kind = TG_A_INTS, .n = an, .ints = v};
  if (tg_node_set_attr(g, g->nodes[id], &a) != TS_OK) return nc_oom(d);
  if (op == TG_OP_RESHAPE) {
    tg_attr z = {.name = "allowzero", .kind = TG_A_INT, .i = 0};
    if (tg_node_set_attr(g, g->nodes[id], &z) != TS_OK) return nc_oom(d);
  }
  return TS_OK;
}

/* The blocked dims of a plain [N, C, H, W] value. */
static void blocked_dims(const tg_value *v, int b, tg_dim *out) {
  out[0] = v->dims[0];
  out[1] = (tg_dim){v->dims[1].value / b, NULL};
  out[2] = v->dims[2];
  out[3] = v->dims[3];
  out[4] = (tg_dim){b, NULL};
}

/* The border in: the twin of plain x, Reshape [N, C/b, b, H, W] then
 * Transpose [0,1,3,4,2] (made once, shared by every consumer). */
static int twin_in(nc_state *s, int x) {
  int t = twin_of(s, x);
  if (t >= 0) return t;
  tg_graph *g = s->g;
  const tg_value *v = g->values[x];
  tg_dim bd[5], rd[5];
  blocked_dims(v, s->b, bd);
  rd[0] = bd[0], rd[1] = bd[1], rd[2] = bd[4], rd[3] = bd[2], rd[4] = bd[3];
  int r = new_value(g, x, "blk_r", 5, rd, s->d);
  if (r < 0) return -1;
  int u = new_value(g, x, "nchwc", 5, bd, s->d);
  if (u < 0) return -1;
  int64_t shape[5];
  shape_attr(rd, 5, shape);
  if (add_conv_node(g, TG_OP_RESHAPE, x, r, "shape", shape, 5, s->d) != TS_OK ||
      add_conv_node(g, TG_OP_TRANSPOSE, r, u, "perm", TO_BLOCKED, 5, s->d) != TS_OK || set_twin(s, x, u) != TS_OK)
    return -1;
  return u;
}

/* n's output 0 (plain y) becomes a new blocked value u, and the border out
 * (Transpose [0,1,4,2,3] then Reshape) writes y from it; y's twin is u. */
static ts_status blocked_after(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  int y = n->outputs[0];
  const tg_value *yv = g->values[y];
  tg_dim bd[5], td[5];
  blocked_dims(yv, s->b, bd);
  td[0] = bd[0], td[1] = bd[1], td[2] = bd[4], td[3] = bd[2], td[4] = bd[3];
  int u = new_value(g, y, "nchwc", 5, bd, s->d);
  if (u < 0) return fail_code(s->d);
  int t = new_value(g, y, "blk_t", 5, td, s->d);
  if (t < 0) return fail_code(s->d);
  n->outputs[0] = u;
  g->values[u]->producer = n->id;
  g->values[y]->producer = -1;
  int64_t shape[4];
  shape_attr(yv->dims, 4, shape);
  ts_status st = add_conv_node(g, TG_OP_TRANSPOSE, u, t, "perm", FROM_BLOCKED, 5, s->d);
  if (st == TS_OK) st = add_conv_node(g, TG_OP_RESHAPE, t, y, "shape", shape, 4, s->d);
  return st == TS_OK ? set_twin(s, y, u) : st;
}

static ts_status set_int(tg_graph *g, tg_node *n, const char *name, int64_t v, ts_diag *d) {
  tg_attr a = {.name = name, .kind = TG_A_INT, .i = v};
  return tg_node_set_attr(g, n, &a) == TS_OK ? TS_OK : nc_oom(d);
}

/* The weights re-laid: [K, C, R, S] -> [K/b, C/cb, R, S, cb, b], or the
 * depthwise [C, 1, R, S] -> [C/b, R, S, b]. Returns the new constant. */
static int blocked_weights(nc_state *s, int wid, bool dw, int64_t cb) {
  tg_graph *g = s->g;
  const tg_value *w = g->values[wid];
  int64_t K = w->dims[0].value, C = w->dims[1].value, R = w->dims[2].value, S = w->dims[3].value, b = s->b;
  const float *src = w->data;
  size_t nb = (size_t)(K * C * R * S) * sizeof(float);
  float *dst = ts_malloc(nb);
  if (!dst) {
    nc_oom(s->d);
    return -1;
  }
  for (int64_t k = 0; k < K; k++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t r = 0; r < R; r++)
        for (int64_t q = 0; q < S; q++) {
          int64_t at;
          if (dw) at = ((k / b * R + r) * S + q) * b + k % b;
          else at = ((((k / b * (C / cb) + c / cb) * R + r) * S + q) * cb + c % cb) * b + k % b;
          dst[at] = src[((k * C + c) * R + r) * S + q];
        }
  tg_dim wd[6];
  int nd;
  if (dw) {
    tg_dim t[4] = {{K / b, NULL}, {R, NULL}, {S, NULL}, {b, NULL}};
    memcpy(wd, t, sizeof t);
    nd = 4;
  } else {
    tg_dim t[6] = {{K / b, NULL}, {C / cb, NULL}, {R, NULL}, {S, NULL}, {cb, NULL}, {b, NULL}};
    memcpy(wd, t, sizeof t);
    nd = 6;
  }
  char base[256];
  snprintf(base, sizeof base, "%s_nchwc%d", w->name, s->b);
  int id = tg_add_const(g, base, ir_dt(IR_F32), nd, wd, dst, nb, s->d);
  ts_free(dst);
  return id;
}

/* A convolution this pass takes: 0 no, 1 groups 1, 2 depthwise, 3 grouped
 * with a multiple of b input and output channels per group (ResNeXt's,
 * RegNet's: each output block then reads its own group's input blocks), 4
 * grouped with as many input as output channels per group, fewer than b and
 * dividing it (ResNeXt-50's first stage, 4: b / that many groups make one
 * block, computed as one group of b with zeros across groups). */
static int conv_kind(const nc_state *s, const tg_node *n) {
  const tg_graph *g = s->g;
  if (n->nin < 2 || n->nout != 1 || tg_node_attr(n, "tessel.winograd") || tg_node_attr(n, "tessel.nchwc") ||
      strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "NOTSET"))
    return 0;
  const tg_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[1]], *y = g->values[n->outputs[0]];
  if (!act_f32(x) || !static_f32(w, 4) || !act_f32(y) || w->kind != TG_V_CONST || !w->data) return 0;
  if (n->nin > 2 && n->inputs[2] >= 0 && !static_f32(g->values[n->inputs[2]], 1)) return 0;
  int64_t K = y->dims[1].value, C = x->dims[1].value, grp = tg_attr_int(n, "group", 1);
  if (K % s->b) return 0;
  if (grp == 1) return 1;
  if (grp == C && K == C && w->dims[1].value == 1) return 2;
  if (grp < 2 || C % grp || K % grp || w->dims[1].value != C / grp) return 0;
  int64_t cg = C / grp, kg = K / grp;
  if (cg % s->b == 0 && kg % s->b == 0) return 3;
  return cg == kg && cg > 1 && s->b % cg == 0 && C % s->b == 0 ? 4 : 0;
}

/* A Winograd convolution (the winograd pass's form, op_nn.c) whose input
 * and output channels the block divides reads the twin of x and writes a
 * blocked output: its kernel's padded copy and inverse transform index the
 * blocked forms, so no border surrounds it; its transformed weights stay. */
static ts_status winograd_step(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  if (n->nin < 5 || n->nout != 1 || tg_node_attr(n, "tessel.nchwc")) return TS_OK;
  const tg_value *x = g->values[n->inputs[0]], *y = g->values[n->outputs[0]];
  if (!act_f32(x) || !act_f32(y) || x->dims[1].value % s->b || y->dims[1].value % s->b) return TS_OK;
  int t = twin_in(s, n->inputs[0]);
  if (t < 0) return fail_code(s->d);
  n->inputs[0] = t;
  ts_status st = set_int(g, n, "tessel.nchwc", s->b, s->d);
  return st == TS_OK ? blocked_after(s, n) : st;
}

/* Kind 4 made kind 3: groups of b channels, the weights [K, b, R, S] with each
 * output channel's own group's cg inputs at their place in its block and
 * zeros elsewhere (b / cg times the multiply-adds, all of them vectorised). */
static ts_status merge_groups(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  const tg_value *w = g->values[n->inputs[1]];
  int64_t K = w->dims[0].value, cg = w->dims[1].value, R = w->dims[2].value, S = w->dims[3].value, b = s->b;
  size_t nb = (size_t)(K * b * R * S) * sizeof(float);
  float *dst = ts_calloc(1, nb);
  if (!dst) return nc_oom(s->d);
  const float *src = w->data;
  for (int64_t k = 0; k < K; k++) {
    int64_t at = (k % b) / cg * cg; /* the group's first input channel within the block */
    for (int64_t c = 0; c < cg; c++)
      for (int64_t rs = 0; rs < R * S; rs++) dst[(k * b + at + c) * R * S + rs] = src[(k * cg + c) * R * S + rs];
  }
  tg_dim wd[4] = {{K, NULL}, {b, NULL}, {R, NULL}, {S, NULL}};
  char base[256];
  snprintf(base, sizeof base, "%s_groups%d", w->name, (int)b);
  int id = tg_add_const(g, base, ir_dt(IR_F32), 4, wd, dst, nb, s->d);
  ts_free(dst);
  if (id < 0) return fail_code(s->d);
  n->inputs[1] = id;
  return set_int(g, n, "group", g->values[n->inputs[0]]->dims[1].value / b, s->d);
}

static ts_status conv_step(nc_state *s, tg_node *n) {
  if (tg_attr_int(n, "tessel.winograd", 0)) return winograd_step(s, n);
  int kind = conv_kind(s, n);
  if (!kind) return TS_OK;
  tg_graph *g = s->g;
  if (kind == 4) {
    ts_status st = merge_groups(s, n);
    if (st) return st;
    kind = 3;
  }
  int64_t C = g->values[n->inputs[0]]->dims[1].value;
  int64_t cb = C % s->b ? 1 : s->b;
  if (kind >= 2 && cb != s->b) return TS_OK;
  int x = n->inputs[0];
  if (cb > 1) {
    x = twin_in(s, x);
    if (x < 0) return fail_code(s->d);
  }
  int w = blocked_weights(s, n->inputs[1], kind == 2, cb);
  if (w < 0) return fail_code(s->d);
  n->inputs[0] = x;
  n->inputs[1] = w;
  ts_status st = set_int(g, n, "tessel.nchwc", s->b, s->d);
  if (st == TS_OK) st = set_int(g, n, "tessel.nchwc_cb", cb, s->d);
  return st == TS_OK ? blocked_after(s, n) : st;
}

static bool is_channel_const(const tg_value *v, const tg_value *y) {
  if (v->kind != TG_V_CONST || !v->data || v->dtype.code != IR_F32 || v->dtype.lanes != 1 || v->ndim < 3 ||
      v->ndim > 4)
    return false;
  for (int j = 0; j < v->ndim; j++)
    if (v->dims[j].sym || v->dims[j].value != (j == v->ndim - 3 ? y->dims[1].value : 1)) return false;
  return true;
}

/* A constant of one value per channel of y ([C, 1, 1] or [1, C, 1, 1]: a
 * batch norm's scale or shift left before a convolution, as DenseNet's),
 * blocked: the same data as [1, C/b, 1, 1, b]. */
static int channel_const(nc_state *s, int vid, const tg_value *y) {
  tg_graph *g = s->g;
  const tg_value *v = g->values[vid];
  tg_dim bd[5] = {{1, NULL}, {y->dims[1].value / s->b, NULL}, {1, NULL}, {1, NULL}, {s->b, NULL}};
  char base[256];
  snprintf(base, sizeof base, "%s_nchwc%d", v->name, s->b);
  return tg_add_const(g, base, ir_dt(IR_F32), 5, bd, v->data, (size_t)y->dims[1].value * sizeof(float), s->d);
}

/* An elementwise node over values with twins (and single elements, and
 * per-channel constants). */
static ts_status ewise_step(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  tg_pattern p = lg_pattern(g, n);
  if ((p != TG_PAT_ELEMWISE && p != TG_PAT_BROADCAST) || n->nout != 1 || n->nin < 1) return TS_OK;
  const tg_value *y = g->values[n->outputs[0]];
  if (!act_f32(y) || y->dims[1].value % s->b) return TS_OK;
  int with = 0;
  for (int i = 0; i < n->nin; i++) {
    if (n->inputs[i] < 0) continue;
    const tg_value *v = g->values[n->inputs[i]];
    /* y's channels, the other dims y's or 1 (a squeeze-excite scale
     * [N, C, 1, 1]): the blocked forms broadcast the same way */
    bool fits = v->ndim == 4 && tg_dim_eq(v->dims[1], y->dims[1]);
    for (int j = 0; fits && j < 4; j++)
      fits = tg_dim_eq(v->dims[j], y->dims[j]) || (!v->dims[j].sym && v->dims[j].value == 1);
    if (fits && twin_of(s, n->inputs[i]) >= 0) with++;
    else if (tg_value_numel(v) != 1 && !(fits && act_f32(v)) && !is_channel_const(v, y)) return TS_OK;
  }
  if (!with) return TS_OK;
  /* per-channel constants re-laid; the other full-size inputs cross the border in */
  for (int i = 0; i < n->nin; i++) {
    if (n->inputs[i] < 0 || tg_value_numel(g->values[n->inputs[i]]) == 1) continue;
    if (is_channel_const(g->values[n->inputs[i]], y)) {
      int c = channel_const(s, n->inputs[i], y);
      if (c < 0) return fail_code(s->d);
      n->inputs[i] = c;
      continue;
    }
    if (g->values[n->inputs[i]]->ndim != 4) continue;
    int t = twin_in(s, n->inputs[i]);
    if (t < 0) return fail_code(s->d);
    n->inputs[i] = t;
  }
  return blocked_after(s, n);
}

/* A Concat along the channels of values whose channel counts the block
 * divides, one of them with a twin (DenseNet's growing feature map):
 * the blocked forms concatenate along the channel blocks. */
static ts_status concat_step(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  if (n->nout != 1 || tg_attr_int(n, "axis", 0) != 1 || !act_f32(g->values[n->outputs[0]])) return TS_OK;
  int with = 0;
  for (int i = 0; i < n->nin; i++) {
    const tg_value *v = n->inputs[i] >= 0 ? g->values[n->inputs[i]] : NULL;
    if (!v || !act_f32(v) || v->dims[1].value % s->b) return TS_OK;
    with += twin_of(s, n->inputs[i]) >= 0;
  }
  if (!with) return TS_OK;
  for (int i = 0; i < n->nin; i++) {
    int t = twin_in(s, n->inputs[i]);
    if (t < 0) return fail_code(s->d);
    n->inputs[i] = t;
  }
  return blocked_after(s, n);
}

/* A 2-D MaxPool or undilated AveragePool of a value with a twin. */
static ts_status pool_step(nc_state *s, tg_node *n) {
  tg_graph *g = s->g;
  if (tg_node_attr(n, "tessel.nchwc") || tg_attr_int(n, "tessel.nhwc", 0) || n->nin != 1 ||
      (n->nout > 1 && n->outputs[1] >= 0) || strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "NOTSET"))
    return TS_OK;
  int nk, nd;
  const int64_t *ks = tg_attr_ints(n, "kernel_shape", &nk), *dl = tg_attr_ints(n, "dilations", &nd);
  if (!ks || nk != 2) return TS_OK;
  for (int i = 0; n->op == TG_OP_AVERAGE_POOL && dl && i < nd; i++)
    if (dl[i] != 1) return TS_OK; /* the blocked average divides by a plain count */
  int t = twin_of(s, n->inputs[0]);
  if (t < 0 || !act_f32(g->values[n->outputs[0]])) return TS_OK;
  n->inputs[0] = t;
  n->nout = 1;
  ts_status st = set_int(g, n, "tessel.nchwc", s->b, s->d);
  return st == TS_OK ? blocked_after(s, n) : st;
}

typedef ts_status (*nc_fn)(nc_state *s, tg_node *n);
static const struct {
  tg_op op;
  nc_fn fn;
} steps[] = {
    {TG_OP_CONV, conv_step},
    {TG_OP_MAX_POOL, pool_step},
    {TG_OP_AVERAGE_POOL, pool_step},
    {TG_OP_CONCAT, concat_step},
};

static nc_fn step_of(tg_op op) {
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (steps[i].op == op) return steps[i].fn;
  return ewise_step;
}

ts_status tg_pass_nchwc(tg_graph *g, ts_diag *d) {
  int b = g->opts.conv_block < 0 ? 8 : g->opts.conv_block;
  if (!b) return TS_OK;
  ts_status st = tg_pass_dce(g, d); /* topological order */
  if (st != TS_OK) return st;
  nc_state s = {.g = g, .b = b, .d = d};
  int nn = g->nnodes; /* the conversions appended are not visited */
  for (int i = 0; i < nn && st == TS_OK; i++) {
    tg_node *n = g->nodes[i];
    if (!n->dead) st = step_of(n->op)(&s, n);
  }
  ts_free(s.twin);
  return st == TS_OK ? tg_pass_dce(g, d) : st;
}
