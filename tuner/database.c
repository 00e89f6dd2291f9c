/* database.c — the tuning log (database.h): append-only JSONL, one record a
 * line, each line written with one write(2) on an O_APPEND descriptor and
 * fsync'd before the append returns, so a killed tuner loses at most the
 * record it was writing (a truncated last line, which loading reports and
 * skips). Schema in docs/LOG.md.
 *
 * In memory the records are an array of heap pointers (stable: a pointer
 * from tun_db_get/tun_db_best stays valid until tun_db_close) plus an index
 * by (workload key, target): an open-addressed table hashed with XXH3 whose
 * groups hold their record indices, the best verified record and a set of
 * trace hashes, so count/best/has_trace for one key and target are O(1). */
#include "tuner/database.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ir/workloads/workloads.h"

/* ---- records -------------------------------------------------------------- */

double tun_record_mean(const tun_record *r) {
  if (r->error || r->nruns <= 0) return 1e10;
  if (r->runoff > 0) return tun_record_median(r); /* one run per round: a loaded round is an outlier */
  double s = 0;
  for (int i = 0; i < r->nruns; i++) s += r->run_secs[i];
  return s / r->nruns;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double tun_record_median(const tun_record *r) {
  if (r->error || r->nruns <= 0) return 1e10;
  double v[TUN_MAX_RUNS];
  memcpy(v, r->run_secs, sizeof(double) * (size_t)r->nruns);
  qsort(v, (size_t)r->nruns, sizeof(double), cmp_double);
  return r->nruns % 2 ? v[r->nruns / 2] : 0.5 * (v[r->nruns / 2 - 1] + v[r->nruns / 2]);
}

static bool dup_str(char **dst, const char *src) {
  *dst = NULL;
  if (!src) return true;
  *dst = ts_strdup(src);
  return *dst != NULL;
}

ts_status tun_record_copy(tun_record *dst, const tun_record *src) {
  *dst = *src;
  dst->workload = dst->target = dst->trace = dst->error = dst->version = NULL;
  dst->graph_opts = dst->kind = dst->params = NULL;
  if (!dup_str(&dst->workload, src->workload) || !dup_str(&dst->target, src->target) ||
      !dup_str(&dst->trace, src->trace) || !dup_str(&dst->error, src->error) ||
      !dup_str(&dst->version, src->version) || !dup_str(&dst->graph_opts, src->graph_opts) ||
      !dup_str(&dst->kind, src->kind) || !dup_str(&dst->params, src->params)) {
    tun_record_fini(dst);
    return TS_ENOMEM;
  }
  return TS_OK;
}

void tun_record_fini(tun_record *r) {
  char **owned[] = {&r->workload, &r->target, &r->trace, &r->error, &r->version, &r->graph_opts, &r->kind, &r->params};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
    ts_free(*owned[i]);
    *owned[i] = NULL;
  }
}

/* ---- JSON ------------------------------------------------------------------- */

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

char *tun_record_to_json(const tun_record *r) {
  json_t *o = json_object();
  if (!o) return NULL;
  bool lib = r->kind && !strcmp(r->kind, TUN_KIND_LIBRARY);
  json_object_set_new(o, "schema", json_integer(lib ? TUN_LOG_SCHEMA : TUN_LOG_SCHEMA_TRACE));
  json_object_set_new(o, "workload_key", json_string(r->workload_key));
  json_object_set_new(o, "workload", str_or_null(r->workload));
  json_object_set_new(o, "target", str_or_null(r->target));
  /* The trace goes in as a JSON value so the log stays readable; text that
   * is not JSON (never written by tessel) is kept as a string. */
  json_t *tr = json_null();
  if (r->trace) {
    json_error_t e;
    tr = json_loads(r->trace, JSON_DECODE_ANY, &e);
    if (!tr) tr = json_string(r->trace);
  }
  json_object_set_new(o, "trace", tr);
  json_t *runs = json_array();
  for (int i = 0; i < r->nruns && i < TUN_MAX_RUNS; i++) json_array_append_new(runs, json_real(r->run_secs[i]));
  json_object_set_new(o, "run_secs", runs);
  json_object_set_new(o, "build_secs", json_real(r->build_secs));
  json_object_set_new(o, "error", str_or_null(r->error));
  json_object_set_new(o, "verified", json_boolean(r->verified));
  json_object_set_new(o, "time", json_real(r->time));
  json_object_set_new(o, "version", str_or_null(r->version));
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->trace_hash);
  json_object_set_new(o, "trace_hash", json_string(hex));
  if (r->graph_opts && r->graph_opts[0]) /* only where it is not the defaults: old logs read the same */
    json_object_set_new(o, "graph_opts", json_string(r->graph_opts));
  if (r->threads > 0) /* 0 (unknown) is written as an older tessel wrote it: no field */
    json_object_set_new(o, "threads", json_integer(r->threads));
  if (r->kind) { /* schema 2: a library record, its call's parameters in place of a trace */
    json_object_set_new(o, "kind", json_string(r->kind));
    json_error_t e;
    json_t *pv = r->params ? json_loads(r->params, 0, &e) : NULL;
    json_object_set_new(o, "params", pv ? pv : json_null());
  }
  if (r->runoff > 0) /* a run-off's re-timing (tuner/runoff.h); absent on a trial */
    json_object_set_new(o, "runoff", json_integer(r->runoff));
  char *js = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!js) return NULL;
  char *out = ts_strdup(js); /* jansson allocates with malloc; we hand out ts_ heap */
  free(js);
  return out;
}

