/* model_build.c — the model compiler (model_build.h): import and graph
 * passes, one kernel per distinct fused PrimFunc (the log's best record
 * replayed, else the default schedule; a symbolic kernel gets a tuned
 * specialisation), the execution plan with weights pre-packed into the
 * layouts their kernels read, and the LLVM link into one shared library
 * plus its MODEL.so.json signature. docs/MODEL.md, docs/LAYOUT.md. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm.h"
#include "runtime/model.h"
#include "ir/graph/passes.h"
#include "ir/graph/onnx.h"
#include "ir/schedule/layout.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "tuner/build.h"
#include "tuner/database.h"
#include "tuner/library.h"
#include "tuner/model_build.h"
#include "tuner/task_scheduler.h"

/* ==== options and import =================================================================== */

void tun_model_opts_init(tun_model_opts *o) {
  memset(o, 0, sizeof *o);
  o->target = "llvm";
  /* float convolutions channel-blocked by the target's vector width (the
   * nchwc pass; --conv-layout nchw turns it off): faster untuned on both
   * ResNet-50 and MobileNetV2 (bench/RESULTS.md) */
  o->graph.conv_block = -1;
}

ts_status tun_model_opts_add_sym(tun_model_opts *o, const char *s, ts_diag *d) {
  const char *eq = strchr(s, '=');
  int64_t v = 0;
  const char *why = "not NAME=VALUE";
  if (!eq || eq == s || !ts_parse_i64(eq + 1, 1, INT64_MAX, &v, &why) || (size_t)(eq - s) >= sizeof o->sym_buf[0])
    return ts_diag_set(d, TS_EINVAL, "--sym wants NAME=VALUE with VALUE an integer >= 1, got '%s' (%s)", s,
                       eq && eq != s && (size_t)(eq - s) >= sizeof o->sym_buf[0] ? "name too long" : why);
  if (o->nsyms == TUN_MODEL_MAX_SYMS) return ts_diag_set(d, TS_EINVAL, "at most %d --sym options", TUN_MODEL_MAX_SYMS);
  memcpy(o->sym_buf[o->nsyms], s, (size_t)(eq - s));
  o->sym_buf[o->nsyms][eq - s] = '\0';
  o->sym_names[o->nsyms] = o->sym_buf[o->nsyms];
  o->sym_values[o->nsyms++] = v;
  return TS_OK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

ts_status tun_model_opts_add_buckets(tun_model_opts *o, const char *s, ts_diag *d) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s || (size_t)(eq - s) >= sizeof o->bucket_names[0] || !eq[1])
    return ts_diag_set(d, TS_EINVAL, "--buckets wants NAME=V1,V2,... with integer values >= 1, got '%s'", s);
  if (o->nbuckets == TUN_MODEL_MAX_BUCKET_SYMS)
    return ts_diag_set(d, TS_EINVAL, "--buckets: at most %d symbols", TUN_MODEL_MAX_BUCKET_SYMS);
  int b = o->nbuckets;
  memcpy(o->bucket_names[b], s, (size_t)(eq - s));
  o->bucket_names[b][eq - s] = '\0';
  for (int i = 0; i < b; i++)
    if (!strcmp(o->bucket_names[i], o->bucket_names[b]))
      return ts_diag_set(d, TS_EINVAL, "--buckets %s: the symbol has buckets already", o->bucket_names[b]);
  for (int i = 0; i < o->nsyms; i++)
    if (!strcmp(o->sym_names[i], o->bucket_names[b]))
      return ts_diag_set(d, TS_EINVAL, "--buckets %s: the symbol has a --sym value too (give one of them)",
                         o->bucket_names[b]);
  int n = 0;
  for (const char *p = eq + 1; *p;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    char num[32];
    int64_t v = 0;
    const char *why = "not an integer";
    if (len == 0 || len >= sizeof num) return ts_diag_set(d, TS_EINVAL, "--buckets '%s': an empty or overlong value", s);
    memcpy(num, p, len);
    num[len] = '\0';
    if (!ts_parse_i64(num, 1, INT64_MAX / 4096, &v, &why))
      return ts_diag_set(d, TS_EINVAL, "--buckets '%s': value '%s' (%s; want an integer >= 1)", s, num, why);
    if (n == TUN_MODEL_MAX_BUCKETS)
      return ts_diag_set(d, TS_EINVAL, "--buckets '%s': at most %d values", s, TUN_MODEL_MAX_BUCKETS);
    o->bucket_values[b][n++] = v;
    p = c ? c + 1 : p + len;
  }
  qsort(o->bucket_values[b], (size_t)n, sizeof o->bucket_values[b][0], cmp_i64);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (!m || o->bucket_values[b][m - 1] != o->bucket_values[b][i]) o->bucket_values[b][m++] = o->bucket_values[b][i];
  o->nbucket_values[b] = m;
  o->nbuckets++;
  if (tun_model_bucket_count(o) > TUN_MODEL_MAX_COMBOS) {
    o->nbuckets--;
    return ts_diag_set(d, TS_EINVAL, "--buckets: over %d combinations of bucket values", TUN_MODEL_MAX_COMBOS);
  }
  return TS_OK;
}

int tun_model_bucket_count(const tun_model_opts *o) {
  int n = 1;
  for (int b = 0; b < o->nbuckets; b++) n *= o->nbucket_values[b];
  return n;
}

int tun_model_bucket_binding(const tun_model_opts *o, int i, const char **names, int64_t *values) {
  int n = 0;
  for (int s = 0; s < o->nsyms; s++) {
    names[n] = o->sym_names[s];
    values[n++] = o->sym_values[s];
  }
  for (int b = o->nbuckets - 1; b >= 0; b--) { /* the last symbol varies fastest */
    names[n] = o->bucket_names[b];
    values[n++] = o->bucket_values[b][i % o->nbucket_values[b]];
    i /= o->nbucket_values[b];
  }
  return n;
}

/* d's message prefixed with "what: " (the first error wins in ts_diag_set,
 * so the message is copied and the diag cleared first). */
