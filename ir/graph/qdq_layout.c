/* qdq_layout.c — the channels-last int8 region of the qdq pass.
 *
 * After the QDQ chains became integer ops (qdq.c), every 2-D ungrouped
 * QLinearConv with constant sizes and symmetric weights (w's zero point 0)
 * sums channels-last (op_nn.c, lg_conv_int_nhwc). Left in the graph's NCHW
 * layout, each such convolution transposes its input to NHWC and its
 * output back: two byte / int32 transposes per convolution, and the residual
 * Adds between them read NCHW. This step keeps the whole region NHWC:
 *   1. each such QLinearConv gets the attribute tessel.nhwc (x and y
 *      [N, H, W, C]) between Transpose(x, [0,2,3,1]) and
 *      Transpose(y, [0,3,1,2]);
 *   2. an elementwise node (the registry's pattern: elementwise or
 *      broadcasting) all of whose inputs are either outputs of a
 *      Transpose [0,3,1,2] of its own output's shape or single elements
 *      (a per-tensor scale or zero point) runs on the NHWC tensors, and the
 *      Transpose moves after it: the residual DequantizeLinear -> Add ->
 *      Relu -> QuantizeLinear chain, exact (elementwise ops do not see the
 *      layout);
 *   3. a MaxPool of such a Transpose's output pools channels-last
 *      (tessel.nhwc on the pool; exact);
 *   4. Transpose(Transpose(x, p), q) with q after p the identity is x.
 * Repeated until nothing changes; the Transposes left are the region's
 * borders (the stem's input, the float tail). docs/GRAPH.md
 * ("Quantization"). */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "passes_int.h"

static const int64_t TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

static ts_status lay_oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory in the qdq layout step"); }

static ts_status fail_code(ts_diag *d) { return d && d->code ? d->code : TS_ENOMEM; }

/* A new value like vid with its 4 dims permuted by perm (out[i] = in[perm[i]]). */
static int permuted_value(tg_graph *g, int vid, const int64_t *perm, const char *suffix, ts_diag *d) {
  const tg_value *v = g->values[vid];
  tg_dim dims[4];
  for (int i = 0; i < 4; i++) dims[i] = v->dims[perm[i]];
  char base[256], nm[256];
  snprintf(base, sizeof base, "%s_%s", v->name, suffix);
  return tg_value_add(g, tg_fresh_value_name(g, base, nm, sizeof nm), TG_V_INTER, v->dtype, 4, dims, d);
}

/* Transpose(x, perm) -> y, a new node (y's producer must be unset or dead). */
static ts_status add_transpose(tg_graph *g, int x, int y, const int64_t *perm, ts_diag *d) {
  char nm[256];
  snprintf(nm, sizeof nm, "%s_transpose", g->values[y]->name);
  int id = tg_node_add(g, TG_OP_TRANSPOSE, nm, 1, &x, 1, &y, d);
  if (id < 0) return fail_code(d);
  int64_t p[4];
  memcpy(p, perm, sizeof p);
  tg_attr a = {.name = "perm", .kind = TG_A_INTS, .n = 4, .ints = p};
  return tg_node_set_attr(g, g->nodes[id], &a) == TS_OK ? TS_OK : lay_oom(d);
}

/* n's output 0 becomes a new NHWC value, and Transpose [0,3,1,2] writes the
 * old (NCHW) output from it. */
static ts_status nchw_after(tg_graph *g, tg_node *n, ts_diag *d) {
  int y = n->outputs[0];
  int u = permuted_value(g, y, TO_NHWC, "nhwc", d);
  if (u < 0) return fail_code(d);
  n->outputs[0] = u;
  g->values[u]->producer = n->id;
  g->values[y]->producer = -1;
  return add_transpose(g, u, y, TO_NCHW, d);
}

static bool perm_is(const tg_node *t, const int64_t *perm) {
  int c;
  const int64_t *p = tg_attr_ints(t, "perm", &c);
  return p && c == 4 && !memcmp(p, perm, 4 * sizeof *p);
}

/* The live Transpose [0,3,1,2] producing vid, or NULL. */
static tg_node *to_nchw_of(const tg_graph *g, int vid) {
  const tg_value *v = vid >= 0 ? g->values[vid] : NULL;
  if (!v || v->producer < 0) return NULL;
  tg_node *p = g->nodes[v->producer];
  return !p->dead && p->op == TG_OP_TRANSPOSE && perm_is(p, TO_NCHW) ? p : NULL;
}

static bool static4(const tg_value *v) { return v->ndim == 4 && tg_value_is_static(v); }

static bool all_zero(const tg_value *v) {
  if (v->kind != TG_V_CONST || !v->data) return false;
  const unsigned char *p = v->data;
  for (size_t j = 0; j < v->nbytes; j++)
    if (p[j]) return false;
  return true;
}