static bool is_hex16(const char *s) {
  if (strlen(s) != 16) return false;
  for (int i = 0; i < 16; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
      return false;
  return true;
}

/* Fetches a string field: required (must be a string) or nullable. */
static ts_status get_str(json_t *o, const char *k, bool nullable, char **out, ts_diag *d) {
  json_t *v = json_object_get(o, k);
  *out = NULL;
  if (nullable && (!v || json_is_null(v))) return TS_OK;
  if (!json_is_string(v)) return ts_diag_set(d, TS_EPARSE, "field \"%s\" %s", k, v ? "is not a string" : "missing");
  *out = ts_strdup(json_string_value(v));
  return *out ? TS_OK : ts_diag_set(d, TS_ENOMEM, "out of memory");
}

/* A number field that must be finite and at least 0. */
static ts_status get_num(json_t *o, const char *k, double *out, ts_diag *d) {
  json_t *v = json_object_get(o, k);
  if (!json_is_number(v)) return ts_diag_set(d, TS_EPARSE, "field \"%s\" %s", k, v ? "is not a number" : "missing");
  *out = json_number_value(v);
  if (!isfinite(*out) || *out < 0)
    return ts_diag_set(d, TS_EPARSE, "field \"%s\" is %g (a finite number >= 0 expected)", k, *out);
  return TS_OK;
}

static ts_status record_from_obj(json_t *o, tun_record *r, ts_diag *d) {
  memset(r, 0, sizeof *r);
  if (!json_is_object(o)) return ts_diag_set(d, TS_EPARSE, "not a JSON object");
  json_t *sv = json_object_get(o, "schema");
  if (!json_is_integer(sv)) return ts_diag_set(d, TS_EPARSE, "field \"schema\" missing or not an integer");
  json_int_t schema = json_integer_value(sv);
  if (schema < 0) return ts_diag_set(d, TS_EPARSE, "bad schema version %lld", (long long)schema);
  if (schema > TUN_LOG_SCHEMA)
    return ts_diag_set(d, TS_EUNSUPPORTED, "schema %lld is newer than this tessel reads (%d)", (long long)schema,
                       TUN_LOG_SCHEMA);
  r->schema = (int)schema;
  json_t *kv = json_object_get(o, "workload_key");
  if (!json_is_string(kv) || !is_hex16(json_string_value(kv)))
    return ts_diag_set(d, TS_EPARSE, "field \"workload_key\" missing or not 16 hex digits");
  memcpy(r->workload_key, json_string_value(kv), 17);
  ts_status st;
  if ((st = get_str(o, "workload", false, &r->workload, d)) || (st = get_str(o, "target", false, &r->target, d)) ||
      (st = get_str(o, "error", true, &r->error, d)) || (st = get_str(o, "version", false, &r->version, d)))
    goto fail;
  if (!r->target[0] || !r->workload[0]) {
    st = ts_diag_set(d, TS_EPARSE, "field \"%s\" is empty", r->target[0] ? "workload" : "target");
    goto fail;
  }
  /* The trace is what a record's kernel is rebuilt from: a JSON array; null
   * only on an error record (nothing to rebuild). */
  json_t *tr = json_object_get(o, "trace");
  if (!tr) {
    st = ts_diag_set(d, TS_EPARSE, "field \"trace\" missing");
    goto fail;
  }
  /* schema 2: a library record (kind "library", an object of parameters)
   * has no trace: its kernel is rebuilt from the parameters */
  json_t *kv2 = r->schema >= 2 ? json_object_get(o, "kind") : NULL;
  if (kv2) {
    if (!json_is_string(kv2) || strcmp(json_string_value(kv2), TUN_KIND_LIBRARY)) {
      st = ts_diag_set(d, TS_EUNSUPPORTED, "record kind %s is unknown to this tessel (it reads \"%s\")",
                       json_is_string(kv2) ? json_string_value(kv2) : "(not a string)", TUN_KIND_LIBRARY);
      goto fail;
    }
    json_t *pv = json_object_get(o, "params");
    if (!json_is_object(pv) || !json_is_null(tr)) {
      st = ts_diag_set(d, TS_EPARSE, "a library record needs an object \"params\" and a null \"trace\"");
      goto fail;
    }
    char *js = json_dumps(pv, JSON_COMPACT | JSON_SORT_KEYS);
    r->params = js ? ts_strdup(js) : NULL;
    free(js);
    r->kind = ts_strdup(TUN_KIND_LIBRARY);
    if (!r->params || !r->kind) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      goto fail;
    }
  }
  if (json_is_null(tr) ? !r->error && !r->kind : !json_is_array(tr)) {
    static const char *const types[] = {"an object", "an array", "a string", "a number", "a number", "true", "false", "null"};
    int ty = (int)json_typeof(tr);
    st = ts_diag_set(d, TS_EPARSE, "field \"trace\" is %s, not a JSON array%s",
                     ty >= 0 && ty < 8 ? types[ty] : "not a JSON value", json_is_null(tr) ? " (only an error record may have no trace)" : "");
    goto fail;
  }
  if (!json_is_null(tr)) {
    char *js = json_dumps(tr, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    r->trace = js ? ts_strdup(js) : NULL;
    free(js);
  }
  if (!json_is_null(tr) && !r->trace) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto fail;
  }
  json_t *runs = json_object_get(o, "run_secs");
  if (!json_is_array(runs)) {
    st = ts_diag_set(d, TS_EPARSE, "field \"run_secs\" missing or not an array");
    goto fail;
  }
  if (json_array_size(runs) > TUN_MAX_RUNS) {
    st = ts_diag_set(d, TS_EPARSE, "%zu runs (at most %d)", json_array_size(runs), TUN_MAX_RUNS);
    goto fail;
  }
  for (size_t i = 0; i < json_array_size(runs); i++) {
    json_t *x = json_array_get(runs, i);
    if (!json_is_number(x)) {
      st = ts_diag_set(d, TS_EPARSE, "run_secs[%zu] is not a number", i);
      goto fail;
    }
    double v = json_number_value(x);
    if (!isfinite(v) || v <= 0) { /* a time of 0 or less would become a best no kernel can beat */
      st = ts_diag_set(d, TS_EPARSE, "run_secs[%zu] is %g (a positive finite number of seconds expected)", i, v);
      goto fail;
    }
    r->run_secs[r->nruns++] = json_number_value(x);
  }
  if ((st = get_num(o, "build_secs", &r->build_secs, d)) || (st = get_num(o, "time", &r->time, d))) goto fail;
  if (r->schema >= 1) {
    json_t *v = json_object_get(o, "verified");
    if (!json_is_boolean(v)) {
      st = ts_diag_set(d, TS_EPARSE, "field \"verified\" missing or not a boolean");
      goto fail;
    }
    r->verified = json_is_true(v);
    json_t *h = json_object_get(o, "trace_hash");
    if (!json_is_string(h) || !is_hex16(json_string_value(h))) {
      st = ts_diag_set(d, TS_EPARSE, "field \"trace_hash\" missing or not 16 hex digits");
      goto fail;
    }
    r->trace_hash = strtoull(json_string_value(h), NULL, 16);
  } else {
    /* Schema 0 predates verification and trace hashes: such a record counts
     * as a trial but nothing vouches for its output, so it is never best. */
    r->verified = false;
    r->trace_hash = 0;
  }
  json_t *go = json_object_get(o, "graph_opts"); /* optional: absent means the defaults */
  if (go && (st = get_str(o, "graph_opts", false, &r->graph_opts, d))) goto fail;
  json_t *th = json_object_get(o, "threads"); /* optional: absent means unknown (0) */
  if (th && (!json_is_integer(th) || json_integer_value(th) < 1 || json_integer_value(th) > TUN_MAX_THREADS)) {
    st = ts_diag_set(d, TS_EPARSE, "field \"threads\" is not an integer in 1..%d", TUN_MAX_THREADS);
    goto fail;
  }
  r->threads = th ? (int)json_integer_value(th) : 0;
  json_t *ro = json_object_get(o, "runoff"); /* optional: absent means a trial (0) */
  if (ro && (!json_is_integer(ro) || json_integer_value(ro) < 1 || json_integer_value(ro) > INT_MAX)) {
    st = ts_diag_set(d, TS_EPARSE, "field \"runoff\" is not a positive integer (a run-off's number)");
    goto fail;
  }
  r->runoff = ro ? (int)json_integer_value(ro) : 0;
  return TS_OK;
fail:
  tun_record_fini(r);
  return st;
}

