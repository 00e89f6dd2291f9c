/* graph_interp.c — runs a legalised graph on the reference interpreter, node
 * by node: the whole-model ground truth (graph_interp.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph_interp.h"

typedef struct gi_sym {
  const char *name;
  int64_t value;
} gi_sym;

static ts_status bind_dim(const tg_value *v, int axis, int64_t got, gi_sym *syms, int *nsyms, ts_diag *d) {
  tg_dim dm = v->dims[axis];
  if (!dm.sym) {
    if (dm.value != got)
      return ts_diag_set(d, TS_ESHAPE, "input %s: dim %d is %" PRId64 ", the graph says %" PRId64, v->name, axis,
                         got, dm.value);
    return TS_OK;
  }
  for (int i = 0; i < *nsyms; i++)
    if (!strcmp(syms[i].name, dm.sym)) {
      if (syms[i].value != got)
        return ts_diag_set(d, TS_ESHAPE, "input %s: dim %d ('%s') is %" PRId64 " but '%s' is already %" PRId64,
                           v->name, axis, dm.sym, got, dm.sym, syms[i].value);
      return TS_OK;
    }
  if (*nsyms == 64) return ts_diag_set(d, TS_EUNSUPPORTED, "more than 64 graph symbols");
  syms[*nsyms].name = dm.sym;
  syms[*nsyms].value = got;
  (*nsyms)++;
  return TS_OK;
}

typedef struct gi_syms {
  const gi_sym *s;
  int n;
} gi_syms;

static int64_t gi_lookup(void *ctx, const char *name) {
  const gi_syms *c = ctx;
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->s[i].name, name)) return c->s[i].value;
  return -1;
}

/* A value's shape at the bound symbols (a dim may be a product of them, dim.c). */
static ts_status value_shape(const tg_value *v, const gi_sym *syms, int nsyms, int64_t *shape, ts_diag *d) {
  gi_syms c = {syms, nsyms};
  for (int a = 0; a < v->ndim; a++) {
    tg_dim dm = v->dims[a];
    shape[a] = dm.value;
    ts_diag why;
    ts_diag_clear(&why);
    ts_status st = dm.sym ? tg_dim_eval(dm, gi_lookup, &c, &shape[a], &why) : TS_OK;
    if (st) return ts_diag_set(d, st, "value %s: %s", v->name, why.msg);
  }
  return TS_OK;
}