/* 1. A QLinearConv that sums channels-last (op_nn.c, lg_conv_int_nhwc_ok). */
static ts_status conv_step(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  if (tg_attr_int(n, "tessel.nhwc", 0) || n->nin < 8 || n->nout != 1 || tg_attr_int(n, "group", 1) != 1) return TS_OK;
  const tg_value *x = g->values[n->inputs[0]], *w = g->values[n->inputs[3]], *y = g->values[n->outputs[0]];
  if (!static4(x) || !static4(w) || !static4(y) || !all_zero(g->values[n->inputs[5]]) ||
      strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "NOTSET") || tg_is_graph_output(g, n->outputs[0]))
    return TS_OK;
  int xt = permuted_value(g, n->inputs[0], TO_NHWC, "nhwc", d);
  if (xt < 0) return fail_code(d);
  ts_status st = add_transpose(g, n->inputs[0], xt, TO_NHWC, d);
  if (st != TS_OK) return st;
  n->inputs[0] = xt;
  tg_attr a = {.name = "tessel.nhwc", .kind = TG_A_INT, .i = 1};
  if (tg_node_set_attr(g, n, &a) != TS_OK) return lay_oom(d);
  *changed = true;
  return nchw_after(g, n, d);
}

/* 2. An elementwise node over NCHW views of NHWC tensors. */
static ts_status ewise_step(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  tg_pattern p = lg_pattern(g, n);
  if ((p != TG_PAT_ELEMWISE && p != TG_PAT_BROADCAST) || n->nout != 1 || n->nin < 1) return TS_OK;
  const tg_value *y = g->values[n->outputs[0]];
  if (!static4(y) || tg_is_graph_output(g, n->outputs[0])) return TS_OK;
  int moved = 0;
  for (int i = 0; i < n->nin; i++) {
    if (n->inputs[i] < 0) continue;
    const tg_value *v = g->values[n->inputs[i]];
    tg_node *t = to_nchw_of(g, n->inputs[i]);
    bool same = v->ndim == 4;
    for (int j = 0; same && j < 4; j++) same = tg_dim_eq(v->dims[j], y->dims[j]);
    if (t && same) moved++;
    else if (tg_value_numel(v) != 1) return TS_OK;
  }
  if (!moved) return TS_OK;
  for (int i = 0; i < n->nin; i++) {
    tg_node *t = to_nchw_of(g, n->inputs[i]);
    if (t && g->values[n->inputs[i]]->ndim == 4) n->inputs[i] = t->inputs[0];
  }
  *changed = true;
  return nchw_after(g, n, d);
}

/* 3. MaxPool over an NCHW view of an NHWC tensor. */
static ts_status pool_step(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  if (tg_attr_int(n, "tessel.nhwc", 0) || n->nout != 1 || n->nin != 1) return TS_OK;
  tg_node *t = to_nchw_of(g, n->inputs[0]);
  if (!t || !static4(g->values[n->outputs[0]]) || tg_is_graph_output(g, n->outputs[0])) return TS_OK;
  n->inputs[0] = t->inputs[0];
  tg_attr a = {.name = "tessel.nhwc", .kind = TG_A_INT, .i = 1};
  if (tg_node_set_attr(g, n, &a) != TS_OK) return lay_oom(d);
  *changed = true;
  return nchw_after(g, n, d);
}

/* 4. Transpose(Transpose(x, p), q) with q after p the identity: x. */
static ts_status cancel_step(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  (void)d;
  int c1, c2;
  const int64_t *q = tg_attr_ints(n, "perm", &c1);
  const tg_value *v = g->values[n->inputs[0]];
  if (!q || v->producer < 0 || tg_is_graph_output(g, n->outputs[0])) return TS_OK;
  const tg_node *t = g->nodes[v->producer];
  const int64_t *p = t->dead || t->op != TG_OP_TRANSPOSE ? NULL : tg_attr_ints(t, "perm", &c2);
  if (!p || c1 != c2) return TS_OK;
  for (int i = 0; i < c1; i++)
    if (q[i] < 0 || q[i] >= c2 || p[q[i]] != i) return TS_OK;
  tg_replace_uses(g, n->outputs[0], t->inputs[0]);
  n->dead = true;
  *changed = true;
  return TS_OK;
}

/* The step for node n, or NULL (the ops the region passes through). */
typedef ts_status (*lay_fn)(tg_graph *g, tg_node *n, bool *changed, ts_diag *d);
static const struct {
  tg_op op;
  lay_fn fn;
} steps[] = {
    {TG_OP_QLINEAR_CONV, conv_step},
    {TG_OP_MAX_POOL, pool_step},
    {TG_OP_TRANSPOSE, cancel_step},
};

static lay_fn step_of(tg_op op) {
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (steps[i].op == op) return steps[i].fn;
  return ewise_step;
}

ts_status tg_qdq_layout(tg_graph *g, ts_diag *d) {
  for (int round = 0; round < 256; round++) {
    bool changed = false;
    int nn = g->nnodes; /* nodes added this round wait for the next */
    for (int i = 0; i < nn; i++) {
      tg_node *n = g->nodes[i];
      if (n->dead) continue;
      ts_status st = step_of(n->op)(g, n, &changed, d);
      if (st != TS_OK) return st;
    }
    if (!changed) return TS_OK;
    ts_status st = tg_pass_dce(g, d); /* re-sorts topologically: new nodes were appended */
    if (st != TS_OK) return st;
  }
  return TS_OK;
}
