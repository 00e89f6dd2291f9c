/* graph.c — the graph IR of graph.h: building values and nodes, attributes,
 * uses, compaction (dead-node removal, dense renumbering, topological
 * re-sort), the invariant checker and the printer.
 *
 * Memory: the graph struct, its nodes, values, dims, attributes and constant
 * data live in the module's arena; only the id tables (values, nodes, inputs,
 * outputs) are heap arrays, because they grow while a graph is built and are
 * rebuilt by compaction, and so are the two name indexes (name -> id hash
 * tables, graph.h's tg_name_index) that keep lookups by name O(1): import
 * time grows linearly with the model. tg_graph_free releases those tables
 * and is idempotent, so ir_module_free may call it after a user already did. */
#include "graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static const char *const op_names[] = {
#define TG_X(e, n) [e] = n,
    TG_OP_LIST(TG_X)
#undef TG_X
};

const char *tg_op_name(tg_op op) {
  if ((int)op < 0 || op >= TG_OP_COUNT) return "?";
  return op_names[op];
}

tg_op tg_op_from_name(const char *name) {
  if (!name) return TG_OP_COUNT;
  for (int i = 0; i < TG_OP_COUNT; i++)
    if (!strcmp(op_names[i], name)) return (tg_op)i;
  return TG_OP_COUNT;
}

/* ---- graph ---------------------------------------------------------------- */

static void free_graph(void *g) { tg_graph_free(g); }

tg_graph *tg_graph_new(ir_module *m, const char *name) {
  if (!m) return NULL;
  tg_graph *g = TS_ANEW(m->arena, tg_graph);
  if (!g) return NULL;
  g->name = ts_arena_strdup(m->arena, name ? name : "main");
  if (!g->name) return NULL;
  g->mod = m;
  ir_module_entry e = {.name = g->name, .kind = IR_MOD_GRAPH, .u.graph = g, .free_fn = free_graph};
  return ir_module_add_entry(m, e) == TS_OK ? g : NULL;
}

tg_graph *tg_graph_get(const ir_module *m, const char *name) {
  if (!m) return NULL;
  for (int i = 0; i < m->nfuncs; i++)
    if (m->funcs[i].kind == IR_MOD_GRAPH && (!name || !strcmp(m->funcs[i].name, name)))
      return m->funcs[i].u.graph;
  return NULL;
}

void tg_graph_free(tg_graph *g) {
  if (!g) return;
  ts_free(g->value_index.slots);
  ts_free(g->node_index.slots);
  g->value_index = g->node_index = (tg_name_index){0};
  ts_free(g->values);
  ts_free(g->nodes);
  ts_free(g->inputs);
  ts_free(g->outputs);
  g->values = NULL;
  g->nodes = NULL;
  g->inputs = g->outputs = NULL;
  g->nvalues = g->capvalues = g->nnodes = g->capnodes = 0;
  g->ninputs = g->noutputs = 0;
}


/* ---- name indexes ----------------------------------------------------------
 * Entries are ids; a probe compares the name the value or node has now, so
 * a slot whose node was renamed behind the index's back only misses (the
 * rename adds the new name). Growth and compaction rehash from the tables. */

/* the name of entry id of the values' (nodes false) or the nodes' index */
static const char *entry_name(const tg_graph *g, bool nodes, int id) {
  return nodes ? g->nodes[id]->name : g->values[id]->name;
}

static size_t home_slot(const char *name, int cap) {
  return (size_t)(XXH3_64bits(name, strlen(name)) & (uint64_t)(cap - 1));
}

/* the id of an entry named name, or -1 */
static int index_find(const tg_graph *g, const tg_name_index *ix, bool nodes, const char *name) {
  if (!ix->cap || !name) return -1;
  for (size_t s = home_slot(name, ix->cap);; s = (s + 1) & (size_t)(ix->cap - 1)) {
    int id = ix->slots[s];
    if (id < 0) return -1;
    const char *nm = entry_name(g, nodes, id);
    if (nm && !strcmp(nm, name)) return id;
  }
}

/* Puts id under name; the caller reserved room (index_reserve). */
static void index_place(tg_name_index *ix, const char *name, int id) {
  size_t s = home_slot(name, ix->cap);
  while (ix->slots[s] >= 0) s = (s + 1) & (size_t)(ix->cap - 1);
  ix->slots[s] = id;
  ix->used++;
}

/* slots for n entries at a load of at most one half */
static int index_cap_for(int n) {
  int cap = 16;
  while (cap < 2 * (n + 1)) cap *= 2;
  return cap;
}

/* Fills fresh slots (cap of them) with ids 0..n-1 and makes them ix's. */
static void index_fill(tg_name_index *ix, int *slots, int cap, const tg_graph *g, bool nodes, int n) {
  for (int i = 0; i < cap; i++) slots[i] = -1;
  ts_free(ix->slots);
  *ix = (tg_name_index){.cap = cap, .slots = slots};
  for (int id = 0; id < n; id++) {
    const char *nm = entry_name(g, nodes, id);
    if (nm) index_place(ix, nm, id);
  }
}