static ts_status prefix(ts_diag *d, const char *what) {
  if (!d) return TS_EINTERNAL;
  size_t n = strlen(what);
  if (!strncmp(d->msg, what, n) && d->msg[n] == ':') return d->code ? d->code : TS_EINTERNAL; /* already says it */
  ts_diag old = *d;
  ts_diag_clear(d);
  return ts_diag_set(d, old.code ? old.code : TS_EINTERNAL, "%s: %s", what, old.msg);
}

/* A --sym for a symbol the model does not have is a mistake worth saying. */
static ts_status check_syms(const tg_graph *g, const char *path, const tun_model_opts *o, ts_diag *d) {
  for (int s = 0; s < o->nsyms; s++) {
    bool found = false;
    for (int v = 0; v < g->nvalues && !found; v++)
      for (int a = 0; a < g->values[v]->ndim && !found; a++)
        found = g->values[v]->dims[a].sym && !strcmp(g->values[v]->dims[a].sym, o->sym_names[s]);
    if (!found) return ts_diag_set(d, TS_EINVAL, "%s has no symbolic dim named '%s'", path, o->sym_names[s]);
  }
  for (int b = 0; b < o->nbuckets; b++) {
    bool found = false;
    for (int v = 0; v < g->nvalues && !found; v++)
      for (int a = 0; a < g->values[v]->ndim && !found; a++)
        found = g->values[v]->dims[a].sym && !strcmp(g->values[v]->dims[a].sym, o->bucket_names[b]);
    if (!found)
      return ts_diag_set(d, TS_EINVAL, "%s has no symbolic dim named '%s' (--buckets)", path, o->bucket_names[b]);
  }
  return TS_OK;
}

/* --conv-layout nchwc: the channel block is the target's vector width in
 * floats (8 with AVX2, 16 with AVX-512); a GPU target keeps NCHW. */
static ts_status resolve_conv_block(const tun_model_opts *o, tg_pass_opts *go, ts_diag *d) {
  if (go->conv_block >= 0) return TS_OK;
  cg_target t;
  if (cg_target_parse(o->target ? o->target : "llvm", &t, d) != TS_OK) return d && d->code ? d->code : TS_EINVAL;
  if (t.kind != CG_TARGET_LLVM) {
    go->conv_block = 0;
    return TS_OK;
  }
  if (cg_llvm_resolve_target(&t, d) != TS_OK) return d && d->code ? d->code : TS_EINVAL;
  go->conv_block = t.vector_bits >= 64 ? t.vector_bits / 32 : 4;
  return TS_OK;
}

ts_status tun_model_import(const char *path, const tun_model_opts *o, const char *stop_after, ir_module *m,
                           tg_graph **g, ts_diag *d) {
  *g = NULL;
  tg_pass_opts go = o->graph;
  if (resolve_conv_block(o, &go, d) != TS_OK) return prefix(d, path);
  if (tg_onnx_import(path, m, g, d) != TS_OK) return prefix(d, path);
  if (!(stop_after && !*stop_after) && tg_run_pipeline_opts(*g, stop_after, &go, d) != TS_OK)
    return prefix(d, path);
  (*g)->opts = go;
  return check_syms(*g, path, o, d);
}

/* Appends the tasks of binding i not in *all yet; a symbolic one is named
 * after its bucket values (NAME@seq=128). */
static ts_status add_bucket_tasks(tg_graph *g, const tun_model_opts *o, int i, tg_task **all, int *n, int *cap,
                                  ts_diag *d) {
  const char *names[TUN_MODEL_MAX_SYMS + TUN_MODEL_MAX_BUCKET_SYMS];
  int64_t values[TUN_MODEL_MAX_SYMS + TUN_MODEL_MAX_BUCKET_SYMS];
  int nb = tun_model_bucket_binding(o, i, names, values);
  tg_task *t = NULL;
  int nt = 0;
  ts_status st = tg_extract_tasks_at(g, nb, names, values, &t, &nt, d);
  for (int k = 0; k < nt && !st; k++) {
    bool dup = false;
    for (int j = 0; j < *n && !dup; j++) dup = (*all)[j].key == t[k].key && ir_struct_equal_func((*all)[j].func, t[k].func);
    if (dup) continue;
    const ir_func *f = ir_module_get(g->mod, t[k].name);
    if (f && f->nsyms) { /* the bucket values of the symbols it has */
      char nm[512];
      int len = snprintf(nm, sizeof nm, "%s@", t[k].name), first = 1;
      for (int b = 0; b < o->nbuckets; b++)
        for (int y = 0; y < f->nsyms; y++)
          if (!strcmp(f->syms[y]->name, o->bucket_names[b]) && len < (int)sizeof nm) {
            len += snprintf(nm + len, sizeof nm - (size_t)len, "%s%s=%lld", first ? "" : ",", o->bucket_names[b],
                            (long long)values[nb - o->nbuckets + (o->nbuckets - 1 - b)]);
            first = 0;
          }
      if (!first && !(t[k].name = ts_arena_strdup(g->mod->arena, nm))) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    if (!st && !ts_grow((void **)all, cap, *n + 1, sizeof **all)) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    if (!st) (*all)[(*n)++] = t[k];
  }
  if (t) tg_tasks_free(t, nt);
  return st;
}

ts_status tun_model_tasks(const char *path, const tun_model_opts *o, ir_module *m, tg_graph **g, tg_task **tasks,
                          int *ntasks, ts_diag *d) {
  *tasks = NULL;
  *ntasks = 0;
  ts_status st = tun_model_import(path, o, NULL, m, g, d);
  if (st != TS_OK) return st;
  if (!o->nbuckets) {
    if (tg_extract_tasks_at(*g, o->nsyms, o->sym_names, o->sym_values, tasks, ntasks, d) != TS_OK)
      return prefix(d, path);
    return TS_OK;
  }
  int cap = 0;
  for (int i = 0; i < tun_model_bucket_count(o) && !st; i++) st = add_bucket_tasks(*g, o, i, tasks, ntasks, &cap, d);
  if (st != TS_OK) {
    ts_free(*tasks);
    *tasks = NULL;
    *ntasks = 0;
    return prefix(d, path);
  }
  return TS_OK;
}

tun_model_task *tun_model_sched_tasks(const tg_task *tasks, int ntasks, FILE *warn) {
  tun_model_task *mt = ts_calloc((size_t)(ntasks ? ntasks : 1), sizeof *mt);
  if (!mt) return NULL;
  for (int i = 0; i < ntasks; i++) {
    mt[i].name = tasks[i].name;
    mt[i].weight = tasks[i].weight;
    mt[i].flops = tasks[i].flops > 0 ? tasks[i].flops : 0;
    mt[i].func = tasks[i].func;
    mt[i].definition = tasks[i].definition;
    char key[17];
    ir_workload_key(tasks[i].func, key);
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)tasks[i].key);
    if (strcmp(key, want) && warn) /* the key build looks up must be the one tune logs */
      fprintf(warn, "tessel tune-model: warning: task %s: key %s differs from its function's workload key %s; "
                    "logging under %s\n", tasks[i].name, want, key, key);
  }
  return mt;
}


