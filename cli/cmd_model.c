/* cmd_model.c — whole models: `tessel build MODEL.onnx -o MODEL.so` (import,
 * graph passes, one kernel per distinct fused PrimFunc scheduled from the
 * tuning log or by the default schedule, plan + weights, one shared
 * library: docs/MODEL.md) and `tessel run MODEL.so` (the graph executor of
 * runtime/model.c on .npy or seeded random inputs; outputs as .npy;
 * latency; on a board through the tracker with --tracker). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/llvm.h"
#include "runtime/model.h"
#include "ir/graph/graph.h"
#include "ir/graph/onnx.h"
#include "ir/graph/passes.h"
#include "ir/graph/tasks.h"
#include "ir/schedule/layout.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "include/tessel/tessel_model.h"
#include "tuner/build.h"
#include "cli/cli.h"
#include "tuner/database.h"
#include "tuner/npy.h"
#include "rpc/client.h"
#include "tracker/tracker_client.h"

#define MAX_SYMS 16

typedef struct sym_list {
  int n;
  const char *names[MAX_SYMS];
  int64_t vals[MAX_SYMS];
  char buf[MAX_SYMS][128];
} sym_list;

static bool parse_sym(const char *cmd, const char *s, sym_list *l) {
  const char *eq = strchr(s, '=');
  char *end = NULL;
  long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
  if (!eq || eq == s || !end || *end || end == eq + 1 || v < 1 || (size_t)(eq - s) >= sizeof l->buf[0]) {
    fprintf(stderr, "tessel %s: --sym wants NAME=VALUE with VALUE >= 1, got '%s'\n", cmd, s);
    return false;
  }
  if (l->n == MAX_SYMS) {
    fprintf(stderr, "tessel %s: at most %d --sym options\n", cmd, MAX_SYMS);
    return false;
  }
  memcpy(l->buf[l->n], s, (size_t)(eq - s));
  l->buf[l->n][eq - s] = '\0';
  l->names[l->n] = l->buf[l->n];
  l->vals[l->n++] = v;
  return true;
}

static int64_t sym_value(const sym_list *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->names[i], name)) return l->vals[i];
  return TG_TASK_DEFAULT_SYM;
}

static int sig_write(const char *so, const tsrt_model_plan *p);

/* ==== build ================================================================================ */

typedef struct mkernel {
  ir_func *func;        /* the PrimFunc (maybe symbolic) */
  sch_traced *sched;    /* its schedule */
  cg_lowered low;
  bool tuned;           /* the log's record was replayed on it */
  int spec;             /* kernel index of its tuned specialisation, or -1 */
  int64_t spec_vals[TSRT_MODEL_MAX_SYMS];
  char key[17];         /* task key (bound as tasks bind) */
  int nlayout;          /* the schedule's weight layout rewrites (docs/LAYOUT.md) */
  sch_layout_map layout[8];
} mkernel;

typedef struct build_state {
  const char *path, *log, *out, *target_str;
  sym_list syms;
  bool json;
  cg_target tg;
  ts_arena *arena;
  ir_module *mod;
  tg_graph *g;
  tun_db *db;
  mkernel *k;
  int nk, capk;
  int ntuned, ndefault, nspec, nrecord_unused;
  int nlayout_kept;     /* records whose layout rewrite was dropped (a non-constant input) */
  int npacked_weights, npacked_copies;
} build_state;

static int find_kernel(build_state *b, const ir_func *f) {
  uint64_t h = ir_struct_hash_func(f);
  for (int i = 0; i < b->nk; i++)
    if (b->k[i].func && ir_struct_hash_func(b->k[i].func) == h && ir_struct_equal_func(b->k[i].func, f))
      return i;
  return -1;
}

static mkernel *new_kernel(build_state *b, ts_diag *d) {
  if (b->nk == b->capk) {
    int cap = b->capk ? b->capk * 2 : 16;
    mkernel *nk = ts_realloc(b->k, sizeof *nk * (size_t)cap);
    if (!nk) return ts_diag_set(d, TS_ENOMEM, "out of memory"), NULL;
    b->k = nk;
    b->capk = cap;
  }
  mkernel *k = &b->k[b->nk++];
  memset(k, 0, sizeof *k);
  k->spec = -1;
  return k;
}

/* The input of call n that param p of its kernel reads: a constant the
 * build can pre-pack (a graph constant with data that is no graph output)? */
static bool packable_input(const build_state *b, const tg_node *n, int p) {
  if (p >= n->nin || n->inputs[p] < 0 || n->inputs[p] >= b->g->nvalues) return false;
  const tg_value *v = b->g->values[n->inputs[p]];
  if (v->kind != TG_V_CONST || !v->data) return false;
  for (int o = 0; o < b->g->noutputs; o++)
    if (b->g->outputs[o] == n->inputs[p]) return false;
  return true;
}

/* Every live call of f (or of a structurally equal function, which shares
 * its kernel) feeds each param a map re-lays from a constant: why not, or
 * NULL. */
static const char *layout_blocker(const build_state *b, const ir_func *f, const sch_layout_map *maps, int n) {
  uint64_t h = ir_struct_hash_func(f);
  for (int i = 0; i < b->g->nnodes; i++) {
    const tg_node *nd = b->g->nodes[i];
    if (nd->dead || nd->op != TG_OP_CALL) continue;
    const ir_func *g = ir_module_get(b->mod, nd->callee);
    if (!g || (g != f && (ir_struct_hash_func(g) != h || !ir_struct_equal_func(g, f)))) continue;
    for (int m = 0; m < n; m++)
      if (!packable_input(b, nd, maps[m].param)) return nd->name;
  }
  return NULL;
}

/* Replays the best verified record of key on f; NULL (and no error) when
 * there is none or it does not apply. A record that re-lays weights
 * (TransformLayout) keeps its maps in maps[0..*nmaps) when every call of f
 * (calls_of) feeds those params from constants, which the build then
 * pre-packs; otherwise (or with calls_of NULL: a specialisation, whose calls
 * pass the same tensors to the symbolic kernel) the rewrite is dropped and
 * the kernel reads the original layout. */
static sch_traced *from_log(build_state *b, const char *key, const ir_func *f, const ir_func *calls_of,
                            bool *had_record, sch_layout_map *maps, int *nmaps) {
  *had_record = false;
  *nmaps = 0;
  if (!b->db) return NULL;
  const tun_record *r = tun_db_best(b->db, key, b->tg.text);
  if (!r || !r->trace) return NULL;
  *had_record = true;
  ts_diag d;
  ts_diag_clear(&d);
  sch_trace *tr = sch_trace_from_json(r->trace, &d);
  int nm = tr ? sch_layout_maps_of_trace(tr, f, maps, 8, &d) : 0;
  if (nm > 0) {
    const char *why = calls_of ? layout_blocker(b, calls_of, maps, nm) : "a symbolic kernel shares its calls";
    if (why) {
      sch_trace *plain = sch_trace_without_kind(tr, SCH_I_TRANSFORM_LAYOUT);
      fprintf(stderr, "tessel build: %s [%s]: the record re-lays a weight, but %s%s; kept the original layout\n",
              f->name ? f->name : "?", key, calls_of ? "it is not a constant in call " : "", why);
      sch_trace_free(tr);
      tr = plain;
      nm = 0;
      b->nlayout_kept++;
    }
  }
  *nmaps = nm > 0 ? nm : 0;
  sch_traced *s = tr && nm >= 0 ? sch_trace_replay(tr, f, 1, &d) : NULL;
  sch_trace_free(tr);
  if (!s)
    fprintf(stderr, "tessel build: the record for %s [%s] does not replay on it (%s); default schedule\n",
            f->name ? f->name : "?", key, d.msg);
  return s;
}