/* Room for one more entry (rehashing ids 0..n-1 when it grows); false on
 * OOM, the index unchanged. */
static bool index_reserve(tg_name_index *ix, const tg_graph *g, bool nodes, int n) {
  if (2 * (ix->used + 1) <= ix->cap) return true;
  int cap = index_cap_for(n + 1);
  int *slots = ts_malloc((size_t)cap * sizeof(int));
  if (!slots) return false;
  index_fill(ix, slots, cap, g, nodes, n);
  return true;
}

/* ---- values --------------------------------------------------------------- */

int tg_value_find(const tg_graph *g, const char *name) {
  if (!g) return -1;
  return index_find(g, &g->value_index, false, name);
}

int tg_value_add(tg_graph *g, const char *name, tg_value_kind kind, ir_dtype dt, int ndim,
                 const tg_dim *dims, ts_diag *d) {
  ts_arena *a = g->mod->arena;
  if (ndim < 0 || (ndim > 0 && !dims)) {
    ts_diag_set(d, TS_EINVAL, "graph %s: value %s: bad rank %d", g->name, name ? name : "?", ndim);
    return -1;
  }
  for (int i = 0; i < ndim; i++) {
    if (dims[i].sym ? dims[i].sym[0] == '\0' : dims[i].value < 0) {
      ts_diag_set(d, TS_EINVAL, "graph %s: value %s: dim %d is neither a size >= 0 nor a named symbol",
                  g->name, name ? name : "?", i);
      return -1;
    }
  }
  char tmp[32];
  if (!name || !name[0]) {
    /* a made-up name no ONNX tensor uses */
    int k = g->nvalues;
    do snprintf(tmp, sizeof tmp, "v%d", k++);
    while (tg_value_find(g, tmp) >= 0);
    name = tmp;
  } else if (tg_value_find(g, name) >= 0) {
    ts_diag_set(d, TS_EINVAL, "graph %s: value name '%s' is already taken", g->name, name);
    return -1;
  }
  if (!ts_grow((void **)&g->values, &g->capvalues, g->nvalues + 1, sizeof *g->values)) goto oom;
  if (!index_reserve(&g->value_index, g, false, g->nvalues)) goto oom;
  tg_value *v = TS_ANEW(a, tg_value);
  if (!v) goto oom;
  v->id = g->nvalues;
  v->name = ts_arena_strdup(a, name);
  v->kind = kind;
  v->dtype = ir_dt((ir_dtype_code)dt.code);
  v->ndim = ndim;
  v->producer = -1;
  if (!v->name) goto oom;
  if (ndim > 0) {
    v->dims = TS_ANEWN(a, tg_dim, ndim);
    if (!v->dims) goto oom;
    for (int i = 0; i < ndim; i++) {
      v->dims[i].value = dims[i].sym ? -1 : dims[i].value;
      if (dims[i].sym && !(v->dims[i].sym = ts_arena_strdup(a, dims[i].sym))) goto oom;
    }
  }
  g->values[g->nvalues++] = v;
  index_place(&g->value_index, v->name, v->id);
  return v->id;
oom:
  ts_diag_set(d, TS_ENOMEM, "graph %s: out of memory adding value %s", g->name, name);
  return -1;
}

ts_status tg_value_set_data(tg_graph *g, int id, const void *data, size_t nbytes, ts_diag *d) {
  if (id < 0 || id >= g->nvalues)
    return ts_diag_set(d, TS_EINVAL, "graph %s: no value with id %d", g->name, id);
  tg_value *v = g->values[id];
  int64_t n = tg_value_numel(v);
  if (n >= 0 && (size_t)n * (size_t)ir_dtype_bytes(v->dtype) != nbytes)
    return ts_diag_set(d, TS_ESHAPE, "graph %s: constant %s: %zu bytes given, its type needs %" PRId64,
                       g->name, v->name, nbytes, n * ir_dtype_bytes(v->dtype));
  void *p = nbytes ? ts_arena_memdup(g->mod->arena, data, nbytes) : NULL;
  if (nbytes && !p) return ts_diag_set(d, TS_ENOMEM, "graph %s: constant %s: out of memory", g->name, v->name);
  v->data = p;
  v->nbytes = nbytes;
  return TS_OK;
}

int64_t tg_value_numel(const tg_value *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) {
    if (v->dims[i].sym) return -1;
    n *= v->dims[i].value;
  }
  return n;
}

bool tg_value_is_static(const tg_value *v) {
  for (int i = 0; i < v->ndim; i++)
    if (v->dims[i].sym) return false;
  return true;
}