/* ==== kernels ============================================================================== */
/* A specialisation of a symbolic kernel: kernel index, padded (covers every
 * size up to vals) or exact, and the sizes per size var of the kernel. */
typedef struct mspec {
  int kernel;
  bool covers;
  bool library;             /* the kernel is a library call on the symbolic function */
  const tun_record *rec;    /* the record it replays (NULL: none) */
  char key[17];             /* the bound function's task key */
  int64_t vals[TSRT_MODEL_MAX_SYMS];
} mspec;

typedef struct mkernel {
  ir_func *func;        /* the PrimFunc (maybe symbolic) */
  sch_traced *sched;    /* its schedule */
  cg_lowered low;
  bool tuned;           /* the log's record was replayed on it */
  bool covers;          /* a specialisation padded to its bucket (takes the sizes) */
  int nspecs;           /* its specialisations, smallest bucket first */
  struct mspec *specs;
  char key[17];         /* task key (bound as tasks bind) */
  const tun_record *widest; /* symbolic: the best record of its largest binding that has one */
  double widest_vol;    /* that binding's product of sizes */
  int nlayout;          /* the schedule's weight layout rewrites (docs/LAYOUT.md) */
  sch_layout_map layout[8];
} mkernel;

typedef struct build_state {
  const char *path;
  const tun_model_opts *o;
  cg_target tg;
  ts_arena *arena;
  ir_module *mod;
  tg_graph *g;
  tun_db *db;
  mkernel *k;
  int nk, capk;
  int ntuned, ndefault, nspec, nrecord_unused;
  int ncovering;        /* specialisations padded to their bucket */
  char padded_why[2048]; /* why the last record did not replay on a padded function */
  const ir_func *spec_of; /* the symbolic function whose specialisation is being made (add_spec) */
  int nlayout_kept;     /* records whose layout rewrite was dropped (a non-constant input) */
  int nlibrary;         /* kernels that are library calls (library records) */
  int nlib_generic;     /* generic (symbolic) kernels that are a library call */
  int nlib_below;       /* library calls placed below a padded bucket (library_below) */
  int npacked_weights, npacked_copies;
  int threads;          /* the thread count the build is for (records at it first) */
  int nother_threads;   /* kernels whose records were all of other thread counts */
} build_state;

static int find_kernel(build_state *b, const ir_func *f) {
  uint64_t h = ir_struct_hash_func(f);
  for (int i = 0; i < b->nk; i++)
    if (b->k[i].func && ir_struct_hash_func(b->k[i].func) == h && ir_struct_equal_func(b->k[i].func, f))
      return i;
  return -1;
}

