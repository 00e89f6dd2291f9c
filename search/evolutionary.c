/* search/evolutionary.c — MetaSchedule's evolutionary search
 * (src/s_tir/meta_schedule/search_strategy/evolutionary_search.cc): seeds from
 * measured and random candidates, generations of mutation ranked by the cost
 * model, batches of unmeasured candidates; replays on a thread pool whose
 * results do not depend on the thread count. docs/SEARCH.md. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ir/struct.h"
#include "search/search.h"

#define EMPTY_BATCH_LIMIT 5
#define CHILD_TRIES 11

void srch_evo_opts_default(srch_evo_opts *o) {
  o->population = 512;
  o->init_measured_ratio = 0.2;
  o->init_min_unmeasured = 50;
  o->genetic_iters = 4;
  o->mutate_prob = 0.85;
  o->eps_greedy = 0.05;
  o->num_threads = 0;
  o->first_batch = 0;
  o->no_replay_cache = false;
  o->space = (srch_space_opts){0};
  o->postproc = (srch_postproc_opts){0};
}

void srch_candidate_fini(srch_candidate *c) {
  if (!c) return;
  sch_trace_free(c->trace);
  c->trace = NULL;
}

/* ---- a hash set of structural hashes --------------------------------------------- */
typedef struct hset {
  uint64_t *slot; /* 0 = empty (hash 0 is mapped to 1) */
  size_t cap, n;
} hset;

static uint64_t hkey(uint64_t h) { return h ? h : 1; }

static bool hset_has(const hset *s, uint64_t h) {
  if (!s->cap) return false;
  h = hkey(h);
  for (size_t i = (size_t)(h * 0x9E3779B97F4A7C15ull) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (s->slot[i] == h) return true;
    if (!s->slot[i]) return false;
  }
}

static bool hset_add(hset *s, uint64_t h); /* true if newly added */

static bool hset_grow(hset *s) {
  size_t nc = s->cap ? s->cap * 2 : 1024;
  uint64_t *old = s->slot;
  size_t oc = s->cap;
  s->slot = ts_calloc(nc, sizeof(uint64_t));
  if (!s->slot) {
    s->slot = old;
    return false;
  }
  s->cap = nc;
  s->n = 0;
  for (size_t i = 0; i < oc; i++)
    if (old[i]) hset_add(s, old[i]);
  ts_free(old);
  return true;
}

static bool hset_add(hset *s, uint64_t h) {
  if ((s->n + 1) * 2 > s->cap && !hset_grow(s)) return false;
  h = hkey(h);
  for (size_t i = (size_t)(h * 0x9E3779B97F4A7C15ull) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (s->slot[i] == h) return false;
    if (!s->slot[i]) {
      s->slot[i] = h;
      s->n++;
      return true;
    }
  }
}

static bool hset_copy(hset *dst, const hset *src) {
  dst->cap = src->cap;
  dst->n = src->n;
  dst->slot = NULL;
  if (!src->cap) return true;
  dst->slot = ts_malloc(src->cap * sizeof(uint64_t));
  if (!dst->slot) return false;
  memcpy(dst->slot, src->slot, src->cap * sizeof(uint64_t));
  return true;
}

static void hset_fini(hset *s) {
  ts_free(s->slot);
  memset(s, 0, sizeof *s);
}

/* ---- candidates in flight ----------------------------------------------------------- */
typedef struct cand {
  sch_trace *full;   /* as recorded, postprocessing included */
  sch_trace *bare;   /* postprocessing stripped (mutated, replayed) */
  uint64_t hash;
  cm_features feat;
  double score;
  bool ok;
} cand;

static void cand_fini(cand *c) {
  sch_trace_free(c->full);
  sch_trace_free(c->bare);
  cm_features_fini(&c->feat);
  memset(c, 0, sizeof *c);
}