bool tg_dim_eq(tg_dim a, tg_dim b) {
  if (a.sym || b.sym) return a.sym && b.sym && !strcmp(a.sym, b.sym);
  return a.value == b.value;
}

/* ---- nodes ---------------------------------------------------------------- */

static bool node_name_taken(const tg_graph *g, const char *name) {
  return index_find(g, &g->node_index, true, name) >= 0;
}

int tg_node_add(tg_graph *g, tg_op op, const char *name, int nin, const int *inputs, int nout,
                const int *outputs, ts_diag *d) {
  ts_arena *a = g->mod->arena;
  const char *what = name && name[0] ? name : tg_op_name(op);
  if ((int)op < 0 || op >= TG_OP_COUNT) {
    ts_diag_set(d, TS_EINVAL, "graph %s: node %s: bad op %d", g->name, what, (int)op);
    return -1;
  }
  if (nin < 0 || nout < 0 || (nin && !inputs) || (nout && !outputs)) {
    ts_diag_set(d, TS_EINVAL, "graph %s: node %s: bad input/output counts", g->name, what);
    return -1;
  }
  for (int i = 0; i < nin; i++)
    if (inputs[i] < -1 || inputs[i] >= g->nvalues) {
      ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): input %d refers to no value (id %d)", g->name,
                  what, tg_op_name(op), i, inputs[i]);
      return -1;
    }
  for (int i = 0; i < nout; i++) {
    if (outputs[i] < 0 || outputs[i] >= g->nvalues) {
      ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %d refers to no value (id %d)", g->name,
                  what, tg_op_name(op), i, outputs[i]);
      return -1;
    }
    const tg_value *v = g->values[outputs[i]];
    if (v->kind != TG_V_INTER) {
      ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %s is a graph %s, not an intermediate",
                  g->name, what, tg_op_name(op), v->name, v->kind == TG_V_INPUT ? "input" : "constant");
      return -1;
    }
    if (v->producer >= 0 && !g->nodes[v->producer]->dead) {
      ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %s already has producer %s", g->name, what,
                  tg_op_name(op), v->name, g->nodes[v->producer]->name);
      return -1;
    }
    for (int j = 0; j < i; j++)
      if (outputs[j] == outputs[i]) {
        ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %s listed twice", g->name, what,
                    tg_op_name(op), v->name);
        return -1;
      }
  }
  char tmp[64];
  if (!name || !name[0]) {
    int k = g->nnodes;
    do snprintf(tmp, sizeof tmp, "%s_%d", tg_op_name(op), k++);
    while (node_name_taken(g, tmp));
    name = tmp;
  }
  if (!ts_grow((void **)&g->nodes, &g->capnodes, g->nnodes + 1, sizeof *g->nodes)) goto oom;
  if (!index_reserve(&g->node_index, g, true, g->nnodes)) goto oom;
  tg_node *n = TS_ANEW(a, tg_node);
  if (!n) goto oom;
  n->id = g->nnodes;
  n->op = op;
  n->name = ts_arena_strdup(a, name);
  n->nin = nin;
  n->nout = nout;
  n->inputs = nin ? ts_arena_memdup(a, inputs, (size_t)nin * sizeof(int)) : NULL;
  n->outputs = nout ? ts_arena_memdup(a, outputs, (size_t)nout * sizeof(int)) : NULL;
  if (!n->name || (nin && !n->inputs) || (nout && !n->outputs)) goto oom;
  g->nodes[g->nnodes++] = n;
  index_place(&g->node_index, n->name, n->id);
  for (int i = 0; i < nout; i++) g->values[outputs[i]]->producer = n->id;
  return n->id;
oom:
  ts_diag_set(d, TS_ENOMEM, "graph %s: out of memory adding node %s", g->name, what);
  return -1;
}

ts_status tg_node_rename(tg_graph *g, tg_node *n, const char *name) {
  if (!name) return TS_EINVAL;
  const char *nm = ts_arena_strdup(g->mod->arena, name);
  if (!nm || !index_reserve(&g->node_index, g, true, g->nnodes)) return TS_ENOMEM;
  n->name = nm;
  index_place(&g->node_index, nm, n->id);
  return TS_OK;
}

/* Copies an attribute's payload into arena a. */
static bool attr_copy(ts_arena *a, tg_attr *dst, const tg_attr *src) {
  *dst = *src;
  dst->name = ts_arena_strdup(a, src->name);
  if (!dst->name) return false;
  dst->s = NULL;
  dst->ints = NULL;
  dst->floats = NULL;
  if (src->kind == TG_A_STRING && src->s && !(dst->s = ts_arena_strdup(a, src->s))) return false;
  if (src->kind == TG_A_INTS && src->n > 0 &&
      !(dst->ints = ts_arena_memdup(a, src->ints, (size_t)src->n * sizeof(int64_t))))
    return false;
  if (src->kind == TG_A_FLOATS && src->n > 0 &&
      !(dst->floats = ts_arena_memdup(a, src->floats, (size_t)src->n * sizeof(double))))
    return false;
  if (src->kind != TG_A_INTS && src->kind != TG_A_FLOATS) dst->n = 0;
  return true;
}