static mkernel *new_kernel(build_state *b, ts_diag *d) {
  if (!ts_grow((void **)&b->k, &b->capk, b->nk + 1, sizeof *b->k))
    return ts_diag_set(d, TS_ENOMEM, "out of memory"), NULL;
  mkernel *k = &b->k[b->nk++];
  memset(k, 0, sizeof *k);
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

/* A record of the packed call (the weight packed once, tun_library_packed_param)
 * applies only where every call of f (or a structurally equal function)
 * feeds that weight from a constant: why not, or NULL. */
static const char *packed_blocker(const build_state *b, const tun_record *r, const ir_func *f) {
  int p = tun_library_packed_param(r); /* -1 for every other record */
  if (p < 0) return NULL;
  if (!f) return "no calls to check";
  sch_layout_map map = {.param = p};
  return layout_blocker(b, f, &map, 1);
}

/* Replays the best verified record of key on f (when it does not replay, the
 * next best, saying so on the warning stream); NULL (and no error) when
 * there is none or it does not apply. A record that re-lays weights
 * (TransformLayout) keeps its maps in maps[0..*nmaps) when every call of f
 * (calls_of) feeds those params from constants, which the build then
 * pre-packs; otherwise (or with calls_of NULL: a specialisation, whose calls
 * pass the same tensors to the symbolic kernel) the rewrite is dropped and
 * the kernel reads the original layout. */
/* A trace that re-lays a weight (TransformLayout): a specialisation cannot
 * keep that (the symbolic kernel's calls pass the weight in its original
 * layout) and replays it without, reading the weight in a layout it was never
 * timed in (a BERT projection padded to its bucket: 6.9 ms a call against the
 * 1.3 ms the record was timed at). */
static bool relays_weight(const tun_record *r) {
  return r && !tun_record_is_library(r, NULL, 0) && r->trace && strstr(r->trace, "\"TransformLayout\"");
}

/* Of ranked records rs[0..n): the best that re-lays no weight (NULL: none). */
static const tun_record *best_not_relaid(const tun_record **rs, int n) {
  for (int i = 0; i < n; i++)
    if (!relays_weight(rs[i])) return rs[i];
  return NULL;
}

static sch_traced *from_log(build_state *b, const char *key, const ir_func *f, const ir_func *calls_of,
                            bool *had_record, sch_layout_map *maps, int *nmaps, bool padded) {
  *had_record = false;
  *nmaps = 0;
  if (!b->db) return NULL;
  int n = 0;
  bool other = false;
  const tun_record **rs = tun_db_ranked_for_build(b->db, key, b->tg.text, b->threads, &n, &other);
  if (other && !padded) {
    b->nother_threads++;
    if (b->o->warn)
      fprintf(b->o->warn, "tessel build: %s [%s]: no record measured at %d thread%s; using the best of any thread count\n",
              f->name ? f->name : "?", key, b->threads, b->threads == 1 ? "" : "s");
  }
  sch_traced *s = NULL;
  /* the best record; when it does not replay, the next best (saying so) */
  /* padded (a bucket's function padded to it): the best record only, a
   * trace only (a library call is made for the bound sizes); quiet, as the
   * caller falls back to the bound function */
  /* a specialisation (no calls_of) skips the records that re-lay a weight
   * while a record that does not is left */
  bool skip_relaid = !calls_of && relays_weight(n > 0 ? rs[0] : NULL) && best_not_relaid(rs, n);
  if (skip_relaid && b->o->warn)
    fprintf(b->o->warn, "tessel build: %s [%s]: the best record re-lays a weight, which a specialisation cannot keep; "
                        "took the best record that does not\n", f->name ? f->name : "?", key);
  for (int i = 0, tried = 0; i < n && !s && (!padded || tried == 0); i++) {
    const tun_record *r = rs[i];
    if (skip_relaid && relays_weight(r)) continue;
    tried++;
    *had_record = true;
    *nmaps = 0;
    ts_diag d;
    ts_diag_clear(&d);
    if (tun_record_is_library(r, NULL, 0)) { /* a library call: no trace, no layout rewrite */
      if (padded) {
        snprintf(b->padded_why, sizeof b->padded_why, "it is a library call, made for these sizes");
        continue;
      }
      const char *why = packed_blocker(b, r, calls_of ? calls_of : b->spec_of);
      if (why) {
        if (b->o->warn)
          fprintf(b->o->warn, "tessel build: %s [%s]: the %s record packs its weight once, which is no constant in %s; %s\n",
                  f->name ? f->name : "?", key, i ? "next best" : "best", why,
                  i + 1 < n ? "trying the next best" : "default schedule");
        continue;
      }
      s = tun_record_schedule(r, f, &b->tg, &d);
      if (s) b->nlibrary++;
      if (!s && b->o->warn)
        fprintf(b->o->warn, "tessel build: the %s record for %s [%s] (a library call) does not apply: %s; %s\n",
                i ? "next best" : "best", f->name ? f->name : "?", key, d.msg,
                i + 1 < n ? "trying the next best" : "default schedule");
      continue;
    }
    sch_trace *tr = sch_trace_from_json(r->trace, &d);
    int nm = tr ? sch_layout_maps_of_trace(tr, f, maps, 8, &d) : 0;
    if (nm > 0) {
      const char *why = calls_of ? layout_blocker(b, calls_of, maps, nm) : "a symbolic kernel shares its calls";
      if (why) {
        sch_trace *plain = sch_trace_without_kind(tr, SCH_I_TRANSFORM_LAYOUT);
        if (b->o->warn)
          fprintf(b->o->warn, "tessel build: %s [%s]: the record re-lays a weight, but %s%s; kept the original layout\n",
                f->name ? f->name : "?", key, calls_of ? "it is not a constant in call " : "", why);
        sch_trace_free(tr);
        tr = plain;
        nm = 0;
        b->nlayout_kept++;
      }
    }
    *nmaps = nm > 0 ? nm : 0;
    s = tr && nm >= 0 ? sch_trace_replay(tr, f, 1, &d) : NULL;
    sch_trace_free(tr);
    if (!s && padded) snprintf(b->padded_why, sizeof b->padded_why, "%s", d.msg);
    if (!s && b->o->warn && !padded)
      fprintf(b->o->warn, "tessel build: the %s record for %s [%s] does not replay on it (%s); %s\n",
              i ? "next best" : "best", f->name ? f->name : "?", key, d.msg,
              i + 1 < n ? "trying the next best" : "default schedule");
  }
  if (!s) *nmaps = 0;
  ts_free(rs);
  return s;
}

/* The best record of key the build would replay first for a specialisation
 * (NULL: none): the best that re-lays no weight when there is one
 * (relays_weight), else the best. */
static const tun_record *best_record(const build_state *b, const char *key) {
  if (!b->db) return NULL;
  int n = 0;
  bool other = false;
  const tun_record **rs = tun_db_ranked_for_build(b->db, key, b->tg.text, b->threads, &n, &other);
  const tun_record *r = best_not_relaid(rs, n);
  if (!r && n > 0) r = rs[0];
  ts_free(rs);
  return r;
}

/* A bucket whose best record is a library call: the call on the symbolic
 * function f, which takes the sizes at run time, covers the bucket (and
 * every other size; docs/TUNING.md "Library candidates"). NULL when the
 * record is no library call or has no call on f (said). */
static sch_traced *library_any_size(build_state *b, const tun_record *r, const ir_func *f, const char *key) {
  if (!r || !tun_record_is_library(r, NULL, 0)) return NULL;
  const char *why = packed_blocker(b, r, f);
  if (why) {
    if (b->o->warn)
      fprintf(b->o->warn, "tessel build: %s [%s]: the library record packs its weight once, which is no constant "
                          "in %s; not used at every size\n", f->name ? f->name : "?", key, why);
    return NULL;
  }
  ts_diag q;
  ts_diag_clear(&q);
  sch_traced *s = tun_record_schedule_any_size(r, f, &b->tg, &q);
  if (!s && b->o->warn)
    fprintf(b->o->warn, "tessel build: %s [%s]: the library record does not apply at every size (%s); "
                        "used at exactly its sizes\n", f->name ? f->name : "?", key, q.msg);
  return s;
}

/* The product of a specialisation's sizes over f's size vars. */
static double spec_volume(const ir_func *f, const mspec *sp) {
  double v = 1;
  for (int s = 0; s < f->nsyms; s++) v *= (double)sp->vals[s];
  return v;
}

/* Puts sp into symbolic kernel ki's list, smallest (product of its sizes)
 * first: the runtime takes the first that fits. Room for two per binding
 * (a bucket's and a library call below it, library_below). */
static ts_status insert_spec(build_state *b, int ki, const mspec *sp, ts_diag *d) {
  mkernel *k = &b->k[ki];
  const ir_func *f = k->func;
  int cap = 2 * tun_model_bucket_count(b->o);
  if (!k->specs && !(k->specs = TS_ANEWN(b->arena, mspec, cap))) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  if (k->nspecs == cap) return ts_diag_set(d, TS_EINTERNAL, "more specialisations than bindings");
  double vol = spec_volume(f, sp);
  int at = k->nspecs;
  while (at > 0 && spec_volume(f, &k->specs[at - 1]) > vol) {
    k->specs[at] = k->specs[at - 1];
    at--;
  }
  k->specs[at] = *sp;
  k->nspecs++;
  b->nspec++;
  b->ncovering += sp->covers;
  return TS_OK;
}

/* The fastest library record of key at the build's thread count (the
 * latest run-off's first, as tun_db_ranked_for_build ranks), or NULL. */
static const tun_record *best_library_record(build_state *b, const char *key) {
  int n = 0;
  bool other = false;
  const tun_record **rs = tun_db_ranked_for_build(b->db, key, b->tg.text, b->threads, &n, &other);
  const tun_record *lib = NULL;
  for (int i = 0; i < n && !lib; i++)
    if (tun_record_is_library(rs[i], NULL, 0)) lib = rs[i];
  ts_free(rs);
  return lib;
}

/* Is size var name one of the bucket symbols? */
static bool is_bucket_sym(const tun_model_opts *o, const char *name) {
  for (int i = 0; i < o->nbuckets; i++)
    if (!strcmp(o->bucket_names[i], name)) return true;
  return false;
}

/* Padding waste (docs/MODEL.md "Shape buckets", "Below a padded bucket"): a
 * bucket's generated kernel, padded, costs its bucket's time T at every size
 * it covers, while a library call on the symbolic function costs about
 * L * (sizes / bucket) (L: the call's time measured at the bucket, the same
 * log). So where the log has both, the call goes in as one more covering
 * specialisation up to the sizes where it is the cheaper: each bucket symbol
 * above 1 (a bucket of 1 cannot shrink) scaled by (T / L)^(1 / their number),
 * so that in the whole box the call does at most T / L of the bucket's work.
 * Only when that box reaches beyond the next smaller covering specialisation
 * (else the sizes it would take go there anyway). */
static ts_status library_below(build_state *b, int ki, ts_diag *d) {
  const ir_func *f = b->k[ki].func;
  int n0 = b->k[ki].nspecs;
  if (n0 == 0) return TS_OK;
  mspec *orig = TS_ANEWN(b->arena, mspec, n0);
  if (!orig) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  memcpy(orig, b->k[ki].specs, (size_t)n0 * sizeof *orig);
  for (int j = 0; j < n0; j++) {
    const mspec *sp = &orig[j];
    if (!sp->covers || sp->library || !sp->rec) continue;
    int nb = 0; /* the bucket symbols that can shrink (a bucket of 1 cannot) */
    for (int s = 0; s < f->nsyms; s++) nb += is_bucket_sym(b->o, f->syms[s]->name) && sp->vals[s] > 1;
    if (nb == 0) continue;
    const tun_record *lib = best_library_record(b, sp->key);
    double t = tun_record_mean(sp->rec), l = lib ? tun_record_mean(lib) : 0;
    if (!lib || !(t > 0) || !(l > t) || l >= 1e9) continue;
    mspec below = *sp;
    double scale = pow(t / l, 1.0 / nb);
    bool empty = false;
    for (int s = 0; s < f->nsyms; s++)
      if (is_bucket_sym(b->o, f->syms[s]->name) && sp->vals[s] > 1) {
        below.vals[s] = (int64_t)floor((double)sp->vals[s] * scale);
        empty |= below.vals[s] < 1;
      }
    double vol = spec_volume(f, &below), prev = 0;
    for (int i = 0; i < n0; i++) {
      double v = spec_volume(f, &orig[i]);
      /* an exact specialisation takes no sizes below it */
      if (i != j && orig[i].covers && v < spec_volume(f, sp) && v > prev) prev = v;
    }
    if (empty || vol <= prev) continue;
    sch_traced *ss = library_any_size(b, lib, f, sp->key);
    if (!ss) continue;
    mkernel *lk = new_kernel(b, d);
    if (!lk) {
      sch_traced_free(ss);
      return TS_ENOMEM;
    }
    lk->func = NULL; /* never matched by find_kernel */
    lk->sched = ss;
    lk->tuned = true;
    lk->covers = true;
    memcpy(lk->key, sp->key, 17);
    ts_status st = cg_lower(b->arena, sch_traced_func(ss), &b->tg, &lk->low, d);
    if (st != TS_OK) return st;
    below.kernel = (int)(lk - b->k);
    below.library = true;
    below.rec = lib;
    if ((st = insert_spec(b, ki, &below, d)) != TS_OK) return st;
    f = b->k[ki].func; /* new_kernel may have moved the array */
    b->nlibrary++;
    b->nlib_below++;
  }
  return TS_OK;
}

/* Adds to symbolic kernel ki the specialisation for one binding (names,
 * values) when the log has a record for the bound function: with buckets,
 * the record replayed on the function padded to the bucket (covers every
 * size up to it, tg_task_bind_upto), else, or when that does not replay,
 * on the bound function (exactly those sizes). *had: a record was found. */
static ts_status add_spec(build_state *b, int ki, int nn, const char **names, const int64_t *values, bool *had,
                          ts_diag *d) {
  const ir_func *f = b->k[ki].func;
  mspec sp = {.kernel = -1};
  for (int s = 0; s < f->nsyms; s++) {
    sp.vals[s] = TG_TASK_DEFAULT_SYM;
    for (int j = 0; j < nn; j++)
      if (!strcmp(names[j], f->syms[s]->name)) sp.vals[s] = values[j];
  }
  for (int i = 0; i < b->k[ki].nspecs; i++) /* a binding of symbols it lacks: the same sizes */
    if (!memcmp(b->k[ki].specs[i].vals, sp.vals, sizeof sp.vals)) return TS_OK;
  ir_func *bound = tg_task_bind(b->arena, f, nn, names, values, d);
  if (!bound) return d->code ? d->code : TS_EINTERNAL;
  char key[17];
  ir_workload_key(bound, key);
  sch_layout_map unused[8];
  int nunused;
  bool h = false;
  sch_traced *ss = NULL;
  const tun_record *best = best_record(b, key);
  double vol = 1;
  for (int s = 0; s < f->nsyms; s++) vol *= (double)sp.vals[s];
  if (best && vol >= b->k[ki].widest_vol) {
    b->k[ki].widest = best;
    b->k[ki].widest_vol = vol;
  }
  sp.rec = best;
  memcpy(sp.key, key, sizeof sp.key);
  if (b->o->nbuckets && (ss = library_any_size(b, best, f, key))) {
    h = true;
    sp.covers = true;
    sp.library = true;
    b->nlibrary++;
  } else if (b->o->nbuckets) {
    ts_diag q;
    ts_diag_clear(&q);
    b->padded_why[0] = '\0';
    ir_func *padded = tg_task_bind_upto(b->arena, f, nn, names, values, &q);
    ss = padded ? from_log(b, key, padded, NULL, &h, unused, &nunused, true) : NULL;
    sp.covers = ss != NULL;
    if (!ss && padded && h && b->o->warn)
      fprintf(b->o->warn, "tessel build: %s [%s]: the record does not replay on the function padded to its bucket "
                          "(%s); used at exactly those sizes\n", f->name ? f->name : "?", key, b->padded_why);
    else if (!padded && b->o->warn)
      fprintf(b->o->warn, "tessel build: %s; its bucket [%s] is used at exactly those sizes\n", q.msg, key);
  }
  b->spec_of = f;
  if (!ss) ss = from_log(b, key, bound, NULL, &h, unused, &nunused, false);
  b->spec_of = NULL;
  *had |= h;
  if (!ss) return TS_OK;
  mkernel *sk = new_kernel(b, d);
  if (!sk) {
    sch_traced_free(ss);
    return TS_ENOMEM;
  }
  sk->func = NULL; /* never matched by find_kernel */
  sk->sched = ss;
  sk->tuned = true;
  sk->covers = sp.covers;
  memcpy(sk->key, key, 17);
  ts_status st = cg_lower(b->arena, sch_traced_func(ss), &b->tg, &sk->low, d);
  if (st != TS_OK) return st;
  sp.kernel = (int)(sk - b->k);
  return insert_spec(b, ki, &sp, d);
}

/* Symbolic kernel ki's specialisations: one per binding (the --sym values,
 * or every combination of bucket values). */
static ts_status specialise(build_state *b, int ki, bool *had, ts_diag *d) {
  const char *names[TUN_MODEL_MAX_SYMS + TUN_MODEL_MAX_BUCKET_SYMS];
  int64_t values[TUN_MODEL_MAX_SYMS + TUN_MODEL_MAX_BUCKET_SYMS];
  for (int i = 0; i < tun_model_bucket_count(b->o); i++) {
    int nn = tun_model_bucket_binding(b->o, i, names, values);
    ts_status st = add_spec(b, ki, nn, names, values, had, d);
    if (st != TS_OK) return st;
  }
  return b->o->nbuckets ? library_below(b, ki, d) : TS_OK;
}

static ts_status schedule_kernel(build_state *b, mkernel *k, ts_diag *d) {
  ir_func *bound = tg_task_bind(b->arena, k->func, b->o->nsyms, b->o->sym_names, b->o->sym_values, d);
  if (!bound) return d->code ? d->code : TS_EINTERNAL;
  ir_workload_key(bound, k->key);
  bool had = false;
  if (k->func->nsyms == 0) {
    k->sched = from_log(b, k->key, k->func, k->func, &had, k->layout, &k->nlayout, false);
    k->tuned = k->sched != NULL;
    if (!k->tuned) k->nlayout = 0;
  } else {
    /* symbolic: the default schedule serves every size; the records (tuned
     * at the bound sizes: the --sym values, or each bucket) become
     * specialisations (in the original layout: all take the same tensors) */
    int ki = (int)(k - b->k);
    ts_status st = specialise(b, ki, &had, d);
    if (st != TS_OK) return st;
    k = &b->k[ki]; /* new_kernel may have moved the array */
    /* the generic kernel: the library call when the largest binding with a
     * record chose one (it takes the sizes at run time) */
    if ((k->sched = library_any_size(b, k->widest, k->func, k->key))) {
      k->tuned = true;
      b->nlibrary++;
      b->nlib_generic++;
    }
  }
  if (had && !k->tuned && k->nspecs == 0) b->nrecord_unused++;
  if (!k->sched) {
    /* the default schedule may re-lay a weight too (an int8 kernel's VNNI
     * packing, search.h srch_tensor_default): the params every call feeds
     * from a constant are marked layout-free, as a task's are, and what it
     * re-lays is packed at build time like a record's */
    const ir_func *df = k->func;
    int64_t mask = 0;
    /* (a symbolic kernel only without specialisations: they take the
     * tensors its calls pass, in the original layout) */
    for (int p = 0; (!k->func->nsyms || k->nspecs == 0) && p < k->func->ninputs && p < 63; p++) {
      sch_layout_map one = {.param = p};
      if (!layout_blocker(b, k->func, &one, 1)) mask |= INT64_C(1) << p;
    }
    ir_func *mf = mask ? TS_ANEW(b->arena, ir_func) : NULL;
    if (mf) {
      *mf = *k->func;
      if (!ir_annot_set(b->arena, &mf->nannot, &mf->annots,
                        (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = mask}))
        df = mf;
    }
    ts_status st = tun_schedule_opts(df, NULL, &b->tg, &(tun_default_opts){.pack_weights = df != k->func}, &k->sched, d);
    if (st != TS_OK) return st;
    ts_diag q;
    ts_diag_clear(&q);
    int nm = df == k->func ? 0 : sch_layout_maps_of_trace(sch_traced_trace(k->sched), df, k->layout, 8, &q);
    k->nlayout = nm > 0 ? nm : 0;
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

/* The plan symbol of graph dim dm: a base symbol, or a product of them
 * (dim.c) defined in defs over its factors, which are registered first. */
static int plan_sym(ts_arena *a, const char **names, tsrt_model_symdef *defs, int *n, tg_dim dm, ts_diag *d) {
  tg_mono m;
  if (!tg_mono_parse(dm, &m)) {
    ts_diag_set(d, TS_EINVAL, "symbolic dim '%s' is not a product of symbols", dm.sym);
    return -1;
  }
  if (m.n == 1 && m.coeff == 1) {
    int k = sym_index(names, n, dm.sym);
    if (k < 0) ts_diag_set(d, TS_EUNSUPPORTED, "more than %d symbols", TSRT_MODEL_MAX_SYMS);
    return k;
  }
  int32_t *fs = TS_ANEWN(a, int32_t, m.n);
  if (!fs) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    return -1;
  }
  for (int f = 0; f < m.n; f++) {
    const char *fn = ts_arena_strdup(a, m.f[f]);
    if (!fn) {
      ts_diag_set(d, TS_ENOMEM, "out of memory");
      return -1;
    }
    if ((fs[f] = plan_sym(a, names, defs, n, (tg_dim){-1, fn}, d)) < 0) return -1;
  }
  int before = *n, k = sym_index(names, n, dm.sym);
  if (k < 0) ts_diag_set(d, TS_EUNSUPPORTED, "more than %d symbols", TSRT_MODEL_MAX_SYMS);
  else if (k == before) defs[k] = (tsrt_model_symdef){.coeff = m.coeff, .nfactors = m.n, .factors = fs};
  return k;
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
  return a->dtype.lanes == c->dtype.lanes && (!a->dtype.lanes || a->dtype.code == c->dtype.code);
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
  const char **syms = TS_ANEWN(b->arena, const char *, TSRT_MODEL_MAX_SYMS);
  tsrt_model_symdef *symdefs = TS_ANEWN(b->arena, tsrt_model_symdef, TSRT_MODEL_MAX_SYMS);
  tsrt_model_tensor *ts = TS_ANEWN(b->arena, tsrt_model_tensor, ntensors ? ntensors : 1);
  const sch_layout_map **tmap = TS_ANEWN(b->arena, const sch_layout_map *, ntensors ? ntensors : 1);
  int *tsrc = TS_ANEWN(b->arena, int, ntensors ? ntensors : 1); /* the value a tensor holds */
  tsrt_model_call *cs = TS_ANEWN(b->arena, tsrt_model_call, g->nnodes ? g->nnodes : 1);
  int32_t *ins = TS_ANEWN(b->arena, int32_t, g->ninputs ? g->ninputs : 1);
  int32_t *outs = TS_ANEWN(b->arena, int32_t, g->noutputs ? g->noutputs : 1);
  if (!syms || !symdefs || !ts || !cs || !ins || !outs || !tmap || !tsrc) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  /* the counts of calls and symbols and the weights come below */
  *p = (tsrt_model_plan){.abi_version = TSRT_MODEL_ABI_VERSION, .name = g->name, .target = b->tg.text,
                         .ntensors = ntensors, .ninputs = g->ninputs, .noutputs = g->noutputs, .syms = syms,
                         .symdefs = symdefs,
                         .tensors = ts, .calls = cs, .inputs = ins, .outputs = outs};
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
      int k = plan_sym(b->arena, syms, symdefs, &nsyms, x->dims[j], d);
      if (k < 0) return d && d->code ? d->code : TS_EINVAL;
      t->shape[j] = TSRT_DIM_SYM(k);
    }
    tsrc[v] = v;
    if (x->kind == TG_V_CONST) {
      if (!x->data && x->nbytes) return ts_diag_set(d, TS_EINVAL, "constant %s has no data", x->name);
      t->nbytes = x->nbytes;
      if (taken[v]) continue; /* replaced by its packing: its space comes below, in the packed size */
      wbytes = (wbytes + 63) / 64 * 64;
      t->offset = wbytes;
      wbytes += x->nbytes;
    }
  }
  /* packed constants: the value's own tensor (nobody reads its original
   * layout), or extra tensors after the graph's values; each its packed size
   * (a padded layout or an int8 weight stored as i16 is larger) */
  for (int u = 0; u < nuse; u++) {
    int id = uses[u].tensor, v = uses[u].value;
    const tg_value *x = g->values[v];
    tsrt_model_tensor *t = &ts[id];
    int64_t shape[SCH_LAYOUT_MAX_AXES];
    int pnd = sch_layout_packed_shape(uses[u].map, shape);
    /* a padded layout (n, k rounded up to the VNNI tile) is larger than
     * the constant: its own space then, zeros in the padding */
    ir_dtype pdt = sch_layout_packed_dtype(uses[u].map, x->dtype); /* an int8 weight stored as i16: twice the bytes */
    uint64_t pbytes = (uint64_t)ir_dtype_bytes(pdt);
    for (int j = 0; j < pnd; j++) pbytes *= (uint64_t)shape[j];
    if (id >= g->nvalues) {
      *t = ts[v];
      t->name = ts_arena_printf(b->arena, "%s.packed%d", x->name, id - g->nvalues);
      if (!t->name) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    wbytes = (wbytes + 63) / 64 * 64;
    t->offset = wbytes;
    t->nbytes = pbytes > x->nbytes ? pbytes : x->nbytes;
    wbytes += t->nbytes;
    t->dtype = pdt.code;
    t->ndim = pnd;
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
    if (tmap[t]) { /* host-side evaluation of the kernel's map */
      ts_status st = sch_layout_pack_as(tmap[t], x->dtype, x->data, w + ts[t].offset, d);
      if (st) {
        ts_free(w);
        return st;
      }
    } else
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
    tsrt_model_spec *sps = TS_ANEWN(b->arena, tsrt_model_spec, k->nspecs ? k->nspecs : 1);
    if (!args || !cs_syms || !sps) return ts_diag_set(d, TS_ENOMEM, "out of memory");
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
    }
    c->syms = cs_syms;
    for (int q = 0; q < k->nspecs; q++) /* the sizes in the kernel's size-var order, as the call's syms */
      sps[q] = (tsrt_model_spec){.kernel = k->specs[q].kernel, .covers = k->specs[q].covers,
                                 .values = k->specs[q].vals};
    c->nspecs = k->nspecs;
    c->specs = k->nspecs ? sps : NULL;
  }
  for (int i = 0; i < g->ninputs; i++) ins[i] = g->inputs[i];
  for (int i = 0; i < g->noutputs; i++) outs[i] = g->outputs[i];
  p->ncalls = nc;
  p->nsyms = nsyms;
  return TS_OK;
}