ts_status tg_graph_run(const tg_graph *g, const ir_tensor *inputs, ir_tensor *outputs, ts_diag *d) {
  int nv = g->nvalues;
  ts_status st = TS_OK;
  ir_tensor *vals = ts_calloc((size_t)nv + 1, sizeof(ir_tensor));
  bool *owned = ts_calloc((size_t)nv + 1, sizeof(bool));
  bool *have = ts_calloc((size_t)nv + 1, sizeof(bool));
  int *last = ts_malloc(((size_t)nv + 1) * sizeof(int));
  gi_sym syms[64];
  int nsyms = 0;
  for (int i = 0; i < g->noutputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  if (!vals || !owned || !have || !last) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  for (int v = 0; v < nv; v++) last[v] = -1;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] >= 0) last[n->inputs[j]] = i;
  }
  for (int i = 0; i < g->noutputs; i++) last[g->outputs[i]] = g->nnodes; /* never freed early */
  /* graph inputs: check dtypes and ranks, bind symbols */
  for (int i = 0; i < g->ninputs && st == TS_OK; i++) {
    const tg_value *v = g->values[g->inputs[i]];
    const ir_tensor *t = &inputs[i];
    if (!ir_dtype_eq(t->dtype, v->dtype) || t->ndim != v->ndim) {
      char a[16], b[16];
      st = ts_diag_set(d, TS_ESHAPE, "input %s: got %s of rank %d, the graph wants %s of rank %d", v->name,
                       ir_dtype_str(t->dtype, a, sizeof a), t->ndim, ir_dtype_str(v->dtype, b, sizeof b), v->ndim);
      break;
    }
    for (int a = 0; a < v->ndim && st == TS_OK; a++) st = bind_dim(v, a, t->shape[a], syms, &nsyms, d);
    vals[v->id] = *t;
    have[v->id] = true;
  }
  for (int v = 0; v < nv && st == TS_OK; v++) {
    const tg_value *val = g->values[v];
    if (val->kind != TG_V_CONST) continue;
    vals[v].dtype = val->dtype;
    vals[v].ndim = val->ndim;
    for (int a = 0; a < val->ndim; a++) vals[v].shape[a] = val->dims[a].value;
    vals[v].data = val->data;
    have[v] = true;
  }
  for (int i = 0; i < g->nnodes && st == TS_OK; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    if (n->op != TG_OP_CALL) {
      st = ts_diag_set(d, TS_EINVAL, "node '%s' is %s, not a call: run the legalize pass first", n->name,
                       tg_op_name(n->op));
      break;
    }
    const ir_func *f = ir_module_get(g->mod, n->callee);
    if (!f) {
      st = ts_diag_set(d, TS_ENOTFOUND, "node '%s' calls %s, which the module does not hold", n->name, n->callee);
      break;
    }
    if (f->nparams != n->nin + n->nout || f->ninputs != n->nin) {
      st = ts_diag_set(d, TS_EINVAL, "node '%s': %s takes %d inputs and %d outputs, the call passes %d and %d",
                       n->name, f->name, f->ninputs, f->nparams - f->ninputs, n->nin, n->nout);
      break;
    }
    ir_tensor args[320];
    if (f->nparams > 320) {
      st = ts_diag_set(d, TS_EUNSUPPORTED, "node '%s': over 320 params", n->name);
      break;
    }
    for (int j = 0; j < n->nin && st == TS_OK; j++) {
      int v = n->inputs[j];
      if (v < 0 || !have[v]) st = ts_diag_set(d, TS_EINVAL, "node '%s': input %d is not computed yet", n->name, j);
      else args[j] = vals[v];
    }
    for (int j = 0; j < n->nout && st == TS_OK; j++) {
      int v = n->outputs[j];
      int64_t shp[8];
      st = value_shape(g->values[v], syms, nsyms, shp, d);
      if (st == TS_OK) st = ir_tensor_alloc(&vals[v], g->values[v]->dtype, g->values[v]->ndim, shp);
      if (st == TS_ENOMEM) ts_diag_set(d, st, "out of memory");
      if (st == TS_OK) {
        owned[v] = have[v] = true;
        args[n->nin + j] = vals[v];
      }
    }
    if (st != TS_OK) break;
    ts_diag ld;
    ts_diag_clear(&ld);
    st = ir_interp_run(f, args, &ld);
    if (st != TS_OK) {
      ts_diag_set(d, st, "node '%s' (%s): %s", n->name, n->callee, ld.msg);
      break;
    }
    for (int j = 0; j < n->nin; j++) {
      int v = n->inputs[j];
      if (v >= 0 && owned[v] && last[v] == i) {
        ir_tensor_free(&vals[v]);
        owned[v] = have[v] = false;
      }
    }
  }
  for (int i = 0; i < g->noutputs && st == TS_OK; i++) {
    int v = g->outputs[i];
    if (!have[v]) {
      st = ts_diag_set(d, TS_EINVAL, "graph output %s is never computed", g->values[v]->name);
      break;
    }
    st = ir_tensor_alloc(&outputs[i], vals[v].dtype, vals[v].ndim, vals[v].shape);
    if (st != TS_OK) {
      ts_diag_set(d, st, "out of memory");
      break;
    }
    memcpy(outputs[i].data, vals[v].data, (size_t)ir_tensor_numel(&vals[v]) * (size_t)ir_dtype_bytes(vals[v].dtype));
  }
  if (st != TS_OK)
    for (int i = 0; i < g->noutputs; i++) ir_tensor_free(&outputs[i]);
out:
  if (vals && owned)
    for (int v = 0; v < nv; v++)
      if (owned[v]) ir_tensor_free(&vals[v]);
  ts_free(vals);
  ts_free(owned);
  ts_free(have);
  ts_free(last);
  return st;
}