ts_status tg_node_set_attr(tg_graph *g, tg_node *n, const tg_attr *a) {
  if (!a || !a->name) return TS_EINVAL;
  if ((a->kind == TG_A_INTS && a->n > 0 && !a->ints) || (a->kind == TG_A_FLOATS && a->n > 0 && !a->floats) ||
      ((a->kind == TG_A_INTS || a->kind == TG_A_FLOATS) && a->n < 0))
    return TS_EINVAL;
  ts_arena *ar = g->mod->arena;
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, a->name)) return attr_copy(ar, &n->attrs[i], a) ? TS_OK : TS_ENOMEM;
  /* arena arrays cannot grow in place: copy into a new one (attribute lists are short) */
  tg_attr *na = TS_ANEWN(ar, tg_attr, n->nattr + 1);
  if (!na) return TS_ENOMEM;
  if (n->nattr) memcpy(na, n->attrs, (size_t)n->nattr * sizeof *na);
  if (!attr_copy(ar, &na[n->nattr], a)) return TS_ENOMEM;
  n->attrs = na;
  n->nattr++;
  return TS_OK;
}

const tg_attr *tg_node_attr(const tg_node *n, const char *name) {
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

/* the attribute name when it is a number (integer or float), else NULL */
static const tg_attr *num_attr(const tg_node *n, const char *name) {
  const tg_attr *a = tg_node_attr(n, name);
  return a && (a->kind == TG_A_INT || a->kind == TG_A_FLOAT) ? a : NULL;
}

void tg_shape_range(int r, int64_t *start, int64_t *end) {
  int64_t *v[2] = {start, end};
  for (int i = 0; i < 2; i++) {
    if (*v[i] < 0) *v[i] += r;
    *v[i] = *v[i] < 0 ? 0 : *v[i] > r ? r : *v[i];
  }
}

int64_t tg_attr_int(const tg_node *n, const char *name, int64_t def) {
  const tg_attr *a = num_attr(n, name);
  return !a ? def : a->kind == TG_A_INT ? a->i : (int64_t)a->f;
}

double tg_attr_float(const tg_node *n, const char *name, double def) {
  const tg_attr *a = num_attr(n, name);
  return !a ? def : a->kind == TG_A_FLOAT ? a->f : (double)a->i;
}

const char *tg_attr_str(const tg_node *n, const char *name, const char *def) {
  const tg_attr *a = tg_node_attr(n, name);
  return a && a->kind == TG_A_STRING && a->s ? a->s : def;
}

const int64_t *tg_attr_ints(const tg_node *n, const char *name, int *count) {
  const tg_attr *a = tg_node_attr(n, name);
  if (!a || a->kind != TG_A_INTS || a->n == 0) {
    if (count) *count = 0;
    return NULL;
  }
  if (count) *count = a->n;
  return a->ints;
}

/* ---- inputs, outputs, uses ------------------------------------------------ */

static ts_status push_id(int **tab, int *n, int id) {
  int *p = ts_realloc(*tab, (size_t)(*n + 1) * sizeof(int));
  if (!p) return TS_ENOMEM;
  p[(*n)++] = id;
  *tab = p;
  return TS_OK;
}

ts_status tg_graph_add_input(tg_graph *g, int value_id) {
  if (value_id < 0 || value_id >= g->nvalues) return TS_EINVAL;
  return push_id(&g->inputs, &g->ninputs, value_id);
}

ts_status tg_graph_add_output(tg_graph *g, int value_id) {
  if (value_id < 0 || value_id >= g->nvalues) return TS_EINVAL;
  return push_id(&g->outputs, &g->noutputs, value_id);
}

int tg_value_consumers(const tg_graph *g, int value_id, int *out, int max) {
  int cnt = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] == value_id) {
        if (out && cnt < max) out[cnt] = i;
        cnt++;
        break;
      }
  }
  return cnt;
}

void tg_replace_uses(tg_graph *g, int from, int to) {
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] == from) n->inputs[j] = to;
  }
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == from) g->outputs[i] = to;
}

/* ---- compaction ----------------------------------------------------------- */