/* Writes MODEL.so.json: target and the inputs'/outputs' names, dtypes and
 * shapes (-1 and the symbol's name in dims for a symbolic dim). */
static ts_status sig_write(const char *so, const tsrt_model_plan *p, ts_diag *d) {
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
  return rc ? ts_diag_set(d, TS_EIO, "cannot write %s", side) : TS_OK;
}

/* ==== the build ============================================================================ */

/* One kernel per distinct PrimFunc the live calls name. */
static ts_status collect_kernels(build_state *b, ts_diag *d) {
  for (int i = 0; i < b->g->nnodes; i++) {
    const tg_node *n = b->g->nodes[i];
    if (n->dead) continue;
    if (n->op != TG_OP_CALL)
      return ts_diag_set(d, TS_EINTERNAL, "%s: node %s is still a %s after the pass pipeline", b->path, n->name,
                         tg_op_name(n->op));
    ir_func *f = ir_module_get(b->mod, n->callee);
    if (!f)
      return ts_diag_set(d, TS_EINTERNAL, "%s: node %s calls %s, which the module lacks", b->path, n->name,
                         n->callee);
    if (find_kernel(b, f) >= 0) continue;
    mkernel *k = new_kernel(b, d);
    if (!k) return TS_ENOMEM;
    k->func = f;
    if (schedule_kernel(b, &b->k[b->nk - 1], d) != TS_OK) {
      char what[600];
      snprintf(what, sizeof what, "%s: kernel %s", b->path, f->name);
      return prefix(d, what);
    }
  }
  return TS_OK;
}