ts_status tun_record_from_json(const char *line, tun_record *out, ts_diag *d) {
  json_error_t e;
  json_t *o = json_loads(line, 0, &e);
  if (!o) {
    memset(out, 0, sizeof *out);
    return ts_diag_set(d, TS_EPARSE, "bad JSON at column %d: %s", e.column, e.text);
  }
  ts_status st = record_from_obj(o, out, d);
  json_decref(o);
  return st;
}

/* ---- the index ---------------------------------------------------------------- */

/* An open-addressed set of nonzero 64-bit hashes (0 = empty). */
typedef struct hset {
  uint64_t *s;
  int n, cap;
} hset;

typedef struct group {
  char *key, *target;
  uint64_t h;
  int *idx;        /* record indices, in log order */
  int n, cap;
  int best;        /* record index or -1 (rank_before: the latest run-off's fastest, else the fastest trial) */
  int *ro;         /* the run-off records' indices, in log order (not in idx: no trials) */
  int nro, capro;
  hset traces;     /* structural hashes of the scheduled functions (has_trace) */
  hset texts;      /* XXH3 of the trace texts: a record repeating one is a duplicate */
  hset thr_traces; /* the trace hashes mixed with their thread counts (has_trace_at) */
} group;

struct tun_db {
  char *path;
  int fd; /* -1 when read-only */
  int lock; /* index into held_locks, -1 when none */
  long nduplicates; /* lines skipped on load as duplicates of an earlier record */
  tun_record **recs;
  int n, cap;
  group **slots; /* open addressing, power-of-two capacity */
  int nslots, ngroups;
};

/* XXH3 of the target, seeded with XXH3 of the key: no allocation, and the
 * pair (key, target) cannot alias another split of the same bytes. */
static uint64_t group_hash(const char *key, const char *target) {
  return XXH3_64bits_withSeed(target, strlen(target), XXH3_64bits(key, strlen(key)));
}

static group *find_group(const tun_db *db, const char *key, const char *target) {
  if (!db->nslots || !key || !target) return NULL;
  uint64_t h = group_hash(key, target);
  for (int i = (int)(h & (uint64_t)(db->nslots - 1));; i = (i + 1) & (db->nslots - 1)) {
    group *g = db->slots[i];
    if (!g) return NULL;
    if (g->h == h && !strcmp(g->key, key) && !strcmp(g->target, target)) return g;
  }
}

static void put_slot(group **slots, int nslots, group *g) {
  int i = (int)(g->h & (uint64_t)(nslots - 1));
  while (slots[i]) i = (i + 1) & (nslots - 1);
  slots[i] = g;
}

static group *get_group(tun_db *db, const char *key, const char *target) {
  group *g = find_group(db, key, target);
  if (g) return g;
  if (2 * (db->ngroups + 1) > db->nslots) {
    int ns = db->nslots ? db->nslots * 2 : 16;
    group **s = ts_calloc((size_t)ns, sizeof *s);
    if (!s) return NULL;
    for (int i = 0; i < db->nslots; i++)
      if (db->slots[i]) put_slot(s, ns, db->slots[i]);
    ts_free(db->slots);
    db->slots = s;
    db->nslots = ns;
  }
  g = ts_calloc(1, sizeof *g);
  if (!g) return NULL;
  g->key = ts_strdup(key);
  g->target = ts_strdup(target);
  if (!g->key || !g->target) {
    ts_free(g->key);
    ts_free(g->target);
    ts_free(g);
    return NULL;
  }
  g->h = group_hash(key, target);
  g->best = -1;
  put_slot(db->slots, db->nslots, g);
  db->ngroups++;
  return g;
}

static bool hset_has(const hset *h, uint64_t x) {
  if (!h->cap || !x) return false;
  for (int i = (int)(x & (uint64_t)(h->cap - 1));; i = (i + 1) & (h->cap - 1)) {
    if (h->s[i] == x) return true;
    if (!h->s[i]) return false;
  }
}

static bool hset_add(hset *h, uint64_t x) {
  if (!x || hset_has(h, x)) return true;
  if (2 * (h->n + 1) > h->cap) {
    int nc = h->cap ? h->cap * 2 : 16;
    uint64_t *s = ts_calloc((size_t)nc, sizeof *s);
    if (!s) return false;
    for (int i = 0; i < h->cap; i++) {
      uint64_t y = h->s[i];
      if (!y) continue;
      int j = (int)(y & (uint64_t)(nc - 1));
      while (s[j]) j = (j + 1) & (nc - 1);
      s[j] = y;
    }
    ts_free(h->s);
    h->s = s;
    h->cap = nc;
  }
  int j = (int)(x & (uint64_t)(h->cap - 1));
  while (h->s[j]) j = (j + 1) & (h->cap - 1);
  h->s[j] = x;
  h->n++;
  return true;
}