ts_status tg_graph_compact(tg_graph *g, ts_diag *d) {
  int nv = g->nvalues, nn = g->nnodes;
  ts_status st = TS_ENOMEM;
  bool *keepv = ts_calloc((size_t)nv + 1, sizeof(bool));
  int *vmap = ts_malloc(((size_t)nv + 1) * sizeof(int));
  int *order = ts_malloc(((size_t)nn + 1) * sizeof(int));
  int *indeg = ts_calloc((size_t)nn + 1, sizeof(int));
  bool *placed = ts_calloc((size_t)nn + 1, sizeof(bool));
  tg_value **nvals = ts_malloc(((size_t)nv + 1) * sizeof *nvals);
  tg_node **nnodes = ts_malloc(((size_t)nn + 1) * sizeof *nnodes);
  /* the rebuilt name indexes, allocated up front: nothing fails once ids move */
  int vcap = index_cap_for(nv), ncap = index_cap_for(nn);
  int *vslots = ts_malloc((size_t)vcap * sizeof(int)), *nslots = ts_malloc((size_t)ncap * sizeof(int));
  if (!keepv || !vmap || !order || !indeg || !placed || !nvals || !nnodes || !vslots || !nslots) {
    ts_diag_set(d, TS_ENOMEM, "graph %s: out of memory compacting", g->name);
    goto done;
  }
  /* values: graph inputs (the calling convention), outputs, and anything a live node touches */
  for (int i = 0; i < g->ninputs; i++) keepv[g->inputs[i]] = true;
  for (int i = 0; i < g->noutputs; i++) keepv[g->outputs[i]] = true;
  int live = 0;
  for (int i = 0; i < nn; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    live++;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] >= 0) keepv[n->inputs[j]] = true;
    for (int j = 0; j < n->nout; j++) keepv[n->outputs[j]] = true;
  }
  /* a kept value whose producer is dead would be left undefined */
  for (int v = 0; v < nv; v++) {
    int p = g->values[v]->producer;
    if (keepv[v] && p >= 0 && g->nodes[p]->dead) {
      /* a dead producer is fine only when some live node produces it now */
      bool other = false;
      for (int i = 0; i < nn && !other; i++)
        if (!g->nodes[i]->dead)
          for (int j = 0; j < g->nodes[i]->nout; j++)
            if (g->nodes[i]->outputs[j] == v) other = true;
      if (!other) {
        st = ts_diag_set(d, TS_EINVAL, "graph %s: value %s is still used but its producer %s is dead",
                         g->name, g->values[v]->name, g->nodes[p]->name);
        goto done;
      }
    }
  }
  /* topological order of live nodes: Kahn's algorithm, always taking the
   * lowest-numbered ready node so an already sorted graph keeps its order */
  for (int i = 0; i < nn; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nout; j++) g->values[n->outputs[j]]->producer = i;
  }
  for (int i = 0; i < nn; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++) {
      int v = n->inputs[j];
      if (v >= 0 && g->values[v]->producer >= 0 && g->values[v]->producer != i) indeg[i]++;
    }
  }
  int no = 0;
  /* the common case, an already sorted graph, in one pass */
  bool sorted = true;
  for (int i = 0; i < nn && sorted; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nin; j++) {
      int v = n->inputs[j];
      if (v >= 0 && g->values[v]->producer >= i) sorted = false;
    }
  }
  if (sorted)
    for (int i = 0; i < nn; i++)
      if (!g->nodes[i]->dead) order[no++] = i;
  while (no < live) {
    int pick = -1;
    for (int i = 0; i < nn; i++)
      if (!g->nodes[i]->dead && !placed[i] && indeg[i] == 0) { pick = i; break; }
    if (pick < 0) {
      st = ts_diag_set(d, TS_EINVAL, "graph %s: the live nodes form a cycle (%d of %d could be ordered)",
                       g->name, no, live);
      goto done;
    }
    placed[pick] = true;
    order[no++] = pick;
    tg_node *pn = g->nodes[pick];
    for (int i = 0; i < nn; i++) {
      tg_node *n = g->nodes[i];
      if (n->dead || placed[i]) continue;
      for (int j = 0; j < n->nin; j++) {
        int v = n->inputs[j];
        if (v < 0) continue;
        for (int k = 0; k < pn->nout; k++)
          if (pn->outputs[k] == v) indeg[i]--;
      }
    }
  }
  /* renumber values densely in their old relative order */
  int k = 0;
  for (int v = 0; v < nv; v++) {
    if (keepv[v]) {
      vmap[v] = k;
      nvals[k] = g->values[v];
      nvals[k]->id = k;
      nvals[k]->producer = -1;
      k++;
    } else {
      vmap[v] = -1;
    }
  }
  for (int i = 0; i < no; i++) {
    tg_node *n = g->nodes[order[i]];
    n->id = i;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] >= 0) n->inputs[j] = vmap[n->inputs[j]];
    for (int j = 0; j < n->nout; j++) {
      n->outputs[j] = vmap[n->outputs[j]];
      nvals[n->outputs[j]]->producer = i;
    }
    nnodes[i] = n;
  }
  for (int i = 0; i < g->ninputs; i++) g->inputs[i] = vmap[g->inputs[i]];
  for (int i = 0; i < g->noutputs; i++) g->outputs[i] = vmap[g->outputs[i]];
  if (k) memcpy(g->values, nvals, (size_t)k * sizeof *nvals);
  if (no) memcpy(g->nodes, nnodes, (size_t)no * sizeof *nnodes);
  g->nvalues = k;
  g->nnodes = no;
  index_fill(&g->value_index, vslots, vcap, g, false, k);
  index_fill(&g->node_index, nslots, ncap, g, true, no);
  vslots = nslots = NULL;
  st = TS_OK;