static ts_status fill_result(const build_state *b, const tsrt_model_plan *plan, tun_model_result *r) {
  snprintf(r->target, sizeof r->target, "%s", b->tg.text);
  r->kernels = b->nk - b->nspec;
  r->ntuned = b->ntuned;
  r->ndefault = b->ndefault;
  r->nspec = b->nspec;
  r->ncovering = b->ncovering;
  r->nrecord_unused = b->nrecord_unused;
  r->threads = b->threads;
  r->nother_threads = b->nother_threads;
  r->nlayout_kept = b->nlayout_kept;
  r->nlibrary = b->nlibrary;
  r->nlib_generic = b->nlib_generic;
  r->nlib_below = b->nlib_below;
  r->ncalls = plan->ncalls;
  r->ntensors = plan->ntensors;
  r->weights_bytes = plan->weights_bytes;
  r->npacked_weights = b->npacked_weights;
  r->npacked_copies = b->npacked_copies;
  r->k = ts_calloc((size_t)(b->nk ? b->nk : 1), sizeof *r->k);
  if (!r->k) return TS_ENOMEM;
  r->nk = b->nk;
  for (int i = 0; i < b->nk; i++) {
    const mkernel *k = &b->k[i];
    tun_model_kernel *o = &r->k[i];
    const ir_func *f = k->func ? k->func : sch_traced_func(k->sched);
    snprintf(o->name, sizeof o->name, "%s", f->name ? f->name : "?");
    memcpy(o->key, k->key, sizeof o->key);
    o->tuned = k->tuned;
    o->symbolic = k->func && k->func->nsyms > 0;
    o->specialisation = !k->func;
    o->covers = k->covers;
    o->npacked = k->nlayout;
    for (int m = 0; m < k->nlayout; m++) o->packed_params[m] = k->layout[m].param;
  }
  return TS_OK;
}