/* A trace hash at a thread count: the hash itself for an unknown count (0),
 * so the keys of records without a count are what they were before records
 * carried one; else mixed with the count, never 0 for a nonzero hash. */
static uint64_t thread_hash(uint64_t h, int threads) {
  if (!h || threads <= 0) return h;
  uint64_t x = XXH3_64bits_withSeed(&h, sizeof h, (uint64_t)threads);
  return x ? x : 1;
}

/* The duplicate key of a record in its group: XXH3 of its trace text (as
 * loading normalises it; a library record's parameters) seeded with its
 * trace hash at its thread count, never 0; 0 for a record with neither
 * (never a duplicate). The same trace measured at another thread count is
 * another measurement. */
static uint64_t text_hash(const tun_record *r) {
  const char *t = r->trace ? r->trace : r->params;
  if (!t) return 0;
  uint64_t h = XXH3_64bits_withSeed(t, strlen(t), thread_hash(r->trace_hash, r->threads));
  if (r->runoff > 0) /* a re-timing is no duplicate of its trial, only of a copy of itself */
    h = XXH3_64bits_withSeed(&h, sizeof h, (uint64_t)r->runoff);
  return h ? h : 1;
}

static bool usable(const tun_record *r) { return !r->error && r->verified && r->nruns > 0 && tun_record_mean(r) > 0; }

/* The best-of order: a later run-off's records before an earlier one's,
 * run-off records before trials (run-off 0), then the lower time. */
static bool rank_before(const tun_record *a, const tun_record *b) {
  if (a->runoff != b->runoff) return a->runoff > b->runoff;
  return tun_record_mean(a) < tun_record_mean(b);
}

static bool grow_ints(int **v, int *cap, int need) {
  if (need <= *cap) return true;
  int nc = *cap ? *cap * 2 : 16;
  int *p = ts_realloc(*v, sizeof *p * (size_t)nc);
  if (!p) return false;
  *v = p;
  *cap = nc;
  return true;
}

/* True if the log already holds a record of r's workload and target with
 * r's trace. */
static bool is_duplicate(const tun_db *db, const tun_record *r) {
  const group *g = find_group(db, r->workload_key, r->target);
  return g && hset_has(&g->texts, text_hash(r));
}

/* Takes ownership of r (heap) on success. */
static ts_status add_record(tun_db *db, tun_record *r, ts_diag *d) {
  if (db->n == db->cap) {
    int nc = db->cap ? db->cap * 2 : 64;
    tun_record **p = ts_realloc(db->recs, sizeof *p * (size_t)nc);
    if (!p) return ts_diag_set(d, TS_ENOMEM, "out of memory growing the log index");
    db->recs = p;
    db->cap = nc;
  }
  group *g = get_group(db, r->workload_key, r->target ? r->target : "");
  if (!g) return ts_diag_set(d, TS_ENOMEM, "out of memory growing the log index");
  bool ro = r->runoff > 0; /* a run-off's re-timing: kept apart from the trials */
  if (!(ro ? grow_ints(&g->ro, &g->capro, g->nro + 1) : grow_ints(&g->idx, &g->cap, g->n + 1)))
    return ts_diag_set(d, TS_ENOMEM, "out of memory growing the log index");
  if (!hset_add(&g->texts, text_hash(r)) ||
      (!ro && (!hset_add(&g->traces, r->trace_hash) ||
               !hset_add(&g->thr_traces, thread_hash(r->trace_hash, r->threads)))))
    return ts_diag_set(d, TS_ENOMEM, "out of memory growing the log index");
  int i = db->n++;
  db->recs[i] = r;
  if (ro)
    g->ro[g->nro++] = i;
  else
    g->idx[g->n++] = i;
  if (usable(r) && (g->best < 0 || rank_before(r, db->recs[g->best]))) g->best = i;
  return TS_OK;
}

/* ---- open / load ------------------------------------------------------------ */

static void db_free(tun_db *db) {
  if (!db) return;
  for (int i = 0; i < db->n; i++) {
    tun_record_fini(db->recs[i]);
    ts_free(db->recs[i]);
  }
  ts_free(db->recs);
  for (int i = 0; i < db->nslots; i++) {
    group *g = db->slots[i];
    if (!g) continue;
    ts_free(g->key);
    ts_free(g->target);
    ts_free(g->idx);
    ts_free(g->ro);
    ts_free(g->traces.s);
    ts_free(g->texts.s);
    ts_free(g->thr_traces.s);
    ts_free(g);
  }
  ts_free(db->slots);
  ts_free(db->path);
  ts_free(db);
}

static void warn(FILE *w, int *nwarn, const char *path, long line, const char *why) {
  if (nwarn) (*nwarn)++;
  if (w) fprintf(w, "%s:%ld: skipped: %s\n", path, line, why);
}

/* What loading says about a last line without its '\n': an append that did
 * not finish (its writer was killed, or the disk filled up mid-write). */
static void warn_incomplete(FILE *w, int *nwarn, const char *path, long line, size_t len) {
  char why[160];
  snprintf(why, sizeof why, "incomplete last line (%zu bytes without the closing newline: an append that did not finish)",
           len);
  warn(w, nwarn, path, line, why);
}

/* Reads every line of fd into db. *ends_nl says whether the file ended in
 * a newline (or was empty), so the appender can terminate a torn tail. */