static ts_status schedule_kernel(build_state *b, mkernel *k, ts_diag *d) {
  ir_func *bound = tg_task_bind(b->arena, k->func, b->syms.n, b->syms.names, b->syms.vals, d);
  if (!bound) return d->code ? d->code : TS_EINTERNAL;
  ir_workload_key(bound, k->key);
  bool had = false;
  if (k->func->nsyms == 0) {
    k->sched = from_log(b, k->key, k->func, k->func, &had, k->layout, &k->nlayout);
    k->tuned = k->sched != NULL;
    if (!k->tuned) k->nlayout = 0;
  } else {
    /* symbolic: the default schedule serves every size; the record (tuned
     * at the bound sizes) becomes a specialisation used when they match
     * (in the original layout: both kernels take the same tensors) */
    sch_layout_map unused[8];
    int nunused;
    sch_traced *ss = from_log(b, k->key, bound, NULL, &had, unused, &nunused);
    if (ss) {
      int idx = (int)(k - b->k);
      mkernel *sk = new_kernel(b, d);
      if (!sk) {
        sch_traced_free(ss);
        return TS_ENOMEM;
      }
      k = &b->k[idx]; /* new_kernel may move the array */
      sk->func = NULL; /* never matched by find_kernel */
      sk->sched = ss;
      sk->tuned = true;
      memcpy(sk->key, k->key, 17);
      ts_status st = cg_lower(b->arena, sch_traced_func(ss), &b->tg, &sk->low, d);
      if (st != TS_OK) return st;
      k->spec = (int)(sk - b->k);
      for (int s = 0; s < k->func->nsyms; s++) k->spec_vals[s] = sym_value(&b->syms, k->func->syms[s]->name);
      b->nspec++;
    }
  }
  if (had && !k->tuned && k->spec < 0) b->nrecord_unused++;
  if (!k->sched) {
    ts_status st = tun_schedule(k->func, NULL, &b->tg, &k->sched, d);
    if (st != TS_OK) return st;
  }
  if (k->tuned) b->ntuned++;
  else b->ndefault++;
  return cg_lower(b->arena, sch_traced_func(k->sched), &b->tg, &k->low, d);
}

static int sym_index(const char **names, int *n, const char *s) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(names[i], s)) return i;
  if (*n == TSRT_MODEL_MAX_SYMS) return -1;
  names[*n] = s;
  return (*n)++;
}

/* A constant pre-packed for a kernel that re-lays it (docs/LAYOUT.md): the
 * value, the map, and the plan tensor holding the packed copy. */
typedef struct packed_use {
  int value;
  const sch_layout_map *map;
  int tensor;
} packed_use;

static bool same_map(const sch_layout_map *a, const sch_layout_map *c) {
  if (a->ndim != c->ndim || a->ncomp != c->ncomp || a->naxes != c->naxes) return false;
  for (int j = 0; j < a->ncomp; j++)
    if (a->comp[j].dim != c->comp[j].dim || a->comp[j].stride != c->comp[j].stride ||
        a->comp[j].extent != c->comp[j].extent)
      return false;
  for (int i = 0; i < a->naxes; i++)
    if (a->group[i] != c->group[i]) return false;
  return true;
}

/* The kernel's map for param a, or NULL (reads the original layout). */
static const sch_layout_map *kernel_map(const mkernel *k, int a) {
  for (int m = 0; m < k->nlayout; m++)
    if (k->layout[m].param == a) return &k->layout[m];
  return NULL;
}

static int find_use(const packed_use *u, int n, int value, const sch_layout_map *map) {
  for (int i = 0; i < n; i++)
    if (u[i].value == value && same_map(u[i].map, map)) return i;
  return -1;
}