/* The steps after the import: kernels, plan, link, signature. */
static ts_status build_steps(build_state *b, const char *out, double t0, tsrt_model_plan *plan,
                             tun_model_result *r, ts_diag *d) {
  ts_status st = collect_kernels(b, d);
  if (st != TS_OK) return st;
  if (make_plan(b, plan, d) != TS_OK) return prefix(d, b->path);
  const cg_lowered **lows = ts_calloc((size_t)(b->nk ? b->nk : 1), sizeof *lows);
  if (!lows) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < b->nk; i++) lows[i] = &b->k[i].low;
  double t1 = tsrt_now();
  st = cg_llvm_build_model(plan, lows, b->nk, &b->tg, out, d);
  ts_free(lows);
  if (st != TS_OK) return prefix(d, out);
  double t2 = tsrt_now();
  if ((st = sig_write(out, plan, d)) != TS_OK) return st;
  if (fill_result(b, plan, r) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  r->build_seconds = t2 - t0;
  r->codegen_seconds = t2 - t1;
  return TS_OK;
}

ts_status tun_model_build(const char *path, const char *out, const tun_model_opts *o, tun_model_result *r,
                          ts_diag *d) {
  memset(r, 0, sizeof *r);
  build_state b;
  memset(&b, 0, sizeof b);
  b.path = path;
  b.o = o;
  double t0 = tsrt_now();
  tsrt_model_plan plan;
  memset(&plan, 0, sizeof plan);
  b.mod = ir_module_new();
  if (!b.mod) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  b.arena = b.mod->arena;
  ts_status st = TS_OK;
  if (cg_target_parse(o->target ? o->target : "llvm", &b.tg, d) || cg_llvm_resolve_target(&b.tg, d)) {
    st = d && d->code ? d->code : TS_EINVAL;
    goto out;
  }
  b.threads = tun_device_threads(&b.tg, o->threads, false);
  if (o->log) {
    int nwarn = 0;
    b.db = tun_db_load(o->log, o->warn, &nwarn, d);
    if (!b.db) {
      st = d && d->code ? d->code : TS_EIO;
      goto out;
    }
  }
  if ((st = tun_model_import(path, o, NULL, b.mod, &b.g, d)) != TS_OK) goto out;
  if ((st = tg_graph_verify(b.g, d)) != TS_OK) {
    st = prefix(d, path);
    goto out;
  }
  st = build_steps(&b, out, t0, &plan, r, d);
out:
  if (st != TS_OK) tun_model_result_fini(r);
  ts_free((void *)plan.weights);
  for (int i = 0; i < b.nk; i++) sch_traced_free(b.k[i].sched);
  ts_free(b.k);
  if (b.db) tun_db_close(b.db);
  ir_module_free(b.mod);
  return st;
}

void tun_model_result_fini(tun_model_result *r) {
  ts_free(r->k);
  memset(r, 0, sizeof *r);
}