done:
  ts_free(vslots);
  ts_free(nslots);
  ts_free(keepv);
  ts_free(vmap);
  ts_free(order);
  ts_free(indeg);
  ts_free(placed);
  ts_free(nvals);
  ts_free(nnodes);
  return st;
}

/* ---- verification --------------------------------------------------------- */

ts_status tg_graph_verify(const tg_graph *g, ts_diag *d) {
  char b1[32], b2[32];
  for (int v = 0; v < g->nvalues; v++) {
    const tg_value *val = g->values[v];
    if (val->id != v) return ts_diag_set(d, TS_EINVAL, "graph %s: value %s has id %d at index %d", g->name, val->name, val->id, v);
    if (val->dtype.code >= IR_DTYPE_COUNT || val->dtype.code == IR_HANDLE)
      return ts_diag_set(d, TS_EINVAL, "graph %s: value %s has no tensor element type", g->name, val->name);
    if (val->kind != TG_V_INTER && val->producer >= 0)
      return ts_diag_set(d, TS_EINVAL, "graph %s: %s %s has a producer (%s)", g->name,
                         val->kind == TG_V_INPUT ? "input" : "constant", val->name, g->nodes[val->producer]->name);
    if (val->kind == TG_V_CONST && val->data) {
      int64_t n = tg_value_numel(val);
      if (n < 0)
        return ts_diag_set(d, TS_EINVAL, "graph %s: constant %s has a symbolic shape", g->name, val->name);
      if ((size_t)n * (size_t)ir_dtype_bytes(val->dtype) != val->nbytes)
        return ts_diag_set(d, TS_EINVAL, "graph %s: constant %s holds %zu bytes, its type needs %" PRId64, g->name,
                           val->name, val->nbytes, n * ir_dtype_bytes(val->dtype));
    }
    /* names are unique and indexed: the index answers this value's own id */
    int w = tg_value_find(g, val->name);
    if (w < 0)
      return ts_diag_set(d, TS_EINVAL, "graph %s: value %s (id %d) is missing from the name index", g->name, val->name, v);
    if (w != v)
      return ts_diag_set(d, TS_EINVAL, "graph %s: two values are named %s (ids %d and %d)", g->name, val->name,
                         w < v ? w : v, w < v ? v : w);
  }
  for (int i = 0; i < g->ninputs; i++) {
    int v = g->inputs[i];
    if (v < 0 || v >= g->nvalues) return ts_diag_set(d, TS_EINVAL, "graph %s: input %d refers to no value", g->name, i);
    if (g->values[v]->kind != TG_V_INPUT)
      return ts_diag_set(d, TS_EINVAL, "graph %s: graph input %d (%s) is not an input value", g->name, i, g->values[v]->name);
  }
  /* defined[v]: the value is available at the current point of the walk */
  bool *defined = ts_calloc((size_t)g->nvalues + 1, sizeof(bool));
  if (!defined) return ts_diag_set(d, TS_ENOMEM, "graph %s: out of memory verifying", g->name);
  ts_status st = TS_OK;
  for (int v = 0; v < g->nvalues; v++) defined[v] = g->values[v]->kind != TG_V_INTER;
  for (int i = 0; i < g->nnodes && st == TS_OK; i++) {
    const tg_node *n = g->nodes[i];
    if (n->id != i) { st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s has id %d at index %d", g->name, n->name, n->id, i); break; }
    if (n->dead) continue;
    for (int j = 0; j < n->nin && st == TS_OK; j++) {
      int v = n->inputs[j];
      if (v == -1) continue;
      if (v < -1 || v >= g->nvalues)
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): input %d refers to no value (id %d)", g->name, n->name,
                         tg_op_name(n->op), j, v);
      else if (!defined[v])
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): input %d (%s) is used before it is defined", g->name,
                         n->name, tg_op_name(n->op), j, g->values[v]->name);
    }
    for (int j = 0; j < n->nout && st == TS_OK; j++) {
      int v = n->outputs[j];
      if (v < 0 || v >= g->nvalues)
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %d refers to no value (id %d)", g->name, n->name,
                         tg_op_name(n->op), j, v);
      else if (g->values[v]->kind != TG_V_INTER)
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): writes %s, which is not an intermediate", g->name,
                         n->name, tg_op_name(n->op), g->values[v]->name);
      else if (defined[v] || g->values[v]->producer != i)
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s (%s): output %s has another producer", g->name, n->name,
                         tg_op_name(n->op), g->values[v]->name);
      else
        defined[v] = true;
    }
    if (st != TS_OK) break;
    if (n->op == TG_OP_CALL) {
      ir_func *f = n->callee ? ir_module_get(g->mod, n->callee) : NULL;
      if (!f) {
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s calls @%s, which is not a PrimFunc of the module", g->name,
                         n->name, n->callee ? n->callee : "(none)");
        break;
      }
      if (n->nin != f->ninputs || n->nout != f->nparams - f->ninputs) {
        st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s calls @%s with %d inputs and %d outputs; it takes %d and %d",
                         g->name, n->name, f->name, n->nin, n->nout, f->ninputs, f->nparams - f->ninputs);
        break;
      }
      for (int j = 0; j < n->nin + n->nout && st == TS_OK; j++) {
        int v = j < n->nin ? n->inputs[j] : n->outputs[j - n->nin];
        if (v < 0) {
          st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s calls @%s with argument %d omitted", g->name, n->name,
                           f->name, j);
          break;
        }
        ir_dtype pt = f->params[j]->dtype;
        pt.lanes = 1;
        if (!ir_dtype_eq(g->values[v]->dtype, pt))
          st = ts_diag_set(d, TS_EINVAL, "graph %s: node %s calls @%s: argument %d (%s) is %s, parameter %s is %s",
                           g->name, n->name, f->name, j, g->values[v]->name,
                           ir_dtype_str(g->values[v]->dtype, b1, sizeof b1), f->params[j]->name,
                           ir_dtype_str(pt, b2, sizeof b2));
      }
    }
  }
  for (int i = 0; i < g->noutputs && st == TS_OK; i++) {
    int v = g->outputs[i];
    if (v < 0 || v >= g->nvalues)
      st = ts_diag_set(d, TS_EINVAL, "graph %s: output %d refers to no value", g->name, i);
    else if (!defined[v])
      st = ts_diag_set(d, TS_EINVAL, "graph %s: graph output %s is never produced", g->name, g->values[v]->name);
  }
  ts_free(defined);
  return st;
}