static ts_status load_lines(tun_db *db, int fd, FILE *w, int *nwarn, bool *ends_nl, ts_diag *d) {
  ts_line_reader lr;
  ts_lines_init(&lr, fd, db->path, TS_LOG_LINE_CAP);
  *ends_nl = true;
  ts_status st = TS_OK;
  long ndup = 0, first_dup = 0;
  for (;;) {
    char *line;
    size_t len;
    bool complete;
    ts_diag ld;
    ts_diag_clear(&ld);
    if ((st = ts_lines_next(&lr, &line, &len, &complete, &ld))) {
      ts_diag_set(d, st, "%s%s", ld.msg, st == TS_ETOOBIG ? " (not a tuning log: a record is a few KiB)" : "");
      break;
    }
    if (!line) break;
    long lineno = lr.lineno;
    *ends_nl = complete;
    if (len > 0 && line[len - 1] == '\r') line[--len] = 0;
    bool blank = true;
    for (size_t i = 0; i < len && blank; i++) blank = line[i] == ' ' || line[i] == '\t';
    if (!complete && !(blank && len == 0)) {
      warn_incomplete(w, nwarn, db->path, lineno, len);
      continue;
    }
    if (blank) continue;
    if (len != strlen(line)) {
      warn(w, nwarn, db->path, lineno, "NUL byte in line");
      continue;
    }
    tun_record *r = ts_malloc(sizeof *r);
    if (!r) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory loading %s", db->path);
      break;
    }
    ts_diag rd;
    ts_diag_clear(&rd);
    ts_status rs = tun_record_from_json(line, r, &rd);
    if (rs == TS_ENOMEM) {
      ts_free(r);
      st = ts_diag_set(d, TS_ENOMEM, "out of memory loading %s", db->path);
      break;
    }
    if (rs) {
      ts_free(r);
      warn(w, nwarn, db->path, lineno, rd.msg);
      continue;
    }
    if (is_duplicate(db, r)) { /* the same workload, target and trace again: counted once */
      if (!ndup++) first_dup = lineno;
      tun_record_fini(r);
      ts_free(r);
      continue;
    }
    if ((st = add_record(db, r, d))) {
      tun_record_fini(r);
      ts_free(r);
      break;
    }
  }
  ts_lines_fini(&lr);
  db->nduplicates = ndup;
  if (!st && ndup && w)
    fprintf(w, "%s: %ld duplicate record%s (the workload, target and trace of an earlier record; first at line %ld) "
               "counted once\n",
            db->path, ndup, ndup == 1 ? "" : "s", first_dup);
  return st;
}

static tun_db *db_new(const char *path, ts_diag *d) {
  tun_db *db = ts_calloc(1, sizeof *db);
  if (!db || !(db->path = ts_strdup(path))) {
    ts_free(db);
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    return NULL;
  }
  db->fd = -1;
  db->lock = -1;
  return db;
}

tun_db *tun_db_load(const char *path, FILE *warn_out, int *nwarn, ts_diag *d) {
  if (nwarn) *nwarn = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ts_diag_set(d, errno == ENOENT ? TS_ENOTFOUND : TS_EIO, "cannot read log %s: %s", path, strerror(errno));
    return NULL;
  }
  tun_db *db = db_new(path, d);
  bool ends_nl;
  if (db && load_lines(db, fd, warn_out, nwarn, &ends_nl, d)) {
    db_free(db);
    db = NULL;
  }
  close(fd);
  return db;
}

static ts_status write_all(int fd, const char *s, size_t n, const char *path, ts_diag *d) {
  while (n > 0) {
    ssize_t k = write(fd, s, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return ts_diag_set(d, TS_EIO, "writing %s: %s", path, strerror(errno));
    }
    s += k;
    n -= (size_t)k;
  }
  return TS_OK;
}

/* ---- the appender's lock -------------------------------------------------------
 * One tuner appends to a log at a time: tun_db_open takes an exclusive
 * flock(2) on the log and refuses a log another process holds. Within one
 * process a log may be open several times (tune-model keeps it open while
 * each round's tun_tune opens it again): the lock is taken once per file and
 * held, on a descriptor of its own (a separate open of the file, so that the
 * log's append descriptor does not carry it), until the last of them closes.
 * A forked child (builder, measurer) closes its copies at once: otherwise a
 * child outliving a killed tuner would keep the log locked. */
typedef struct held_lock {
  dev_t dev;
  ino_t ino;
  int fd, refs;
  pid_t pid; /* a forked child inherits the table, not the right to share: it locks anew */
} held_lock;
static held_lock held_locks[32];