static ts_status make_plan(build_state *b, tsrt_model_plan *p, ts_diag *d) {
  tg_graph *g = b->g;
  memset(p, 0, sizeof *p);
  /* pre-packing: each (constant, map) a kernel reads gets one packed tensor;
   * a constant nobody reads in its original layout (no other call, no graph
   * output) is replaced by its first packing, every other packing is an
   * extra constant (a weight two kernels want in two layouts: two copies) */
  int nuse = 0, capuse = 0;
  for (int i = 0; i < b->nk; i++) capuse += b->k[i].nlayout;
  packed_use *uses = TS_ANEWN(b->arena, packed_use, capuse ? capuse * g->nnodes : 1);
  bool *plain_use = TS_ANEWN(b->arena, bool, g->nvalues ? g->nvalues : 1);
  bool *taken = TS_ANEWN(b->arena, bool, g->nvalues ? g->nvalues : 1);
  if (!uses || !plain_use || !taken) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int o = 0; o < g->noutputs; o++) plain_use[g->outputs[o]] = true;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    const ir_func *f = n->callee ? ir_module_get(b->mod, n->callee) : NULL;
    int kidx = f ? find_kernel(b, f) : -1;
    for (int a = 0; a < n->nin; a++) {
      int v = n->inputs[a];
      if (v < 0) continue;
      const sch_layout_map *m = kidx >= 0 ? kernel_map(&b->k[kidx], a) : NULL;
      if (!m) {
        plain_use[v] = true;
      } else if (find_use(uses, nuse, v, m) < 0) {
        if (!packable_input(b, n, a))
          return ts_diag_set(d, TS_EINTERNAL, "node %s: kernel %d re-lays input %d, which is no constant", n->name,
                             kidx, a);
        uses[nuse++] = (packed_use){.value = v, .map = m, .tensor = -1};
      }
    }
  }
  int nextra = 0;
  for (int u = 0; u < nuse; u++) {
    int v = uses[u].value;
    if (!plain_use[v] && !taken[v]) {
      uses[u].tensor = v;
      taken[v] = true;
    } else {
      uses[u].tensor = g->nvalues + nextra++;
    }
  }
  b->npacked_copies = nuse;
  b->npacked_weights = 0;
  for (int v = 0; v < g->nvalues; v++) {
    bool any = false;
    for (int u = 0; u < nuse && !any; u++) any = uses[u].value == v;
    b->npacked_weights += any;
  }
  int ntensors = g->nvalues + nextra;
  p->abi_version = TSRT_MODEL_ABI_VERSION;
  p->name = g->name;
  p->target = b->tg.text;
  const char **syms = TS_ANEWN(b->arena, const char *, TSRT_MODEL_MAX_SYMS);
  tsrt_model_tensor *ts = TS_ANEWN(b->arena, tsrt_model_tensor, ntensors ? ntensors : 1);
  const sch_layout_map **tmap = TS_ANEWN(b->arena, const sch_layout_map *, ntensors ? ntensors : 1);
  int *tsrc = TS_ANEWN(b->arena, int, ntensors ? ntensors : 1); /* the value a tensor holds */
  tsrt_model_call *cs = TS_ANEWN(b->arena, tsrt_model_call, g->nnodes ? g->nnodes : 1);
  int32_t *ins = TS_ANEWN(b->arena, int32_t, g->ninputs ? g->ninputs : 1);
  int32_t *outs = TS_ANEWN(b->arena, int32_t, g->noutputs ? g->noutputs : 1);
  if (!syms || !ts || !cs || !ins || !outs || !tmap || !tsrc) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int nsyms = 0;
  uint64_t wbytes = 0;
  for (int v = 0; v < g->nvalues; v++) {
    const tg_value *x = g->values[v];
    if (x->ndim > TSRT_MAX_DIMS)
      return ts_diag_set(d, TS_EUNSUPPORTED, "value %s has %d dims (models allow %d)", x->name, x->ndim,
                         TSRT_MAX_DIMS);
    tsrt_model_tensor *t = &ts[v];
    t->name = x->name;
    t->kind = x->kind == TG_V_INPUT ? TSRT_T_INPUT : x->kind == TG_V_CONST ? TSRT_T_CONST : TSRT_T_INTER;
    t->dtype = x->dtype.code;
    t->ndim = x->ndim;
    for (int j = 0; j < x->ndim; j++) {
      if (!x->dims[j].sym) {
        t->shape[j] = x->dims[j].value;
        continue;
      }
      int k = sym_index(syms, &nsyms, x->dims[j].sym);
      if (k < 0) return ts_diag_set(d, TS_EUNSUPPORTED, "more than %d symbols", TSRT_MODEL_MAX_SYMS);
      t->shape[j] = TSRT_DIM_SYM(k);
    }
    tsrc[v] = v;
    if (x->kind == TG_V_CONST) {
      if (!x->data && x->nbytes) return ts_diag_set(d, TS_EINVAL, "constant %s has no data", x->name);
      wbytes = (wbytes + 63) / 64 * 64;
      t->offset = wbytes;
      t->nbytes = x->nbytes;
      wbytes += x->nbytes;
    }
  }
  /* packed constants: in place, or extra tensors after the graph's values */
  for (int u = 0; u < nuse; u++) {
    int id = uses[u].tensor, v = uses[u].value;
    const tg_value *x = g->values[v];
    tsrt_model_tensor *t = &ts[id];
    if (id >= g->nvalues) {
      *t = ts[v];
      t->name = ts_arena_printf(b->arena, "%s.packed%d", x->name, id - g->nvalues);
      if (!t->name) return ts_diag_set(d, TS_ENOMEM, "out of memory");
      wbytes = (wbytes + 63) / 64 * 64;
      t->offset = wbytes;
      wbytes += x->nbytes;
    }
    int64_t shape[SCH_LAYOUT_MAX_AXES];
    t->ndim = sch_layout_packed_shape(uses[u].map, shape);
    for (int j = 0; j < t->ndim; j++) t->shape[j] = shape[j];
    tmap[id] = uses[u].map;
    tsrc[id] = v;
  }
  uint8_t *w = wbytes ? ts_malloc((size_t)wbytes) : NULL;
  if (wbytes && !w) return ts_diag_set(d, TS_ENOMEM, "out of memory for %llu bytes of weights",
                                       (unsigned long long)wbytes);
  if (w) memset(w, 0, (size_t)wbytes);
  for (int t = 0; t < ntensors; t++) {
    const tg_value *x = g->values[tsrc[t]];
    if (x->kind != TG_V_CONST || !x->nbytes) continue;
    if (tmap[t]) /* host-side evaluation of the kernel's map */
      sch_layout_pack(tmap[t], (size_t)ir_dtype_bytes(x->dtype), x->data, w + ts[t].offset);
    else
      memcpy(w + ts[t].offset, x->data, x->nbytes);
  }
  p->weights = w;
  p->weights_bytes = wbytes;
  int nc = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    /* structurally equal PrimFuncs share one kernel */
    const ir_func *f = n->callee ? ir_module_get(b->mod, n->callee) : NULL;
    int kidx = f ? find_kernel(b, f) : -1;
    if (kidx < 0) return ts_diag_set(d, TS_EINTERNAL, "node %s: no kernel for %s", n->name, n->callee);
    const mkernel *k = &b->k[kidx];
    tsrt_model_call *c = &cs[nc++];
    c->kernel = kidx;
    c->nargs = n->nin + n->nout;
    c->ninputs = n->nin;
    if (n->nin != f->ninputs || c->nargs != f->nparams)
      return ts_diag_set(d, TS_EINVAL, "node %s passes %d inputs and %d outputs to %s, which takes %d and %d",
                         n->name, n->nin, n->nout, n->callee, f->ninputs, f->nparams - f->ninputs);
    int32_t *args = TS_ANEWN(b->arena, int32_t, c->nargs);
    int32_t *cs_syms = TS_ANEWN(b->arena, int32_t, f->nsyms ? f->nsyms : 1);
    int64_t *sv = TS_ANEWN(b->arena, int64_t, f->nsyms ? f->nsyms : 1);
    if (!args || !cs_syms || !sv) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    for (int a = 0; a < n->nin; a++) {
      if (n->inputs[a] < 0)
        return ts_diag_set(d, TS_EINVAL, "node %s (call of %s): input %d is omitted", n->name, n->callee, a);
      args[a] = n->inputs[a];
      const sch_layout_map *m = kernel_map(k, a);
      int u = m ? find_use(uses, nuse, n->inputs[a], m) : -1;
      if (u >= 0) args[a] = uses[u].tensor; /* the packed copy */
    }
    for (int a = 0; a < n->nout; a++) args[n->nin + a] = n->outputs[a];
    c->args = args;
    c->nsyms = f->nsyms;
    for (int s = 0; s < f->nsyms; s++) {
      const char *sn = f->syms[s]->name;
      bool known = false;
      for (int q = 0; q < nsyms; q++) known |= !strcmp(syms[q], sn);
      if (!known)
        return ts_diag_set(d, TS_EINVAL, "node %s: %s's size var %s is no symbolic dim of the graph", n->name,
                           n->callee, sn);
      cs_syms[s] = sym_index(syms, &nsyms, sn);
      sv[s] = k->spec_vals[s];
    }
    c->syms = cs_syms;
    c->spec_kernel = k->spec;
    c->spec_values = k->spec >= 0 ? sv : NULL;
  }
  for (int i = 0; i < g->ninputs; i++) ins[i] = g->inputs[i];
  for (int i = 0; i < g->noutputs; i++) outs[i] = g->outputs[i];
  p->ntensors = ntensors;
  p->ncalls = nc;
  p->nsyms = nsyms;
  p->syms = syms;
  p->tensors = ts;
  p->calls = cs;
  p->ninputs = g->ninputs;
  p->inputs = ins;
  p->noutputs = g->noutputs;
  p->outputs = outs;
  return TS_OK;
}

static const char *build_usage =
    "usage: tessel build MODEL.onnx -o MODEL.so [--log LOG] [--target T] [--sym NAME=VALUE]... [--json]\n"
    "Imports the model, runs the graph passes and builds one shared library holding a kernel per\n"
    "distinct fused PrimFunc, the execution plan and the weights (docs/MODEL.md); run it with\n"
    "`tessel run MODEL.so` or the C API (include/tessel/tessel_model.h).\n"
    "  --log LOG          replay the best verified record per task key on this target (tasks without\n"
    "                     one get the default schedule; the build says how many)\n"
    "  --target T         llvm (host, default), \"llvm -mtriple=aarch64-linux-gnu\", ...\n"
    "  --sym NAME=VALUE   (or --bind, as tune-model) the size a symbolic dim was tuned at (the task\n"
    "                     keys' binding, default 1);\n"
    "                     the artifact still runs at any size\n"
    "  --json             print a JSON summary on stdout\n";