/* ---- printing ------------------------------------------------------------- */

static void put_quoted(ts_strbuf *out, const char *name);

/* A name prints bare when it is an identifier-like word, else quoted. */
static void put_name(ts_strbuf *out, char sigil, const char *name) {
  bool plain = name[0] != '\0';
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '.' || *p == '/' || *p == ':' || *p == '-' || *p == '%'))
      plain = false;
  if (plain) {
    ts_strbuf_printf(out, "%c%s", sigil, name);
    return;
  }
  ts_strbuf_printf(out, "%c", sigil);
  put_quoted(out, name);
}

static void put_quoted(ts_strbuf *out, const char *name) {
  ts_strbuf_append(out, "\"");
  for (const char *p = name; *p; p++) {
    if (*p == '"' || *p == '\\') ts_strbuf_printf(out, "\\%c", *p);
    else if ((unsigned char)*p < 0x20) ts_strbuf_printf(out, "\\x%02x", (unsigned char)*p);
    else ts_strbuf_appendn(out, p, 1);
  }
  ts_strbuf_append(out, "\"");
}

void tg_value_type_str(const tg_value *v, ts_strbuf *out) {
  char b[32];
  ts_strbuf_printf(out, "%s[", ir_dtype_str(v->dtype, b, sizeof b));
  for (int i = 0; i < v->ndim; i++) {
    if (i) ts_strbuf_append(out, ",");
    if (v->dims[i].sym) ts_strbuf_append(out, v->dims[i].sym);
    else ts_strbuf_printf(out, "%" PRId64, v->dims[i].value);
  }
  ts_strbuf_append(out, "]");
}

/* The first few elements of a constant. */
static void put_data(ts_strbuf *out, const tg_value *v) {
  int64_t n = tg_value_numel(v);
  if (!v->data || n < 0) {
    ts_strbuf_append(out, " <no data>");
    return;
  }
  int64_t show = n < 6 ? n : 4;
  ts_strbuf_append(out, " [");
  for (int64_t i = 0; i < show; i++) {
    if (i) ts_strbuf_append(out, ", ");
    const unsigned char *p = (const unsigned char *)v->data;
    switch (v->dtype.code) {
    case IR_F32: { float x; memcpy(&x, p + i * 4, 4); ts_strbuf_printf(out, "%.6g", (double)x); break; }
    case IR_F64: { double x; memcpy(&x, p + i * 8, 8); ts_strbuf_printf(out, "%.6g", x); break; }
    case IR_I8: ts_strbuf_printf(out, "%d", (int)(int8_t)p[i]); break;
    case IR_U8: ts_strbuf_printf(out, "%u", (unsigned)p[i]); break;
    case IR_BOOL: ts_strbuf_append(out, p[i] ? "true" : "false"); break;
    case IR_I16: { int16_t x; memcpy(&x, p + i * 2, 2); ts_strbuf_printf(out, "%d", (int)x); break; }
    case IR_I32: { int32_t x; memcpy(&x, p + i * 4, 4); ts_strbuf_printf(out, "%" PRId32, x); break; }
    case IR_U32: { uint32_t x; memcpy(&x, p + i * 4, 4); ts_strbuf_printf(out, "%" PRIu32, x); break; }
    case IR_I64: { int64_t x; memcpy(&x, p + i * 8, 8); ts_strbuf_printf(out, "%" PRId64, x); break; }
    default: ts_strbuf_append(out, "?"); break;
    }
  }
  if (show < n) ts_strbuf_printf(out, ", ... (%" PRId64 " elements)", n);
  ts_strbuf_append(out, "]");
}