static void locks_after_fork_child(void) {
  for (int i = 0; i < (int)(sizeof held_locks / sizeof held_locks[0]); i++)
    if (held_locks[i].refs) close(held_locks[i].fd); /* the parent's descriptor keeps the lock */
  memset(held_locks, 0, sizeof held_locks);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { (void)pthread_atfork(NULL, NULL, locks_after_fork_child); }

static ts_status lock_log(tun_db *db, int fd, FILE *warn_out, ts_diag *d) {
  struct stat sb;
  db->lock = -1;
  if (fstat(fd, &sb) != 0) return ts_diag_set(d, TS_EIO, "cannot stat log %s: %s", db->path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return TS_OK; /* a device or a pipe: nothing to share */
  int free_slot = -1;
  for (int i = 0; i < (int)(sizeof held_locks / sizeof held_locks[0]); i++) {
    held_lock *h = &held_locks[i];
    if (h->refs && h->pid != getpid()) *h = (held_lock){0}; /* the parent's, inherited by fork */
    if (h->refs && h->dev == sb.st_dev && h->ino == sb.st_ino) {
      h->refs++;
      db->lock = i;
      return TS_OK;
    }
    if (!h->refs && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) return ts_diag_set(d, TS_EINVAL, "log %s: too many logs open for appending at once", db->path);
  pthread_once(&atfork_once, register_atfork);
  int lfd = open(db->path, O_RDONLY | O_CLOEXEC);
  if (lfd < 0) return ts_diag_set(d, TS_EIO, "log %s: %s", db->path, strerror(errno));
  int rc;
  do rc = flock(lfd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int e = errno;
    close(lfd);
    if (e == EWOULDBLOCK)
      return ts_diag_set(d, TS_EPENDING,
                         "log %s is in use: another tuner is appending to it (it holds the log's lock); wait for it "
                         "to finish, or tune into another log",
                         db->path);
    /* a file system without flock (some network mounts): append unlocked, saying so */
    if (warn_out) fprintf(warn_out, "%s: cannot take the append lock (%s); appending without it\n", db->path, strerror(e));
    return TS_OK;
  }
  held_locks[free_slot] = (held_lock){sb.st_dev, sb.st_ino, lfd, 1, getpid()};
  db->lock = free_slot;
  return TS_OK;
}

static void unlock_log(tun_db *db) {
  if (db->lock < 0) return;
  held_lock *h = &held_locks[db->lock];
  if (--h->refs == 0) close(h->fd); /* closing the last descriptor drops the flock */
  db->lock = -1;
}

tun_db *tun_db_open(const char *path, FILE *warn_out, int *nwarn, ts_diag *d) {
  if (nwarn) *nwarn = 0;
  int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    ts_diag_set(d, TS_EIO, "cannot open log %s for appending: %s", path, strerror(errno));
    return NULL;
  }
  tun_db *db = db_new(path, d);
  if (!db) {
    close(fd);
    return NULL;
  }
  ts_status st = lock_log(db, fd, warn_out, d);
  struct stat sb;
  if (!st && fstat(fd, &sb) != 0) st = ts_diag_set(d, TS_EIO, "cannot stat log %s: %s", path, strerror(errno));
  /* A log that is not a regular file (/dev/null, /dev/full, a pipe) is only
   * written to: reading it back would read the device, not records. */
  bool ends_nl = true;
  if (!st && S_ISREG(sb.st_mode)) {
    int rfd = open(path, O_RDONLY | O_CLOEXEC);
    if (rfd < 0) st = ts_diag_set(d, TS_EIO, "cannot read log %s: %s", path, strerror(errno));
    else {
      st = load_lines(db, rfd, warn_out, nwarn, &ends_nl, d);
      close(rfd);
    }
  }
  /* A torn last line (an append that did not finish) is terminated, never
   * rewritten: the log stays append-only and the next record starts on a
   * line of its own. */
  if (st == TS_OK && !ends_nl) st = write_all(fd, "\n", 1, path, d);
  if (st) {
    close(fd);
    unlock_log(db);
    db_free(db);
    return NULL;
  }
  db->fd = fd;
  return db;
}

void tun_db_close(tun_db *db) {
  if (!db) return;
  if (db->fd >= 0) close(db->fd);
  unlock_log(db);
  db_free(db);
}

long tun_db_duplicates(const tun_db *db) { return db ? db->nduplicates : 0; }

ts_status tun_db_append(tun_db *db, const tun_record *r, ts_diag *d) {
  if (!db || !r) return ts_diag_set(d, TS_EINVAL, "tun_db_append: no log or record");
  if (db->fd < 0) return ts_diag_set(d, TS_EINVAL, "log %s was loaded read-only", db->path);
  if (!is_hex16(r->workload_key) || !r->target || !r->workload)
    return ts_diag_set(d, TS_EINVAL, "record needs a 16-hex-digit workload key, a workload and a target");
  if (r->nruns < 0 || r->nruns > TUN_MAX_RUNS)
    return ts_diag_set(d, TS_EINVAL, "record has %d runs (0..%d)", r->nruns, TUN_MAX_RUNS);
  char *js = tun_record_to_json(r); /* written as the current schema */
  size_t n = js ? strlen(js) : 0;
  char *line = js ? ts_realloc(js, n + 2) : NULL;
  if (!line) {
    ts_free(js);
    return ts_diag_set(d, TS_ENOMEM, "out of memory serialising a record");
  }
  /* What is kept in memory is the line read back, so a record is validated
   * as loading validates it and reads the same before and after a reload. */
  tun_record *c = ts_malloc(sizeof *c);
  ts_diag rd;
  ts_diag_clear(&rd);
  ts_status st = c ? tun_record_from_json(line, c, &rd) : TS_ENOMEM;
  if (st) {
    ts_free(line);
    ts_free(c);
    return st == TS_ENOMEM ? ts_diag_set(d, TS_ENOMEM, "out of memory")
                           : ts_diag_set(d, TS_EINVAL, "not appending an invalid record to %s: %s", db->path, rd.msg);
  }
  if (is_duplicate(db, c)) { /* counted once: nothing to write */
    ts_free(line);
    tun_record_fini(c);
    ts_free(c);
    return TS_OK;
  }
  line[n] = '\n';
  line[n + 1] = 0;
  /* One write on an O_APPEND descriptor (no stdio buffer to flush), then
   * fsync: once this returns, the record survives a crash of the process. A
   * write that fails part-way (a full disk) is cut back off when it can be,
   * so the log keeps whole lines. */
  struct stat sb;
  bool regular = fstat(db->fd, &sb) == 0 && S_ISREG(sb.st_mode);
  st = write_all(db->fd, line, n + 1, db->path, d);
  if (st && regular && ftruncate(db->fd, sb.st_size) != 0) {
    /* the partial line stays: loading reports it as an incomplete line */
  }
  ts_free(line);
  if (st == TS_OK && fsync(db->fd) != 0 && errno != EINVAL && errno != EROFS)
    st = ts_diag_set(d, TS_EIO, "fsync %s: %s", db->path, strerror(errno));
  if (st == TS_OK) st = add_record(db, c, d);
  if (st) {
    tun_record_fini(c);
    ts_free(c);
  }
  return st;
}

/* ---- queries ------------------------------------------------------------------ */

int tun_db_count(const tun_db *db) { return db ? db->n : 0; }

const tun_record *tun_db_get(const tun_db *db, int i) {
  return db && i >= 0 && i < db->n ? db->recs[i] : NULL;
}

int tun_db_count_for(const tun_db *db, const char *workload_key, const char *target) {
  if (!db) return 0;
  if (workload_key && target) {
    const group *g = find_group(db, workload_key, target);
    return g ? g->n : 0;
  }
  int c = 0;
  for (int i = 0; i < db->n; i++) {
    const tun_record *r = db->recs[i];
    if (r->runoff > 0) continue; /* a re-timing, no trial */
    if ((!workload_key || !strcmp(r->workload_key, workload_key)) && (!target || !strcmp(r->target, target))) c++;
  }
  return c;
}

const tun_record *tun_db_best(const tun_db *db, const char *workload_key, const char *target) {
  if (!db) return NULL;
  if (workload_key && target) {
    const group *g = find_group(db, workload_key, target);
    return g && g->best >= 0 ? db->recs[g->best] : NULL;
  }
  const tun_record *best = NULL;
  for (int i = 0; i < db->nslots; i++) {
    const group *g = db->slots[i];
    if (!g || g->best < 0) continue;
    if ((workload_key && strcmp(g->key, workload_key)) || (target && strcmp(g->target, target))) continue;
    const tun_record *r = db->recs[g->best];
    if (!best || rank_before(r, best)) best = r;
  }
  return best;
}

static int cmp_rank(const void *a, const void *b) {
  const tun_record *x = *(const tun_record *const *)a, *y = *(const tun_record *const *)b;
  return rank_before(x, y) ? -1 : rank_before(y, x);
}

const tun_record **tun_db_ranked(const tun_db *db, const char *workload_key, const char *target, int *n) {
  *n = 0;
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  if (!g) return NULL;
  const tun_record **out = ts_malloc(sizeof *out * (size_t)(g->n + g->nro ? g->n + g->nro : 1));
  if (!out) return NULL;
  for (int i = 0; i < g->n + g->nro; i++) {
    const tun_record *r = db->recs[i < g->n ? g->idx[i] : g->ro[i - g->n]];
    if (usable(r)) out[(*n)++] = r;
  }
  qsort(out, (size_t)*n, sizeof *out, cmp_rank); /* ties keep no particular order: the means differ in practice */
  return out;
}

bool tun_db_has_trace(const tun_db *db, const char *workload_key, const char *target, uint64_t trace_hash) {
  if (!db) return false;
  const group *g = find_group(db, workload_key, target);
  return g && hset_has(&g->traces, trace_hash);
}

static bool at_threads(const tun_record *r, int threads) { return threads == TUN_ANY_THREADS || r->threads == threads; }

int tun_db_count_at(const tun_db *db, const char *workload_key, const char *target, int threads) {
  if (threads == TUN_ANY_THREADS) return tun_db_count_for(db, workload_key, target);
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  int c = 0;
  for (int i = 0; g && i < g->n; i++) c += at_threads(db->recs[g->idx[i]], threads);
  return c;
}

const tun_record *tun_db_best_at(const tun_db *db, const char *workload_key, const char *target, int threads) {
  if (threads == TUN_ANY_THREADS) return tun_db_best(db, workload_key, target);
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  const tun_record *best = NULL;
  for (int i = 0; g && i < g->n + g->nro; i++) {
    const tun_record *r = db->recs[i < g->n ? g->idx[i] : g->ro[i - g->n]];
    if (at_threads(r, threads) && usable(r) && (!best || rank_before(r, best))) best = r;
  }
  return best;
}

int tun_db_runoff_last(const tun_db *db, const char *workload_key, const char *target, int threads,
                       const tun_record **out, int max, int *n) {
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  int id = 0;
  *n = 0;
  for (int i = 0; g && i < g->nro; i++) {
    const tun_record *r = db->recs[g->ro[i]];
    if (!at_threads(r, threads) || r->runoff < id) continue;
    if (r->runoff > id) *n = 0;
    id = r->runoff;
    if (*n < max) out[(*n)++] = r;
  }
  return id;
}

int tun_db_runoff_next(const tun_db *db, const char *workload_key, const char *target) {
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  int id = 0;
  for (int i = 0; g && i < g->nro; i++)
    if (db->recs[g->ro[i]]->runoff > id) id = db->recs[g->ro[i]]->runoff;
  return id + 1;
}

const tun_record **tun_db_ranked_at(const tun_db *db, const char *workload_key, const char *target, int threads,
                                    int *n) {
  const tun_record **out = tun_db_ranked(db, workload_key, target, n);
  int k = 0;
  for (int i = 0; i < *n; i++) /* a filter keeps the order */
    if (at_threads(out[i], threads)) out[k++] = out[i];
  *n = k;
  return out;
}

bool tun_db_has_trace_at(const tun_db *db, const char *workload_key, const char *target, uint64_t trace_hash,
                         int threads) {
  if (threads == TUN_ANY_THREADS) return tun_db_has_trace(db, workload_key, target, trace_hash);
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  return g && hset_has(&g->thr_traces, thread_hash(trace_hash, threads));
}

const tun_record **tun_db_ranked_for_build(const tun_db *db, const char *workload_key, const char *target,
                                           int threads, int *n, bool *fallback) {
  const tun_record **rs = tun_db_ranked(db, workload_key, target, n);
  int k = 0;
  for (int i = 0; i < *n; i++)
    if (at_threads(rs[i], threads)) rs[k++] = rs[i];
  *fallback = k == 0 && *n > 0;
  if (*fallback) { /* none at this count: the whole ranking again */
    ts_free(rs);
    rs = tun_db_ranked(db, workload_key, target, n);
  } else {
    *n = k;
  }
  return rs;
}

int tun_db_groups(const tun_db *db, const tun_record **first, int max) {
  int k = 0;
  if (!db) return 0;
  /* In order of each group's first record, so listings follow the log. */
  for (int i = 0; i < db->n; i++) {
    const tun_record *r = db->recs[i];
    const group *g = find_group(db, r->workload_key, r->target);
    if (!g || (g->n ? g->idx[0] : g->ro[0]) != i) continue;
    if (k < max) first[k] = r;
    k++;
  }
  return k;
}

const int *tun_db_indices_for(const tun_db *db, const char *workload_key, const char *target, int *n) {
  const group *g = db ? find_group(db, workload_key, target) : NULL;
  *n = g ? g->n : 0;
  return g ? g->idx : NULL;
}

/* ---- selecting and plotting ------------------------------------------------------ */

bool tun_record_matches(const tun_record *r, const char *w) {
  if (!w) return true;
  if (!strcmp(r->workload_key, w) || (r->workload && !strcmp(r->workload, w))) return true;
  ir_wl_inst a, b;
  if (!r->workload || ir_wl_parse(w, &a, NULL) || ir_wl_parse(r->workload, &b, NULL)) return false;
  char ca[512], cb[512];
  ir_wl_canonical(&a, ca, sizeof ca);
  ir_wl_canonical(&b, cb, sizeof cb);
  return !strcmp(ca, cb);
}

double tun_record_flops(const tun_record *r) {
  ir_wl_inst w;
  if (!r->workload || ir_wl_parse(r->workload, &w, NULL)) return 0;
  return ir_wl_flops(&w);
}

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
    }
  }
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks. */
static double nice_step(double range, int n) {
  if (range <= 0) return 1;
  double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

typedef struct curve {
  double *y; /* best so far per trial index; < 0 before the first usable record */
  int n;
} curve;

ts_status tun_plot_svg(tun_db *const *dbs, const char *const *labels, int ndb, const char *workload, FILE *out,
                       ts_diag *d) {
  if (ndb < 1) return ts_diag_set(d, TS_EINVAL, "plot: no logs");
  curve *cv = ts_calloc((size_t)ndb, sizeof *cv);
  if (!cv) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  bool gflops = true;
  int xmax = 1;
  double ymax = 0;
  ts_status st = TS_OK;
  for (int k = 0; k < ndb; k++) {
    const tun_db *db = dbs[k];
    /* Without --workload, each log plots the workload+target of its first record. */
    const tun_record *first = NULL;
    for (int i = 0; i < db->n && !first; i++)
      if (tun_record_matches(db->recs[i], workload)) first = db->recs[i];
    if (!first) continue;
    if (tun_record_flops(first) <= 0) gflops = false;
    cv[k].y = ts_malloc(sizeof(double) * (size_t)db->n + 1);
    if (!cv[k].y) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
      goto done;
    }
  }
  for (int k = 0; k < ndb; k++) {
    const tun_db *db = dbs[k];
    if (!cv[k].y) continue;
    const tun_record *first = NULL;
    double best = -1;
    for (int i = 0; i < db->n; i++) {
      const tun_record *r = db->recs[i];
      if (!tun_record_matches(r, workload) || r->runoff > 0) continue; /* trials only: x is the trial index */
      if (!first) first = r;
      if (strcmp(r->workload_key, first->workload_key) || strcmp(r->target, first->target)) continue;
      if (usable(r)) {
        double m = tun_record_mean(r), fl = gflops ? tun_record_flops(r) : 0;
        double v = m > 0 ? (gflops ? fl / m * 1e-9 : 1 / m) : -1;
        if (v > best) best = v;
      }
      cv[k].y[cv[k].n++] = best;
    }
    if (cv[k].n > xmax) xmax = cv[k].n;
    if (best > ymax) ymax = best;
  }
  if (ymax <= 0) ymax = 1;
  {
    const double W = 860, H = 480, L = 80, R = 200, T = 40, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    double xstep = nice_step(xmax, 8), ystep = nice_step(ymax, 6);
    double xtop = ceil(xmax / xstep) * xstep, ytop = ceil(ymax * 1.05 / ystep) * ystep;
    if (xtop < 1) xtop = 1;
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"white\"/>\n",
            W, H, W, H, W, H);
    fprintf(out, "<text x=\"%g\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">tuning curve", L + pw / 2);
    if (workload) {
      fputs(": ", out);
      xml_text(out, workload);
    }
    fputs("</text>\n", out);
    /* grid, ticks and tick labels */
    fprintf(out, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for (double x = 0; x <= xtop + 1e-9; x += xstep)
      fprintf(out, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\"/>\n", L + x / xtop * pw, T, L + x / xtop * pw,
              T + ph);
    for (double y = 0; y <= ytop + 1e-12; y += ystep)
      fprintf(out, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\"/>\n", L, T + ph - y / ytop * ph, L + pw,
              T + ph - y / ytop * ph);
    fprintf(out, "</g>\n<g stroke=\"black\" stroke-width=\"1\">\n"
                 "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/>\n<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\"/>\n",
            L, T + ph, L + pw, T + ph, L, T, L, T + ph);
    for (double x = 0; x <= xtop + 1e-9; x += xstep)
      fprintf(out, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\"/>\n", L + x / xtop * pw, T + ph,
              L + x / xtop * pw, T + ph + 5);
    for (double y = 0; y <= ytop + 1e-12; y += ystep)
      fprintf(out, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\"/>\n", L - 5, T + ph - y / ytop * ph, L,
              T + ph - y / ytop * ph);
    fprintf(out, "</g>\n<g text-anchor=\"middle\">\n");
    for (double x = 0; x <= xtop + 1e-9; x += xstep)
      fprintf(out, "<text x=\"%.1f\" y=\"%g\">%g</text>\n", L + x / xtop * pw, T + ph + 18, x);
    fprintf(out, "</g>\n<g text-anchor=\"end\">\n");
    for (double y = 0; y <= ytop + 1e-12; y += ystep)
      fprintf(out, "<text x=\"%g\" y=\"%.1f\">%.4g</text>\n", L - 8, T + ph - y / ytop * ph + 4, y);
    fprintf(out, "</g>\n<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">trial</text>\n", L + pw / 2, H - 15);
    fprintf(out, "<text x=\"18\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 18 %g)\">%s</text>\n",
            T + ph / 2, T + ph / 2, gflops ? "best GFLOP/s so far" : "best 1/seconds so far");
    /* one polyline per log, then the legend */
    for (int k = 0; k < ndb; k++) {
      const char *col = colors[k % (int)(sizeof colors / sizeof colors[0])];
      fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
      bool any = false;
      for (int i = 0; i < cv[k].n; i++) {
        if (cv[k].y[i] < 0) continue;
        fprintf(out, "%s%.1f,%.1f", any ? " " : "", L + i / xtop * pw, T + ph - cv[k].y[i] / ytop * ph);
        any = true;
      }
      fprintf(out, "\"/>\n");
      double ly = T + 10 + 20 * k;
      fprintf(out, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>\n", L + pw + 15,
              ly, L + pw + 40, ly, col);
      fprintf(out, "<text x=\"%g\" y=\"%g\">", L + pw + 46, ly + 4);
      xml_text(out, labels && labels[k] ? labels[k] : "log");
      if (!cv[k].y) fputs(" (no records)", out);
      fputs("</text>\n", out);
    }
    fputs("</svg>\n", out);
  }
  if (ferror(out)) st = ts_diag_set(d, TS_EIO, "writing the SVG failed");
done:
  for (int k = 0; k < ndb; k++) ts_free(cv[k].y);
  ts_free(cv);
  return st;
}