int tun_cmd_build_model(int argc, char **argv) {
  build_state b;
  memset(&b, 0, sizeof b);
  b.target_str = "llvm";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("%s", build_usage);
      return 0;
    } else if (!strcmp(a, "-o") && i + 1 < argc) {
      b.out = argv[++i];
    } else if (!strcmp(a, "--log") && i + 1 < argc) {
      b.log = argv[++i];
    } else if (!strcmp(a, "--target") && i + 1 < argc) {
      b.target_str = argv[++i];
    } else if ((!strcmp(a, "--sym") || !strcmp(a, "--bind")) && i + 1 < argc) {
      if (!parse_sym("build", argv[++i], &b.syms)) return 2;
    } else if (!strcmp(a, "--json")) {
      b.json = true;
    } else if (a[0] == '-' || b.path) {
      fprintf(stderr, "tessel build: unexpected argument '%s'\n%s", a, build_usage);
      return 2;
    } else {
      b.path = a;
    }
  }
  if (!b.path || !b.out) {
    fprintf(stderr, "tessel build: %s\n%s", !b.path ? "no model given" : "-o MODEL.so is required", build_usage);
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  int rc = 2;
  double t0 = tsrt_now();
  tsrt_model_plan plan;
  memset(&plan, 0, sizeof plan);
  const cg_lowered **lows = NULL;
  b.mod = ir_module_new();
  if (!b.mod) {
    fprintf(stderr, "tessel build: out of memory\n");
    return 1;
  }
  b.arena = b.mod->arena;
  if (cg_target_parse(b.target_str, &b.tg, &d) || cg_llvm_resolve_target(&b.tg, &d)) {
    fprintf(stderr, "tessel build: %s\n", d.msg);
    goto out;
  }
  if (b.log) {
    int nwarn = 0;
    b.db = tun_db_load(b.log, stderr, &nwarn, &d);
    if (!b.db) {
      fprintf(stderr, "tessel build: %s\n", d.msg);
      goto out;
    }
  }
  if (tg_onnx_import(b.path, b.mod, &b.g, &d) != TS_OK || tg_run_pipeline(b.g, NULL, &d) != TS_OK ||
      tg_graph_verify(b.g, &d) != TS_OK) {
    fprintf(stderr, "tessel build: %s: %s\n", b.path, d.msg);
    goto out;
  }
  /* a --sym for a symbol the model does not have is a mistake worth saying */
  for (int s = 0; s < b.syms.n; s++) {
    bool found = false;
    for (int v = 0; v < b.g->nvalues && !found; v++)
      for (int a = 0; a < b.g->values[v]->ndim && !found; a++)
        found = b.g->values[v]->dims[a].sym && !strcmp(b.g->values[v]->dims[a].sym, b.syms.names[s]);
    if (!found) {
      fprintf(stderr, "tessel build: %s has no symbolic dim named '%s'\n", b.path, b.syms.names[s]);
      goto out;
    }
  }
  /* one kernel per distinct PrimFunc the live calls name */
  for (int i = 0; i < b.g->nnodes; i++) {
    const tg_node *n = b.g->nodes[i];
    if (n->dead) continue;
    if (n->op != TG_OP_CALL) {
      fprintf(stderr, "tessel build: %s: node %s is still a %s after the pass pipeline\n", b.path, n->name,
              tg_op_name(n->op));
      goto out;
    }
    ir_func *f = ir_module_get(b.mod, n->callee);
    if (!f) {
      fprintf(stderr, "tessel build: %s: node %s calls %s, which the module lacks\n", b.path, n->name,
              n->callee);
      goto out;
    }
    if (find_kernel(&b, f) >= 0) continue;
    mkernel *k = new_kernel(&b, &d);
    if (!k) {
      fprintf(stderr, "tessel build: %s\n", d.msg);
      goto out;
    }
    k->func = f;
    int idx = b.nk - 1;
    if (schedule_kernel(&b, &b.k[idx], &d) != TS_OK) {
      fprintf(stderr, "tessel build: %s: kernel %s: %s\n", b.path, f->name, d.msg);
      goto out;
    }
  }
  if (make_plan(&b, &plan, &d) != TS_OK) {
    fprintf(stderr, "tessel build: %s: %s\n", b.path, d.msg);
    goto out;
  }
  lows = ts_calloc((size_t)(b.nk ? b.nk : 1), sizeof *lows);
  if (!lows) {
    fprintf(stderr, "tessel build: out of memory\n");
    goto out;
  }
  for (int i = 0; i < b.nk; i++) lows[i] = &b.k[i].low;
  double t1 = tsrt_now();
  if (cg_llvm_build_model(&plan, lows, b.nk, &b.tg, b.out, &d) != TS_OK) {
    fprintf(stderr, "tessel build: %s: %s\n", b.out, d.msg);
    goto out;
  }
  double t2 = tsrt_now();
  if (sig_write(b.out, &plan)) goto out;
  int nbase = b.nk - b.nspec;
  if (b.json) {
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(b.path));
    json_object_set_new(o, "artifact", json_string(b.out));
    json_object_set_new(o, "target", json_string(b.tg.text));
    json_object_set_new(o, "kernels", json_integer(nbase));
    json_object_set_new(o, "tuned", json_integer(b.ntuned));
    json_object_set_new(o, "default", json_integer(b.ndefault));
    json_object_set_new(o, "specialised", json_integer(b.nspec));
    json_object_set_new(o, "calls", json_integer(plan.ncalls));
    json_object_set_new(o, "tensors", json_integer(plan.ntensors));
    json_object_set_new(o, "weights_bytes", json_integer((json_int_t)plan.weights_bytes));
    json_object_set_new(o, "prepacked_weights", json_integer(b.npacked_weights));
    json_object_set_new(o, "packed_copies", json_integer(b.npacked_copies));
    json_object_set_new(o, "build_s", json_real(t2 - t0));
    json_t *ks = json_array();
    for (int i = 0; i < b.nk; i++) {
      json_t *k = json_object();
      json_object_set_new(k, "index", json_integer(i));
      const ir_func *f = b.k[i].func ? b.k[i].func : sch_traced_func(b.k[i].sched);
      json_object_set_new(k, "name", json_string(f->name ? f->name : "?"));
      json_object_set_new(k, "key", json_string(b.k[i].key));
      json_object_set_new(k, "tuned", json_boolean(b.k[i].tuned));
      json_object_set_new(k, "symbolic", json_boolean(b.k[i].func && b.k[i].func->nsyms > 0));
      json_object_set_new(k, "specialisation", json_boolean(!b.k[i].func));
      json_t *pp = json_array();
      for (int m = 0; m < b.k[i].nlayout; m++) json_array_append_new(pp, json_integer(b.k[i].layout[m].param));
      json_object_set_new(k, "packed_params", pp);
      json_array_append_new(ks, k);
    }
    json_object_set_new(o, "kernel_list", ks);
    char *s = json_dumps(o, JSON_INDENT(1));
    json_decref(o);
    if (s) printf("%s\n", s);
    free(s);
  } else {
    printf("built %s from %s for %s: %d kernels (%d tuned from %s, %d with the default schedule", b.out,
           b.path, b.tg.text, nbase, b.ntuned, b.log ? b.log : "no log", b.ndefault);
    if (b.nspec)
      printf("; %d of the default ones are symbolic and carry a tuned specialisation for the tuned sizes",
             b.nspec);
    printf("), %d calls, %d tensors, %.1f KiB of weights", plan.ncalls, plan.ntensors,
           (double)plan.weights_bytes / 1024.0);
    if (b.npacked_weights)
      printf(" (%d pre-packed into the layout their kernels read, %d packed copies)", b.npacked_weights,
             b.npacked_copies);
    printf("; %.2f s (codegen %.2f s)\n", t2 - t0, t2 - t1);
  }
  if (b.nrecord_unused)
    fprintf(stderr, "tessel build: %d kernel(s) had a log record that did not replay (see above)\n",
            b.nrecord_unused);
  rc = 0;