static void put_attr(ts_strbuf *out, const tg_attr *a) {
  ts_strbuf_printf(out, "%s=", a->name);
  switch (a->kind) {
  case TG_A_INT: ts_strbuf_printf(out, "%" PRId64, a->i); break;
  case TG_A_FLOAT: ts_strbuf_printf(out, "%g", a->f); break;
  case TG_A_STRING: put_quoted(out, a->s ? a->s : ""); break;
  case TG_A_INTS:
  case TG_A_FLOATS:
    ts_strbuf_append(out, "[");
    for (int i = 0; i < a->n; i++) {
      if (i) ts_strbuf_append(out, ",");
      if (a->kind == TG_A_INTS) ts_strbuf_printf(out, "%" PRId64, a->ints[i]);
      else ts_strbuf_printf(out, "%g", a->floats[i]);
    }
    ts_strbuf_append(out, "]");
    break;
  }
}

static void put_value(ts_strbuf *out, const tg_graph *g, int id) {
  if (id < 0) ts_strbuf_append(out, "_");
  else if (id >= g->nvalues) ts_strbuf_printf(out, "%%<bad %d>", id);
  else put_name(out, '%', g->values[id]->name);
}

void tg_graph_print(const tg_graph *g, ts_strbuf *out) {
  ts_strbuf_append(out, "graph ");
  put_name(out, '@', g->name);
  ts_strbuf_append(out, "(");
  for (int i = 0; i < g->ninputs; i++) {
    if (i) ts_strbuf_append(out, ", ");
    put_value(out, g, g->inputs[i]);
    if (g->inputs[i] >= 0 && g->inputs[i] < g->nvalues) {
      ts_strbuf_append(out, ": ");
      tg_value_type_str(g->values[g->inputs[i]], out);
    }
  }
  ts_strbuf_append(out, ")");
  if (g->opset) ts_strbuf_printf(out, " opset %d", g->opset);
  ts_strbuf_append(out, " {\n");
  int nconst = 0;
  for (int v = 0; v < g->nvalues; v++) {
    const tg_value *val = g->values[v];
    if (val->kind != TG_V_CONST) continue;
    nconst++;
    ts_strbuf_append(out, "  ");
    put_name(out, '%', val->name);
    ts_strbuf_append(out, " = const ");
    tg_value_type_str(val, out);
    put_data(out, val);
    ts_strbuf_append(out, "\n");
  }
  if (nconst) ts_strbuf_append(out, "\n");
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    ts_strbuf_append(out, "  ");
    for (int j = 0; j < n->nout; j++) {
      if (j) ts_strbuf_append(out, ", ");
      put_value(out, g, n->outputs[j]);
    }
    ts_strbuf_append(out, n->nout ? " = " : "");
    if (n->op == TG_OP_CALL) {
      ts_strbuf_append(out, "call ");
      put_name(out, '@', n->callee ? n->callee : "?");
    } else {
      ts_strbuf_append(out, tg_op_name(n->op));
    }
    ts_strbuf_append(out, "(");
    for (int j = 0; j < n->nin; j++) {
      if (j) ts_strbuf_append(out, ", ");
      put_value(out, g, n->inputs[j]);
    }
    ts_strbuf_append(out, ")");
    if (n->nattr) {
      ts_strbuf_append(out, " {");
      for (int j = 0; j < n->nattr; j++) {
        if (j) ts_strbuf_append(out, ", ");
        put_attr(out, &n->attrs[j]);
      }
      ts_strbuf_append(out, "}");
    }
    ts_strbuf_append(out, " : ");
    for (int j = 0; j < n->nout; j++) {
      if (j) ts_strbuf_append(out, ", ");
      if (n->outputs[j] >= 0 && n->outputs[j] < g->nvalues) tg_value_type_str(g->values[n->outputs[j]], out);
    }
    ts_strbuf_append(out, "\n");
  }
  ts_strbuf_append(out, "  return ");
  for (int i = 0; i < g->noutputs; i++) {
    if (i) ts_strbuf_append(out, ", ");
    put_value(out, g, g->outputs[i]);
  }
  ts_strbuf_append(out, "\n}\n");
}