/* The replay cache: replaying a trace with its decisions (no resampling) is
 * deterministic, so its outcome (the recorded and bare traces, the scheduled
 * function's hash, the features, or the failure) is kept by the XXH64 of the
 * trace's JSON. Measured seeds are replayed at every batch and the
 * evolution re-creates many children (a mutation that lands on a decision
 * tried before); each hit saves the replay with its postprocessing, the
 * lowering and the feature extraction. Cleared when it holds
 * RCACHE_MAX entries. */
#define RCACHE_MAX 16384
typedef struct rcache_ent {
  uint64_t key;
  cand c; /* c.ok false: the replay failed */
} rcache_ent;

typedef struct measured_rec {
  sch_trace *bare;
  double mean;
} measured_rec;

struct srch_evo {
  const ir_func *f;
  cg_target t;
  srch_evo_opts o;
  uint64_t seed;
  sch_trace **sketches;
  int nsk;
  hset measured;
  measured_rec *db; /* valid measured records, sorted by mean */
  int ndb, capdb;
  int batches, empty;
  /* srch_evo_stats, in nanoseconds (updated atomically by the pool) */
  int64_t replay_ns, predict_ns;
  long replays, cache_hits;
  /* the replay cache: ents[0..nents), index = open addressing over keys */
  pthread_mutex_t rc_mu;
  rcache_ent *rc_ents;
  size_t rc_n;
  uint32_t *rc_idx; /* 0 empty, else entry + 1; 2 * RCACHE_MAX slots */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void srch_evo_get_stats(const srch_evo *e, srch_evo_stats *s) {
  memset(s, 0, sizeof *s);
  if (!e) return;
  s->replay_seconds = (double)__atomic_load_n(&e->replay_ns, __ATOMIC_RELAXED) * 1e-9;
  s->predict_seconds = (double)e->predict_ns * 1e-9;
  s->replays = __atomic_load_n(&e->replays, __ATOMIC_RELAXED);
  s->cache_hits = __atomic_load_n(&e->cache_hits, __ATOMIC_RELAXED);
}

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void copy_cand(const cand *src, cand *dst);

static uint64_t trace_key(const sch_trace *tr) {
  char *js = sch_trace_to_json(tr);
  if (!js) return 0;
  uint64_t k = XXH64(js, strlen(js), 0x7e55e1);
  ts_free(js);
  return k ? k : 1;
}

/* The cached outcome of key into c (a copy); false if not cached. */
static bool rc_get(srch_evo *e, uint64_t key, cand *c) {
  bool hit = false;
  pthread_mutex_lock(&e->rc_mu);
  if (e->rc_idx) {
    for (size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (2 * RCACHE_MAX - 1);;
         i = (i + 1) & (2 * RCACHE_MAX - 1)) {
      uint32_t x = e->rc_idx[i];
      if (!x) break;
      if (e->rc_ents[x - 1].key == key) {
        const cand *src = &e->rc_ents[x - 1].c;
        if (src->ok) {
          copy_cand(src, c);
          hit = c->ok; /* an allocation failure: replay instead */
        } else {
          memset(c, 0, sizeof *c);
          hit = true;
        }
        break;
      }
    }
  }
  pthread_mutex_unlock(&e->rc_mu);
  return hit;
}

static void rc_clear(srch_evo *e) {
  for (size_t i = 0; i < e->rc_n; i++) cand_fini(&e->rc_ents[i].c);
  e->rc_n = 0;
  if (e->rc_idx) memset(e->rc_idx, 0, 2 * RCACHE_MAX * sizeof *e->rc_idx);
}

static void rc_put(srch_evo *e, uint64_t key, const cand *c) {
  pthread_mutex_lock(&e->rc_mu);
  if (!e->rc_idx) {
    e->rc_idx = ts_calloc(2 * RCACHE_MAX, sizeof *e->rc_idx);
    e->rc_ents = ts_calloc(RCACHE_MAX, sizeof *e->rc_ents);
    if (!e->rc_idx || !e->rc_ents) {
      ts_free(e->rc_idx);
      ts_free(e->rc_ents);
      e->rc_idx = NULL;
      e->rc_ents = NULL;
    }
  }
  if (e->rc_idx) {
    if (e->rc_n >= RCACHE_MAX) rc_clear(e);
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (2 * RCACHE_MAX - 1);
    while (e->rc_idx[i] && e->rc_ents[e->rc_idx[i] - 1].key != key) i = (i + 1) & (2 * RCACHE_MAX - 1);
    if (!e->rc_idx[i]) {
      rcache_ent *en = &e->rc_ents[e->rc_n];
      memset(en, 0, sizeof *en);
      en->key = key;
      if (c->ok) copy_cand(c, &en->c);
      if (!c->ok || en->c.ok) e->rc_idx[i] = (uint32_t)(++e->rc_n);
    }
  }
  pthread_mutex_unlock(&e->rc_mu);
}

/* Replays tr (bare) on f and fills c; false if replay, a postprocessor or
 * feature extraction rejects it. With resample false the outcome comes from
 * the replay cache when it holds it. */
static bool make_cand(srch_evo *e, const sch_trace *tr, bool resample, uint64_t seed, cand *c) {
  memset(c, 0, sizeof *c);
  uint64_t key = resample || e->o.no_replay_cache ? 0 : trace_key(tr);
  if (key && rc_get(e, key, c)) {
    __atomic_add_fetch(&e->cache_hits, 1, __ATOMIC_RELAXED);
    return c->ok;
  }
  int64_t t0 = now_ns();
  __atomic_add_fetch(&e->replays, 1, __ATOMIC_RELAXED);
  ts_diag d;
  ts_diag_clear(&d);
  sch_traced *ts = srch_instantiate_opts(tr, e->f, &e->t, resample, seed, &e->o.postproc, &d);
  if (!ts) {
    __atomic_add_fetch(&e->replay_ns, now_ns() - t0, __ATOMIC_RELAXED);
    if (key) rc_put(e, key, c);
    return false;
  }
  bool ok = false;
  c->full = sch_trace_copy(sch_traced_trace(ts));
  if (c->full) c->bare = sch_trace_simplified(c->full, true);
  if (c->bare) {
    c->hash = ir_struct_hash_func(sch_traced_func(ts));
    ok = cm_extract(sch_traced_func(ts), &e->t, &c->feat, &d) == TS_OK;
  }
  sch_traced_free(ts);
  if (!ok) cand_fini(c);
  c->ok = ok;
  __atomic_add_fetch(&e->replay_ns, now_ns() - t0, __ATOMIC_RELAXED);
  if (key) rc_put(e, key, c);
  return ok;
}

/* ---- the worker pool ------------------------------------------------------------------ */
typedef struct job {
  void (*fn)(void *ctx, int i);
  void *ctx;
  int n;
  int next;
  pthread_mutex_t mu;
} job;

static void *worker(void *arg) {
  job *j = arg;
  for (;;) {
    pthread_mutex_lock(&j->mu);
    int i = j->next++;
    pthread_mutex_unlock(&j->mu);
    if (i >= j->n) return NULL;
    j->fn(j->ctx, i);
  }
}

static int pool_size(const srch_evo *e) {
  if (e->o.num_threads > 0) return e->o.num_threads;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static void run_parallel(const srch_evo *e, int n, void (*fn)(void *, int), void *ctx) {
  job j = {fn, ctx, n, 0, PTHREAD_MUTEX_INITIALIZER};
  int nt = pool_size(e);
  if (nt > n) nt = n;
  if (nt <= 1) {
    for (int i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  pthread_t th[64];
  if (nt > 64) nt = 64;
  int started = 0;
  for (int i = 0; i < nt - 1; i++)
    if (pthread_create(&th[started], NULL, worker, &j) == 0) started++;
  worker(&j);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  pthread_mutex_destroy(&j.mu);
}

/* ---- setup -------------------------------------------------------------------------------- */
srch_evo *srch_evo_new(const ir_func *f, const cg_target *t, const srch_evo_opts *o, uint64_t seed,
                       ts_diag *d) {
  srch_evo *e = ts_calloc(1, sizeof *e);
  if (!e) {
    ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
    return NULL;
  }
  e->f = f;
  e->t = *t;
  if (o)
    e->o = *o;
  else
    srch_evo_opts_default(&e->o);
  if (e->o.population < 2) e->o.population = 2;
  e->seed = seed;
  pthread_mutex_init(&e->rc_mu, NULL);
  srch_space_opts so = e->o.space;
  if (so.max_innermost <= 0) so.max_innermost = 64;
  sch_trace **sk = NULL;
  int nsk = 0;
  ts_status st = srch_sketches(f, t, &so, &sk, &nsk, d);
  /* Sketch traces simplified (dead instructions and postprocs removed). */
  if (!st && !(e->sketches = ts_calloc(nsk > 0 ? (size_t)nsk : 1, sizeof *e->sketches)))
    st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
  for (int i = 0; i < nsk; i++) {
    if (!st && (e->sketches[e->nsk] = sch_trace_simplified(sk[i], true))) e->nsk++;
    sch_trace_free(sk[i]);
  }
  ts_free(sk);
  if (!st && !e->nsk) st = ts_diag_set(d, TS_EINVAL, "evolutionary search: no sketches for %s", f->name);
  if (st == TS_OK) return e;
  srch_evo_free(e); /* one exit for every failure after the mutex exists */
  return NULL;
}

void srch_evo_free(srch_evo *e) {
  if (!e) return;
  for (int i = 0; i < e->nsk; i++) sch_trace_free(e->sketches[i]);
  ts_free(e->sketches);
  for (int i = 0; i < e->ndb; i++) sch_trace_free(e->db[i].bare);
  ts_free(e->db);
  hset_fini(&e->measured);
  rc_clear(e);
  ts_free(e->rc_ents);
  ts_free(e->rc_idx);
  pthread_mutex_destroy(&e->rc_mu);
  ts_free(e);
}

int srch_evo_num_sketches(const srch_evo *e) { return e ? e->nsk : 0; }

ts_status srch_evo_notify(srch_evo *e, const sch_trace *tr, uint64_t hash, double mean_secs, ts_diag *d) {
  if (!e) return ts_diag_set(d, TS_EINVAL, "srch_evo_notify: no search");
  if (!hset_add(&e->measured, hash) && !hset_has(&e->measured, hash))
    return ts_diag_set(d, TS_ENOMEM, "srch_evo_notify: out of memory");
  if (!tr || !(mean_secs > 0) || mean_secs >= 1e10) return TS_OK; /* invalid: not a seed */
  if (e->ndb == e->capdb) {
    int nc = e->capdb ? e->capdb * 2 : 64;
    measured_rec *nd = ts_realloc(e->db, (size_t)nc * sizeof *nd);
    if (!nd) return ts_diag_set(d, TS_ENOMEM, "srch_evo_notify: out of memory");
    e->db = nd;
    e->capdb = nc;
  }
  sch_trace *bare = sch_trace_simplified(tr, true);
  if (!bare) return ts_diag_set(d, TS_ENOMEM, "srch_evo_notify: out of memory");
  int i = e->ndb++;
  while (i > 0 && e->db[i - 1].mean > mean_secs) {
    e->db[i] = e->db[i - 1];
    i--;
  }
  e->db[i].bare = bare;
  e->db[i].mean = mean_secs;
  return TS_OK;
}

/* ---- seeds ------------------------------------------------------------------------------------ */
typedef struct seed_ctx {
  srch_evo *e;
  cand *out;
  uint64_t seed;
  int ndb;
} seed_ctx;

static void seed_one(void *p, int i) {
  seed_ctx *c = p;
  srch_evo *e = c->e;
  if (i < c->ndb) {
    make_cand(e, e->db[i].bare, false, mix(c->seed, (uint64_t)i), &c->out[i]);
  } else {
    uint64_t s = mix(c->seed, (uint64_t)i);
    ts_rng r;
    ts_rng_seed(&r, s);
    const sch_trace *sk = e->sketches[ts_rng_below(&r, (uint64_t)e->nsk)];
    make_cand(e, sk, true, mix(s, 7), &c->out[i]);
  }
}

/* Removes failed entries; returns the new count. */
static int compact(cand *v, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (v[i].ok)
      v[m++] = v[i];
    else
      cand_fini(&v[i]);
  return m;
}

/* ---- children ----------------------------------------------------------------------------------- */
typedef struct child_ctx {
  srch_evo *e;
  const cand *parents;
  int nparents;
  const double *cum; /* cumulative scores */
  double none_prob;             /* [0, none_prob): copy the parent */
  double mut_cum[SRCH_MUT_COUNT]; /* then mutator k up to mut_cum[k] */
  unsigned char *owns_copy; /* per child: its first draw copies its parent unchanged (NULL: none does) */
  cand *out;
  uint64_t seed;
} child_ctx;

static int pick_parent(const child_ctx *c, ts_rng *r) {
  double total = c->cum[c->nparents - 1];
  if (!(total > 0)) return (int)ts_rng_below(r, (uint64_t)c->nparents);
  double x = ts_rng_unit(r) * total;
  int lo = 0, hi = c->nparents - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c->cum[mid] > x)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static void copy_cand(const cand *src, cand *dst) {
  memset(dst, 0, sizeof *dst);
  dst->full = sch_trace_copy(src->full);
  dst->bare = sch_trace_copy(src->bare);
  dst->hash = src->hash;
  dst->feat.nrows = src->feat.nrows;
  size_t nb = (size_t)src->feat.nrows * CM_NUM_FEATURES * sizeof(float);
  dst->feat.rows = nb ? ts_malloc(nb) : NULL;
  if (nb && dst->feat.rows) memcpy(dst->feat.rows, src->feat.rows, nb);
  dst->ok = dst->full && dst->bare && (!nb || dst->feat.rows);
  if (!dst->ok) cand_fini(dst);
}

/* Which of n children copy their parent unchanged: each parent once per
 * generation, to the lowest-numbered child whose first draw (the same draw
 * child_one makes) is "no mutation" for it. Decided here, in order, so
 * that the children and the replays they cost do not depend on which
 * worker ran first. copied: scratch, one per parent. */
static void plan_copies(child_ctx *c, int n, unsigned char *copied) {
  memset(copied, 0, (size_t)c->nparents);
  for (int i = 0; i < n; i++) {
    ts_rng r;
    ts_rng_seed(&r, mix(c->seed, (uint64_t)i));
    int pi = pick_parent(c, &r);
    c->owns_copy[i] = ts_rng_unit(&r) < c->none_prob && !copied[pi];
    if (c->owns_copy[i]) copied[pi] = 1;
  }
}

static void child_one(void *p, int i) {
  child_ctx *c = p;
  ts_rng r;
  ts_rng_seed(&r, mix(c->seed, (uint64_t)i));
  int last = -1;
  for (int t = 0; t < CHILD_TRIES; t++) {
    int pi = pick_parent(c, &r);
    last = pi;
    double u = ts_rng_unit(&r);
    int m = -1;
    for (int k = 0; k < SRCH_MUT_COUNT && u >= c->none_prob; k++)
      if (u < c->mut_cum[k] || k == SRCH_MUT_COUNT - 1) {
        m = k;
        break;
      }
    if (m < 0) {
      /* no mutation: only the copy plan_copies gave this child */
      if (t > 0 || !c->owns_copy || !c->owns_copy[i]) continue;
      copy_cand(&c->parents[pi], &c->out[i]);
      if (c->out[i].ok) return;
      continue;
    }
    sch_trace *mt = srch_mutate((srch_mutator)m, c->parents[pi].bare, c->e->f, &r);
    if (!mt) continue;
    bool ok = make_cand(c->e, mt, false, mix(c->seed, (uint64_t)i * 131 + (uint64_t)t), &c->out[i]);
    sch_trace_free(mt);
    if (ok) return;
  }
  if (last >= 0) copy_cand(&c->parents[last], &c->out[i]);
}

static int cmp_score_desc(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static ts_status predict(cm_model *m, cand *v, int n, ts_diag *d) {
  if (!n) return TS_OK;
  cm_features *fs = ts_malloc((size_t)n * sizeof *fs);
  double *sc = ts_malloc((size_t)n * sizeof *sc);
  if (!fs || !sc) {
    ts_free(fs);
    ts_free(sc);
    return ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
  }
  for (int i = 0; i < n; i++) fs[i] = v[i].feat;
  ts_status st = cm_predict(m, fs, n, sc, d);
  for (int i = 0; i < n; i++) v[i].score = st == TS_OK && sc[i] > 0 ? sc[i] : 0;
  ts_free(fs);
  ts_free(sc);
  return st;
}

/* The local share of a batch: 1 in LOCAL_SHARE of its candidates (at least
 * one) are mutants of the best measured candidates (the first
 * LOCAL_PARENTS seeds, which are the measured ones best first), ranked
 * among themselves by the model. The population's children of a measured
 * seed compete with hundreds of random samples on the model's score, and
 * an untrained or mistrained model seldom puts them in a batch: a
 * Winograd kernel's default, the best point its tuning knew, then never
 * had a neighbour measured. Here they do, each batch, whatever the model
 * says of the rest. *kids (freed and replaced) gets up to
 * 4 * n / LOCAL_SHARE + 4 of them, *nk their count. */
#define LOCAL_SHARE 8
#define LOCAL_PARENTS 4
static ts_status local_kids(srch_evo *e, cm_model *m, const cand *seeds, int ndbseed, const double *mprob, double mtot,
                            uint64_t bseed, int n, cand **kids, int *nk, ts_diag *d) {
  int np = ndbseed < LOCAL_PARENTS ? ndbseed : LOCAL_PARENTS, want = 4 * (n / LOCAL_SHARE) + 4;
  cand *out = ts_calloc((size_t)want, sizeof *out);
  double *cum = ts_calloc((size_t)np, sizeof *cum); /* all zero: parents drawn uniformly */
  if (!out || !cum) {
    ts_free(out);
    ts_free(cum);
    return ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
  }
  child_ctx cc = {.e = e, .parents = seeds, .nparents = np, .cum = cum, .out = out, /* no copies */
                  .seed = mix(bseed, 9000), .none_prob = 0};
  double a = 0;
  for (int k = 0; k < SRCH_MUT_COUNT; k++) {
    a += mtot > 0 ? mprob[k] / mtot : 0;
    cc.mut_cum[k] = a;
  }
  run_parallel(e, want, child_one, &cc);
  int got = compact(out, want);
  ts_free(cum);
  ts_status st = predict(m, out, got, d);
  if (st) {
    for (int i = 0; i < got; i++) cand_fini(&out[i]);
    ts_free(out);
    return st;
  }
  qsort(out, (size_t)got, sizeof *out, cmp_score_desc);
  ts_free(*kids);
  *kids = out;
  *nk = got;
  return TS_OK;
}

/* One attempt at a batch; *nout may be 0. */
static ts_status one_batch(srch_evo *e, cm_model *m, int n, srch_candidate *out, int *nout, ts_diag *d) {
  *nout = 0;
  int pop = e->o.population, nlc = 0;
  int ndb = (int)(pop * e->o.init_measured_ratio);
  if (ndb > e->ndb) ndb = e->ndb;
  uint64_t bseed = mix(e->seed, (uint64_t)(++e->batches));
  ts_status st = TS_OK;

  /* 1. seeds: measured ones, then random rounds */
  cand *seeds = ts_calloc((size_t)pop * (EMPTY_BATCH_LIMIT + 1), sizeof *seeds);
  cand *best = NULL, *kids = NULL;
  int nbest = 0, capbest = 0;
  hset exists = {0};
  unsigned char *copied = NULL;
  double *cum = NULL;
  if (!seeds) return ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
  seed_ctx sc = {e, seeds, bseed, ndb};
  run_parallel(e, ndb, seed_one, &sc);
  int nseed = compact(seeds, ndb);
  int ndbseed = nseed;
  for (int round = 0; round < EMPTY_BATCH_LIMIT && nseed - ndbseed < e->o.init_min_unmeasured; round++) {
    int want = pop - ndbseed;
    if (want < e->o.init_min_unmeasured) want = e->o.init_min_unmeasured;
    if (nseed + want > pop * (EMPTY_BATCH_LIMIT + 1)) break;
    seed_ctx rc = {e, seeds + nseed, mix(bseed, 1000 + (uint64_t)round), 0};
    run_parallel(e, want, seed_one, &rc);
    int got = compact(seeds + nseed, want);
    nseed += got;
  }
  int nrand = nseed - ndbseed;
  if (nseed == 0) goto done;

  /* 2. evolve */
  if (!hset_copy(&exists, &e->measured)) {
    st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
    goto done;
  }
  kids = ts_calloc((size_t)pop, sizeof *kids);
  copied = ts_malloc((size_t)pop + (size_t)(pop > nseed ? pop : nseed)); /* per child, then per parent */
  cum = ts_malloc((size_t)(pop > nseed ? pop : nseed) * sizeof *cum);
  if (!kids || !copied || !cum) {
    st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
    goto done;
  }
  /* The first population: all seeds (copies; the random seeds also serve
   * the eps-greedy picks). */
  cand *popv = ts_calloc((size_t)(nseed > pop ? nseed : pop), sizeof *popv);
  if (!popv) {
    st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
    goto done;
  }
  int npop = 0;
  for (int i = 0; i < nseed; i++) {
    copy_cand(&seeds[i], &popv[npop]);
    if (popv[npop].ok) npop++;
  }
  double mtot = 0;
  double mprob[SRCH_MUT_COUNT]; /* per target (MetaSchedule's CPU / CUDA lists) */
  for (int k = 0; k < SRCH_MUT_COUNT; k++) mtot += mprob[k] = srch_mutator_prob((srch_mutator)k, &e->t);
  for (int it = 0;; it++) {
    int64_t pt0 = now_ns();
    st = predict(m, popv, npop, d);
    e->predict_ns += now_ns() - pt0;
    if (st) break;
    for (int i = 0; i < npop; i++) {
      if (hset_has(&exists, popv[i].hash)) continue;
      hset_add(&exists, popv[i].hash);
      if (nbest == capbest) {
        int nc = capbest ? capbest * 2 : 256;
        cand *nb = ts_realloc(best, (size_t)nc * sizeof *nb);
        if (!nb) {
          st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
          break;
        }
        best = nb;
        capbest = nc;
      }
      copy_cand(&popv[i], &best[nbest]);
      best[nbest].score = popv[i].score;
      if (best[nbest].ok) nbest++;
    }
    if (st || it >= e->o.genetic_iters || npop == 0) break;
    double acc = 0;
    for (int i = 0; i < npop; i++) cum[i] = acc += popv[i].score;
    child_ctx cc = {.e = e, .parents = popv, .nparents = npop, .cum = cum, .owns_copy = copied,
                    .out = kids, .seed = mix(bseed, 5000 + (uint64_t)it)};
    double a2 = 1.0 - e->o.mutate_prob;
    cc.none_prob = a2;
    for (int k = 0; k < SRCH_MUT_COUNT; k++) {
      a2 += e->o.mutate_prob * mprob[k] / mtot;
      cc.mut_cum[k] = a2;
    }
    plan_copies(&cc, pop, copied + pop);
    run_parallel(e, pop, child_one, &cc);
    for (int i = 0; i < npop; i++) cand_fini(&popv[i]);
    npop = compact(kids, pop);
    memcpy(popv, kids, (size_t)npop * sizeof *popv);
    memset(kids, 0, (size_t)pop * sizeof *kids);
  }
  for (int i = 0; i < npop; i++) cand_fini(&popv[i]);
  ts_free(popv);
  if (st) goto done;
  qsort(best, (size_t)nbest, sizeof *best, cmp_score_desc);

  /* 3. the batch: mutants of the best measured first (local_share), then
   * the bests, then eps-greedy random seeds */
  if (n >= 2 && ndbseed > 0) {
    st = local_kids(e, m, seeds, ndbseed, mprob, mtot, bseed, n, &kids, &nlc, d);
    if (st) goto done;
  }
  {
    int neps = (int)(n * e->o.eps_greedy);
    int nloc = n / LOCAL_SHARE > 0 ? n / LOCAL_SHARE : 1, li = 0;
    int nfirst = n - neps;
    int bi = 0;
    ts_rng r;
    ts_rng_seed(&r, mix(bseed, 99));
    int *perm = ts_malloc((size_t)(nrand > 0 ? nrand : 1) * sizeof *perm);
    if (!perm) {
      st = ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
      goto done;
    }
    for (int i = 0; i < nrand; i++) perm[i] = ndbseed + i;
    for (int i = nrand - 1; i > 0; i--) {
      int j = (int)ts_rng_below(&r, (uint64_t)i + 1), tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    int ri = 0;
    while (*nout < n) {
      cand *pick = NULL;
      while (!pick && li < nlc && *nout < nloc) {
        if (!hset_has(&e->measured, kids[li].hash)) pick = &kids[li];
        li++;
      }
      bool from_best = *nout < nfirst;
      for (int pass = 0; pass < 2 && !pick; pass++, from_best = !from_best) {
        if (from_best) {
          while (bi < nbest && hset_has(&e->measured, best[bi].hash)) bi++;
          if (bi < nbest) pick = &best[bi++];
        } else {
          while (ri < nrand && hset_has(&e->measured, seeds[perm[ri]].hash)) ri++;
          if (ri < nrand) pick = &seeds[perm[ri++]];
        }
      }
      if (!pick) break;
      hset_add(&e->measured, pick->hash);
      srch_candidate *o = &out[(*nout)++];
      o->trace = pick->full;
      pick->full = NULL;
      o->hash = pick->hash;
      o->score = pick->score;
    }
    ts_free(perm);
  }

done:
  for (int i = 0; i < nlc; i++) cand_fini(&kids[i]);
  for (int i = 0; i < nseed; i++) cand_fini(&seeds[i]);
  ts_free(seeds);
  for (int i = 0; i < nbest; i++) cand_fini(&best[i]);
  ts_free(best);
  ts_free(kids);
  ts_free(copied);
  ts_free(cum);
  hset_fini(&exists);
  return st;
}

ts_status srch_evo_next_batch(srch_evo *e, cm_model *m, int n, srch_candidate **out, int *nout,
                              ts_diag *d) {
  *out = NULL;
  *nout = 0;
  if (!e || !m || n <= 0) return n <= 0 ? TS_OK : ts_diag_set(d, TS_EINVAL, "srch_evo_next_batch: bad arguments");
  if (e->empty >= EMPTY_BATCH_LIMIT) return TS_OK;
  /* a small first batch lets a model train sooner (a resumed log that
   * already holds that many candidates does not need it) */
  if (e->o.first_batch > 0 && e->batches == 0 && e->measured.n < (size_t)e->o.first_batch &&
      n > e->o.first_batch)
    n = e->o.first_batch;
  srch_candidate *v = ts_calloc((size_t)n, sizeof *v);
  if (!v) return ts_diag_set(d, TS_ENOMEM, "evolutionary search: out of memory");
  while (e->empty < EMPTY_BATCH_LIMIT) {
    ts_status st = one_batch(e, m, n, v, nout, d);
    if (st) {
      for (int i = 0; i < *nout; i++) srch_candidate_fini(&v[i]);
      ts_free(v);
      *nout = 0;
      return st;
    }
    if (*nout > 0) break;
    e->empty++;
  }
  if (!*nout) {
    ts_free(v);
    return TS_OK;
  }
  *out = v;
  return TS_OK;
}