out:
  ts_free(lows);
  ts_free((void *)plan.weights);
  for (int i = 0; i < b.nk; i++) sch_traced_free(b.k[i].sched);
  ts_free(b.k);
  if (b.db) tun_db_close(b.db);
  ir_module_free(b.mod);
  return rc;
}

/* ==== run ================================================================================== */

typedef struct run_input {
  const char *name, *file;
} run_input;

static const char *run_usage =
    "usage: tessel run MODEL.so [--input NAME=FILE.npy]... [--sym NAME=VALUE]... [--seed S]\n"
    "                  [--output-dir DIR] [--bench] [--repeat N] [--profile] [--threads N] [--json]\n"
    "                  [--tracker HOST:PORT --key KEY [--secret-file F] [--rpc-wait SEC]]\n"
    "Runs a model built by `tessel build MODEL.onnx` with the graph executor.\n"
    "  --input NAME=FILE.npy  an input (.npy: C order, little-endian); inputs not given are seeded\n"
    "                         random values (uniform [-1, 1) floats), shaped with --sym (default 1)\n"
    "  --sym NAME=VALUE       the size of a symbolic dim for random inputs\n"
    "  --output-dir DIR       write every output as DIR/NAME.npy\n"
    "  --bench                time --repeat runs (default 20) after a warm-up; report median/mean/min\n"
    "  --profile              per kernel call: mean ms over the timed runs (one run without --bench),\n"
    "                         largest first, and their sum (local runs only)\n"
    "  --threads N            thread pool size (default TESSEL_NUM_THREADS or all cores)\n"
    "  --json                 print {outputs: [{name, dtype, shape, file, checksum}], latency_ms, ...}\n"
    "  --tracker H:P --key K  run on a board the tracker grants (the artifact built for its triple;\n"
    "                         inputs described by MODEL.so.json when this host cannot load it);\n"
    "                         the secret from --secret-file or $TESSEL_RPC_SECRET_FILE; wait up to\n"
    "                         --rpc-wait seconds (60) for a free board\n";

typedef struct loaded_input {
  char name[256];
  int dtype, ndim;
  int64_t shape[TSRT_MAX_DIMS];
  void *data;
  size_t nbytes;
  const char *source; /* file or "random" */
} loaded_input;

static void sanitize(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; in[k] && k + 1 < n; k++) {
    char c = in[k];
    out[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                     c == '.'
                 ? c
                 : '_';
  }
  out[k] = '\0';
  if (!strcmp(out, ".") || !strcmp(out, "..") || !k) snprintf(out, n, "output");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* What `tessel run` needs to know of a model without running it: its
 * inputs' names, dtypes and shapes (strings owned here). From the artifact
 * itself when this host can load it, else from the MODEL.so.json that
 * `tessel build` writes next to it (a cross-built artifact). */
#define SIG_MAX 64
typedef struct model_sig {
  int ni;
  tessel_tensor_info in[SIG_MAX];
  char names[SIG_MAX][256];
  char dims[SIG_MAX][TSRT_MAX_DIMS][64];
} model_sig;

static void sig_set(model_sig *s, int i, const char *name, int dtype, int ndim, const int64_t *shape,
                    const char *const *dim_names) {
  tessel_tensor_info *x = &s->in[i];
  memset(x, 0, sizeof *x);
  snprintf(s->names[i], sizeof s->names[i], "%s", name);
  x->name = s->names[i];
  x->dtype = dtype;
  x->ndim = ndim;
  for (int j = 0; j < ndim; j++) {
    x->shape[j] = shape[j];
    if (dim_names[j]) {
      snprintf(s->dims[i][j], sizeof s->dims[i][j], "%s", dim_names[j]);
      x->dim_names[j] = s->dims[i][j];
    }
  }
}

static int sig_load(const char *so, model_sig *s, char *err, size_t errn) {
  memset(s, 0, sizeof *s);
  char lerr[600];
  tessel_model *m = tessel_model_load(so, lerr, sizeof lerr);
  if (m) {
    s->ni = tessel_model_num_inputs(m);
    if (s->ni > SIG_MAX) s->ni = SIG_MAX;
    for (int i = 0; i < s->ni; i++) {
      tessel_tensor_info info;
      tessel_model_input_info(m, i, &info);
      sig_set(s, i, info.name, info.dtype, info.ndim, info.shape, info.dim_names);
    }
    tessel_model_free(m);
    return 0;
  }
  char side[4200];
  snprintf(side, sizeof side, "%s.json", so);
  json_error_t je;
  json_t *j = json_load_file(side, 0, &je);
  if (!j) {
    snprintf(err, errn, "%.250s (and no readable %.250s: %.60s)", lerr, side, je.text);
    return -1;
  }
  json_t *ins = json_object_get(j, "inputs");
  int rc = 0;
  if (!json_is_array(ins) || json_array_size(ins) > SIG_MAX) rc = -1;
  for (size_t i = 0; !rc && i < json_array_size(ins); i++) {
    json_t *o = json_array_get(ins, i), *sh = json_object_get(o, "shape"), *dn = json_object_get(o, "dims");
    const char *name = json_string_value(json_object_get(o, "name"));
    json_int_t dt = json_integer_value(json_object_get(o, "dtype"));
    size_t nd = json_array_size(sh);
    if (!name || !json_is_integer(json_object_get(o, "dtype")) || dt < 0 || dt >= TSRT_DTYPE_COUNT ||
        !json_is_array(sh) || nd > TSRT_MAX_DIMS || json_array_size(dn) != nd) {
      rc = -1;
      break;
    }
    int64_t shape[TSRT_MAX_DIMS];
    const char *names[TSRT_MAX_DIMS];
    for (size_t k = 0; k < nd; k++) {
      shape[k] = json_integer_value(json_array_get(sh, k));
      names[k] = json_string_value(json_array_get(dn, k));
      if (shape[k] < 0 && !names[k]) rc = -1;
    }
    sig_set(s, (int)i, name, (int)dt, (int)nd, shape, names);
    s->ni = (int)i + 1;
  }
  if (rc) snprintf(err, errn, "%.400s: malformed model description (inputs: [{name, dtype, shape, dims}])", side);
  json_decref(j);
  return rc;
}

/* Writes MODEL.so.json: target and the inputs'/outputs' names, dtypes and
 * shapes (-1 and the symbol's name in dims for a symbolic dim). */
static int sig_write(const char *so, const tsrt_model_plan *p) {
  json_t *root = json_object();
  json_object_set_new(root, "format", json_string("tessel-model-1"));
  json_object_set_new(root, "name", json_string(p->name ? p->name : ""));
  json_object_set_new(root, "target", json_string(p->target));
  for (int io = 0; io < 2; io++) {
    json_t *arr = json_array();
    int n = io ? p->noutputs : p->ninputs;
    for (int i = 0; i < n; i++) {
      const tsrt_model_tensor *x = &p->tensors[io ? p->outputs[i] : p->inputs[i]];
      json_t *o = json_object(), *sh = json_array(), *dn = json_array();
      for (int j = 0; j < x->ndim; j++) {
        json_array_append_new(sh, json_integer(x->shape[j] >= 0 ? x->shape[j] : -1));
        json_array_append_new(dn, x->shape[j] >= 0 ? json_null() : json_string(p->syms[-1 - x->shape[j]]));
      }
      json_object_set_new(o, "name", json_string(x->name));
      json_object_set_new(o, "dtype", json_integer(x->dtype));
      json_object_set_new(o, "dtype_name", json_string(tsrt_dtype_name(x->dtype)));
      json_object_set_new(o, "shape", sh);
      json_object_set_new(o, "dims", dn);
      json_array_append_new(arr, o);
    }
    json_object_set_new(root, io ? "outputs" : "inputs", arr);
  }
  char side[4200];
  snprintf(side, sizeof side, "%s.json", so);
  int rc = json_dump_file(root, side, JSON_INDENT(1));
  json_decref(root);
  if (rc) fprintf(stderr, "tessel build: cannot write %s\n", side);
  return rc;
}

/* Loads the inputs of the model: .npy files by name, the rest seeded random.
 * Fills ins (sig->ni entries). */
static int prepare_inputs(const model_sig *sig, const run_input *given, int ngiven, const sym_list *syms,
                          uint64_t seed, loaded_input *ins) {
  int ni = sig->ni;
  for (int g = 0; g < ngiven; g++) {
    bool found = false;
    for (int i = 0; i < ni; i++) found |= !strcmp(sig->in[i].name, given[g].name);
    if (!found) {
      fprintf(stderr, "tessel run: the model has no input named '%s' (inputs:", given[g].name);
      for (int i = 0; i < ni; i++) fprintf(stderr, " %s", sig->in[i].name);
      fprintf(stderr, ")\n");
      return 2;
    }
  }
  sym_list bound = *syms;
  for (int i = 0; i < ni; i++) {
    tessel_tensor_info info = sig->in[i];
    loaded_input *in = &ins[i];
    snprintf(in->name, sizeof in->name, "%s", info.name);
    in->dtype = info.dtype;
    in->ndim = info.ndim;
    const char *file = NULL;
    for (int g = 0; g < ngiven; g++)
      if (!strcmp(given[g].name, info.name)) file = given[g].file;
    if (!file) continue;
    tun_npy npy;
    ts_diag d;
    ts_diag_clear(&d);
    if (tun_npy_read(file, &npy, &d) != TS_OK) {
      fprintf(stderr, "tessel run: input %s: %s\n", info.name, d.msg);
      return 2;
    }
    if (npy.dtype != info.dtype || npy.ndim != info.ndim) {
      fprintf(stderr, "tessel run: input %s wants %s with %d dims; %s holds %s with %d dims\n", info.name,
              tessel_dtype_name(info.dtype), info.ndim, file, tessel_dtype_name(npy.dtype), npy.ndim);
      tun_npy_free(&npy);
      return 2;
    }
    in->data = malloc(npy.nbytes ? npy.nbytes : 1);
    if (!in->data) {
      tun_npy_free(&npy);
      fprintf(stderr, "tessel run: out of memory for input %s\n", info.name);
      return 1;
    }
    memcpy(in->data, npy.data, npy.nbytes);
    in->nbytes = npy.nbytes;
    memcpy(in->shape, npy.shape, sizeof(int64_t) * (size_t)npy.ndim);
    in->source = file;
    tun_npy_free(&npy);
    /* a file's symbolic dims size the random inputs too */
    for (int j = 0; j < info.ndim; j++)
      if (info.dim_names[j]) {
        bool have = false;
        for (int s = 0; s < bound.n; s++) have |= !strcmp(bound.names[s], info.dim_names[j]);
        if (!have && bound.n < MAX_SYMS) {
          snprintf(bound.buf[bound.n], sizeof bound.buf[0], "%s", info.dim_names[j]);
          bound.names[bound.n] = bound.buf[bound.n];
          bound.vals[bound.n++] = in->shape[j];
        }
      }
  }
  for (int i = 0; i < ni; i++) {
    loaded_input *in = &ins[i];
    if (in->data) continue;
    tessel_tensor_info info = sig->in[i];
    int64_t n = 1;
    for (int j = 0; j < info.ndim; j++) {
      in->shape[j] = info.dim_names[j] ? sym_value(&bound, info.dim_names[j]) : info.shape[j];
      n *= in->shape[j];
    }
    in->nbytes = (size_t)n * (size_t)tessel_dtype_bytes(info.dtype);
    in->data = malloc(in->nbytes ? in->nbytes : 1);
    if (!in->data) {
      fprintf(stderr, "tessel run: out of memory for input %s\n", info.name);
      return 1;
    }
    tsrt_fill_random(info.dtype, in->data, n, seed + (uint64_t)i);
    in->source = "random";
  }
  return 0;
}

/* Writes one output (DIR/NAME.npy with outdir), adds it to jouts and, in
 * text mode, prints it. 0 or 2. */
static int emit_output(const char *name, int dtype, int nd, const int64_t *shape, const void *data,
                       const char *outdir, bool json, json_t *jouts) {
  int64_t n = 1;
  for (int j = 0; j < nd; j++) n *= shape[j];
  size_t nbytes = (size_t)n * (size_t)tessel_dtype_bytes(dtype);
  char file[4096] = "";
  if (outdir) {
    char base[256];
    sanitize(name, base, sizeof base);
    snprintf(file, sizeof file, "%s/%s.npy", outdir, base);
    ts_diag d;
    ts_diag_clear(&d);
    if (tun_npy_write(file, dtype, nd, shape, data, &d) != TS_OK) {
      fprintf(stderr, "tessel run: output %s: %s\n", name, d.msg);
      return 2;
    }
  }
  uint64_t ck = tsrt_checksum(data, nbytes);
  json_t *o = json_object(), *sh = json_array();
  for (int j = 0; j < nd; j++) json_array_append_new(sh, json_integer(shape[j]));
  json_object_set_new(o, "name", json_string(name));
  json_object_set_new(o, "dtype", json_string(tessel_dtype_name(dtype)));
  json_object_set_new(o, "shape", sh);
  char cks[17];
  snprintf(cks, sizeof cks, "%016" PRIx64, ck);
  json_object_set_new(o, "checksum", json_string(cks));
  if (outdir) json_object_set_new(o, "file", json_string(file));
  json_array_append_new(jouts, o);
  if (!json) {
    printf("output %s: %s[", name, tessel_dtype_name(dtype));
    for (int j = 0; j < nd; j++) printf("%s%lld", j ? ", " : "", (long long)shape[j]);
    printf("]");
    if (dtype == TESSEL_DT_F32) {
      const float *f = data;
      printf(" =");
      for (int64_t e = 0; e < n && e < 6; e++) printf(" %.6g", f[e]);
      if (n > 6) printf(" ...");
    }
    printf("  checksum %s%s%s\n", cks, outdir ? "  -> " : "", outdir ? file : "");
  }
  return 0;
}

/* Median/mean/min/max of times (sorted in place) into root (and printed). */
static void report_latency(double *times, int ntimes, bool json, json_t *root) {
  if (ntimes <= 0) return;
  double sum = 0;
  for (int r = 0; r < ntimes; r++) sum += times[r];
  qsort(times, (size_t)ntimes, sizeof *times, cmp_double);
  double med = ntimes % 2 ? times[ntimes / 2] : 0.5 * (times[ntimes / 2 - 1] + times[ntimes / 2]);
  json_t *lat = json_object();
  json_object_set_new(lat, "runs", json_integer(ntimes));
  json_object_set_new(lat, "median", json_real(med * 1e3));
  json_object_set_new(lat, "mean", json_real(sum / ntimes * 1e3));
  json_object_set_new(lat, "min", json_real(times[0] * 1e3));
  json_object_set_new(lat, "max", json_real(times[ntimes - 1] * 1e3));
  json_object_set_new(root, "latency_ms", lat);
  if (!json)
    printf("latency over %d runs: median %.4f ms, mean %.4f ms, min %.4f ms, max %.4f ms\n", ntimes, med * 1e3,
           sum / ntimes * 1e3, times[0] * 1e3, times[ntimes - 1] * 1e3);
}

static json_t *inputs_json(const loaded_input *ins, int ni) {
  json_t *jins = json_array();
  for (int i = 0; i < ni; i++) {
    json_t *o = json_object(), *sh = json_array();
    for (int j = 0; j < ins[i].ndim; j++) json_array_append_new(sh, json_integer(ins[i].shape[j]));
    json_object_set_new(o, "name", json_string(ins[i].name));
    json_object_set_new(o, "shape", sh);
    json_object_set_new(o, "source", json_string(ins[i].source));
    json_array_append_new(jins, o);
  }
  return jins;
}

/* --profile: per-call mean time over the timed runs, largest first. */
static void report_profile(tessel_model *m, bool json, json_t *root) {
  tessel_model_stats st;
  tessel_model_get_stats(m, &st);
  int n = st.ncalls;
  double *sec = calloc((size_t)(n > 0 ? n : 1), sizeof *sec);
  const char **name = calloc((size_t)(n > 0 ? n : 1), sizeof *name);
  int *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
  if (!sec || !name || !order) goto out;
  double total = 0;
  for (int c = 0; c < n; c++) {
    if (tessel_model_get_call_profile(m, c, &name[c], &sec[c])) goto out;
    total += sec[c];
    order[c] = c;
  }
  for (int i = 1; i < n; i++) /* insertion sort by time, largest first */
    for (int j = i; j > 0 && sec[order[j]] > sec[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  json_t *jp = json_array();
  if (!json) printf("%-5s %-40s %10s %7s\n", "call", "kernel", "ms", "%");
  for (int i = 0; i < n; i++) {
    int c = order[i];
    if (json) {
      json_t *o = json_object();
      json_object_set_new(o, "call", json_integer(c));
      json_object_set_new(o, "kernel", json_string(name[c]));
      json_object_set_new(o, "ms", json_real(sec[c] * 1e3));
      json_array_append_new(jp, o);
    } else {
      printf("%-5d %-40s %10.4f %6.1f%%\n", c, name[c], sec[c] * 1e3, total > 0 ? 100 * sec[c] / total : 0);
    }
  }
  if (!json) printf("%-5s %-40s %10.4f\n", "", "sum of calls", total * 1e3);
  json_object_set_new(root, "profile", jp);
  json_object_set_new(root, "profile_sum_ms", json_real(total * 1e3));
out:
  free(sec);
  free(name);
  free(order);
}

static int run_local(const char *so, loaded_input *ins, const char *outdir, bool bench, int repeat, bool json,
                     bool profile) {
  char err[600];
  tessel_model *m = tessel_model_load(so, err, sizeof err);
  if (!m) {
    fprintf(stderr, "tessel run: %s\n", err);
    return 2;
  }
  int rc = 2;
  int ni = tessel_model_num_inputs(m), no = tessel_model_num_outputs(m);
  double *times = NULL;
  int ntimes = 0;
  json_t *root = json_object(), *jouts = json_array(), *jins = inputs_json(ins, ni);
  for (int i = 0; i < ni; i++)
    if (tessel_model_set_input(m, i, ins[i].data, ins[i].ndim, ins[i].shape)) {
      fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
      goto out;
    }
  double t0 = tsrt_now();
  if (tessel_model_run(m)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  double first = tsrt_now() - t0;
  if (profile && tessel_model_set_profiling(m, 1)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  if (profile && !bench && tessel_model_run(m)) {
    fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
    goto out;
  }
  if (bench) {
    times = malloc(sizeof *times * (size_t)repeat);
    if (!times) goto out;
    for (int r = 0; r < repeat; r++) {
      double s = tsrt_now();
      if (tessel_model_run(m)) {
        fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
        goto out;
      }
      times[ntimes++] = tsrt_now() - s;
    }
  }
  if (outdir && mkdir(outdir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tessel run: cannot create %s: %s\n", outdir, strerror(errno));
    goto out;
  }
  for (int i = 0; i < no; i++) {
    tessel_tensor_info info;
    tessel_model_output_info(m, i, &info);
    const void *data;
    int nd;
    int64_t shape[TESSEL_MODEL_MAX_DIMS];
    if (tessel_model_get_output(m, i, &data, &nd, shape)) {
      fprintf(stderr, "tessel run: %s\n", tessel_model_error(m));
      goto out;
    }
    if (emit_output(info.name, info.dtype, nd, shape, data, outdir, json, jouts)) goto out;
  }
  tessel_model_stats st;
  tessel_model_get_stats(m, &st);
  json_object_set_new(root, "model", json_string(so));
  json_object_set_new(root, "inputs", jins);
  json_object_set_new(root, "outputs", jouts);
  jins = jouts = NULL;
  json_object_set_new(root, "kernels", json_integer(st.nkernels));
  json_object_set_new(root, "calls", json_integer(st.ncalls));
  json_object_set_new(root, "weights_bytes", json_integer((json_int_t)st.weights_bytes));
  json_object_set_new(root, "workspace_bytes", json_integer((json_int_t)st.workspace_bytes));
  json_object_set_new(root, "workspace_no_reuse_bytes", json_integer((json_int_t)st.naive_bytes));
  json_object_set_new(root, "first_run_ms", json_real(first * 1e3));
  if (!json)
    printf("%d calls of %d kernels; workspace %.1f KiB (%.1f KiB without reuse); first run %.3f ms\n", st.ncalls,
           st.nkernels, (double)st.workspace_bytes / 1024.0, (double)st.naive_bytes / 1024.0, first * 1e3);
  if (bench) report_latency(times, ntimes, json, root);
  if (profile) report_profile(m, json, root);
  if (json) {
    char *s = json_dumps(root, JSON_INDENT(1));
    if (s) printf("%s\n", s);
    free(s);
  }
  rc = 0;
out:
  json_decref(root);
  json_decref(jouts);
  json_decref(jins);
  free(times);
  tessel_model_free(m);
  return rc;
}

/* --tracker: a board from the tracker runs the artifact (rpc "run_model"). */
static int run_remote(const char *so, const loaded_input *ins, int ni, const char *tracker, const char *key,
                      const char *secret_file, double wait_s, const char *outdir, int repeat, bool json) {
  char err[600];
  rpc_secret sec;
  if (rpc_secret_load(&sec, secret_file, err, sizeof err)) {
    fprintf(stderr, "tessel run: %s\n", err);
    return 2;
  }
  int rc = 2;
  trk_conn *conn = NULL;
  rpc_client *cl = NULL;
  trk_grant g;
  bool granted = false;
  tsrt_model_run_result res;
  memset(&res, 0, sizeof res);
  tsrt_model_io *io = calloc((size_t)(ni ? ni : 1), sizeof *io);
  json_t *root = json_object(), *jouts = json_array();
  if (!io) goto out;
  if (trk_conn_open(tracker, &sec, "client", 10000, &conn, err, sizeof err)) {
    fprintf(stderr, "tessel run: tracker %s: %s\n", tracker, err);
    goto out;
  }
  if (trk_request(conn, key, 0, (int64_t)(wait_s * 1000), 0, &g, err, sizeof err)) {
    fprintf(stderr, "tessel run: no board with key '%s' from %s: %s\n", key, tracker, err);
    goto out;
  }
  granted = true;
  char url[RPC_MAX_ADDR + 16];
  trk_url(g.address, url, sizeof url);
  if (rpc_client_open(&cl, url, &sec, g.token, 10, err, sizeof err)) {
    fprintf(stderr, "tessel run: board %s: %s\n", g.address, err);
    goto out;
  }
  char id[64];
  if (rpc_client_upload(cl, so, id, sizeof id)) {
    fprintf(stderr, "tessel run: uploading %s to %s: %s\n", so, g.address, cl->err);
    goto out;
  }
  for (int i = 0; i < ni; i++) {
    snprintf(io[i].name, sizeof io[i].name, "%s", ins[i].name);
    io[i].dtype = ins[i].dtype;
    io[i].ndim = ins[i].ndim;
    memcpy(io[i].shape, ins[i].shape, sizeof io[i].shape);
    io[i].data = ins[i].data;
    io[i].nbytes = ins[i].nbytes;
  }
  double t0 = tsrt_now();
  if (rpc_client_run_model(cl, id, io, ni, repeat, 600, 0, &res)) {
    fprintf(stderr, "tessel run: on %s: %s\n", g.address, cl->err);
    goto out;
  }
  double wall = tsrt_now() - t0;
  if (res.status != TSRT_OK) {
    fprintf(stderr, "tessel run: on %s (%s): %s: %s\n", g.address, key, tsrt_status_name(res.status), res.error);
    goto out;
  }
  if (outdir && mkdir(outdir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tessel run: cannot create %s: %s\n", outdir, strerror(errno));
    goto out;
  }
  for (int i = 0; i < res.noutputs; i++)
    if (emit_output(res.outputs[i].name, res.outputs[i].dtype, res.outputs[i].ndim, res.outputs[i].shape,
                    res.outputs[i].data, outdir, json, jouts))
      goto out;
  json_object_set_new(root, "model", json_string(so));
  json_object_set_new(root, "board", json_string(g.address));
  json_object_set_new(root, "key", json_string(key));
  json_object_set_new(root, "inputs", inputs_json(ins, ni));
  json_object_set_new(root, "outputs", jouts);
  jouts = NULL;
  json_object_set_new(root, "round_trip_ms", json_real(wall * 1e3));
  if (!json) printf("ran on %s (key %s); round trip with upload of inputs %.1f ms\n", g.address, key, wall * 1e3);
  report_latency(res.secs, res.nsecs, json, root);
  if (json) {
    char *s = json_dumps(root, JSON_INDENT(1));
    if (s) printf("%s\n", s);
    free(s);
  }
  rc = 0;
out:
  tsrt_model_run_result_fini(&res);
  json_decref(root);
  json_decref(jouts);
  free(io);
  if (cl) rpc_client_close(cl);
  if (granted) trk_release(conn, &g, err, sizeof err);
  if (conn) trk_conn_close(conn);
  rpc_secret_wipe(&sec);
  return rc;
}

int tun_cmd_run_model(int argc, char **argv) {
  const char *so = NULL, *outdir = NULL, *tracker = NULL, *key = NULL, *secret_file = NULL;
  double rpc_wait = 60;
  run_input given[64];
  int ngiven = 0, repeat = 20;
  bool bench = false, json = false, profile = false;
  uint64_t seed = 1;
  sym_list syms;
  memset(&syms, 0, sizeof syms);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool more = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("%s", run_usage);
      return 0;
    } else if (!strcmp(a, "--input") && more) {
      const char *s = argv[++i], *eq = strchr(s, '=');
      if (!eq || eq == s || !eq[1] || ngiven == 64) {
        fprintf(stderr, "tessel run: --input wants NAME=FILE.npy (at most 64), got '%s'\n", s);
        return 2;
      }
      char *nm = strndup(s, (size_t)(eq - s));
      if (!nm) return 1;
      given[ngiven].name = nm;
      given[ngiven++].file = eq + 1;
    } else if (!strcmp(a, "--sym") && more) {
      if (!parse_sym("run", argv[++i], &syms)) return 2;
    } else if (!strcmp(a, "--seed") && more) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (!strcmp(a, "--output-dir") && more) {
      outdir = argv[++i];
    } else if (!strcmp(a, "--bench")) {
      bench = true;
    } else if (!strcmp(a, "--profile")) {
      profile = true;
    } else if (!strcmp(a, "--repeat") && more) {
      repeat = atoi(argv[++i]);
    } else if (!strcmp(a, "--threads") && more) {
      int t = atoi(argv[++i]);
      if (t < 1) {
        fprintf(stderr, "tessel run: --threads wants N >= 1\n");
        return 2;
      }
      char tv[16];
      snprintf(tv, sizeof tv, "%d", t);
      setenv("TESSEL_NUM_THREADS", tv, 1);
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--tracker") && more) {
      tracker = argv[++i];
    } else if (!strcmp(a, "--key") && more) {
      key = argv[++i];
    } else if (!strcmp(a, "--secret-file") && more) {
      secret_file = argv[++i];
    } else if (!strcmp(a, "--rpc-wait") && more) {
      rpc_wait = atof(argv[++i]);
    } else if (a[0] == '-' || so) {
      fprintf(stderr, "tessel run: unexpected argument '%s'\n%s", a, run_usage);
      return 2;
    } else {
      so = a;
    }
  }
  if (!so) {
    fprintf(stderr, "tessel run: no model artifact given\n%s", run_usage);
    return 2;
  }
  if (repeat < 1 || repeat > 100000) {
    fprintf(stderr, "tessel run: --repeat wants 1..100000\n");
    return 2;
  }
  if (!tracker != !key) {
    fprintf(stderr, "tessel run: --tracker and --key go together\n");
    return 2;
  }
  /* the inputs' names and shapes come from the artifact (or its .json) */
  char err[700];
  model_sig *sig = calloc(1, sizeof *sig);
  if (!sig) return 1;
  if (sig_load(so, sig, err, sizeof err)) {
    fprintf(stderr, "tessel run: %s\n", err);
    free(sig);
    return 2;
  }
  int ni = sig->ni;
  loaded_input *ins = calloc((size_t)(ni ? ni : 1), sizeof *ins);
  int rc = ins ? prepare_inputs(sig, given, ngiven, &syms, seed, ins) : 1;
  if (rc == 0 && tracker)
    rc = run_remote(so, ins, ni, tracker, key, secret_file, rpc_wait, outdir, bench ? repeat : 0, json);
  else if (rc == 0)
    rc = run_local(so, ins, outdir, bench, repeat, json, profile);
  free(sig);
  for (int i = 0; ins && i < ni; i++) free(ins[i].data);
  free(ins);
  for (int g = 0; g < ngiven; g++) free((void *)given[g].name);
  return rc;
}
