/* cmd_costmodel.c — `tessel costmodel eval|train|features` (and `dataset`,
 * cmd_costmodel_data.c): how well the XGBoost cost model ranks tuning logs,
 * and training a model to keep.
 *
 * Each record's trace is replayed on its workload (canonical spec through
 * ir_workload_from_spec, else DSL text) and its features extracted for the
 * record's target. `eval` has three modes:
 *  - records (default): per workload a seeded split of the records; the model
 *    trains on every workload's train part and is scored on the held-out
 *    records of the same workloads;
 *  - `--split workloads`: a seeded split of the workloads themselves; the
 *    model never sees a record of a scored workload;
 *  - `--cost-model FILE|default`: an existing model ranks every record of
 *    the logs, trained on none of them (trained_records 0).
 * Scores: pairwise accuracy and recall@30 on error-free records, averaged
 * over workloads weighted by their scored records, beside the random
 * model's. Training includes failures at cost 1e10, as the tuner does.
 * `train` fits a model on all records and writes it in XGBoost's JSON format
 * with the feature schema and target family (cm_xgb_export). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "costmodel/costmodel.h"
#include "ir/parse.h"
#include "ir/schedule/trace.h"
#include "tuner/build.h"
#include "tuner/database.h"

typedef struct wl_ent {
  const char *text;
  ir_func *func; /* NULL if it could not be built */
  bool main;     /* has a record of a main log (not only --extra ones) */
} wl_ent;

typedef struct rec_ent {
  int wl;         /* index into the workload table */
  uint64_t group;
  cm_features feat;
  double cost;
  bool valid;     /* error-free with runs */
  bool train;
  bool extra;     /* from an --extra log: always trains, never scored */
} rec_ent;

/* The records of one or more logs with their features. */
typedef struct rec_set {
  ts_arena *a;
  tun_db **dbs;
  int ndb;
  rec_ent *r;
  int nr, nrec, nskip;
  wl_ent *wl;
  int nwl;
  const char *target; /* the first used record's target string */
} rec_set;

static ir_func *workload_func(ts_arena *a, const char *text) {
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  if (ir_workload_from_spec(a, text, &f, &d) == TS_OK) return f;
  ts_diag_clear(&d);
  if (ir_parse_func(a, text, strlen(text), "<log>", &f, &d) == TS_OK) return f;
  return NULL;
}

static void set_free(rec_set *s) {
  for (int i = 0; i < s->nr; i++) cm_features_fini(&s->r[i].feat);
  ts_free(s->r);
  ts_free(s->wl);
  for (int i = 0; i < s->ndb; i++) tun_db_close(s->dbs[i]);
  ts_free(s->dbs);
  if (s->a) ts_arena_free(s->a);
}

/* Adds record rec of a loaded log to s (or counts it skipped). */
static void set_add(rec_set *s, const tun_record *rec, bool extra) {
  if (!rec->workload || !rec->trace || !rec->target) {
    s->nskip++;
    return;
  }
  int w = -1;
  for (int j = 0; j < s->nwl && w < 0; j++)
    if (!strcmp(s->wl[j].text, rec->workload)) w = j;
  if (w < 0) {
    w = s->nwl++;
    s->wl[w].text = rec->workload;
    s->wl[w].func = workload_func(s->a, rec->workload);
  }
  cg_target tg;
  if (!s->wl[w].func || cg_target_parse(rec->target, &tg, NULL) != TS_OK) {
    s->nskip++;
    return;
  }
  sch_trace *tr = sch_trace_from_json(rec->trace, NULL);
  sch_traced *t = tr ? sch_trace_replay(tr, s->wl[w].func, 1, NULL) : NULL;
  sch_trace_free(tr);
  rec_ent *e = &s->r[s->nr];
  memset(e, 0, sizeof *e);
  if (!t || cm_extract(sch_traced_func(t), &tg, &e->feat, NULL) != TS_OK || e->feat.nrows == 0) {
    cm_features_fini(&e->feat);
    sch_traced_free(t);
    s->nskip++;
    return;
  }
  sch_traced_free(t);
  e->wl = w;
  e->extra = extra;
  if (!extra) s->wl[w].main = true;
  e->group = strtoull(rec->workload_key, NULL, 16);
  e->valid = !rec->error && rec->nruns > 0;
  e->cost = e->valid ? tun_record_median(rec) : 1e10;
  if (!(e->cost > 0)) {
    cm_features_fini(&e->feat);
    s->nskip++;
    return;
  }
  if (!s->target) s->target = rec->target;
  s->nr++;
}

/* Loads the logs paths[0..n) into s, the last nextra of them as --extra
 * logs; 0 or the exit status (printed). */
static int set_load(rec_set *s, char **paths, int n, int nextra) {
  memset(s, 0, sizeof *s);
  s->a = ts_arena_new();
  s->dbs = ts_calloc((size_t)n, sizeof *s->dbs);
  if (!s->a || !s->dbs) return fprintf(stderr, "tessel costmodel: out of memory\n"), 1;
  for (int k = 0; k < n; k++) {
    ts_diag d;
    ts_diag_clear(&d);
    int nwarn = 0;
    if (!(s->dbs[k] = tun_db_load(paths[k], stderr, &nwarn, &d)))
      return fprintf(stderr, "tessel costmodel: %s\n", d.msg), 2;
    s->ndb++;
    s->nrec += tun_db_count(s->dbs[k]);
  }
  s->r = ts_calloc((size_t)(s->nrec ? s->nrec : 1), sizeof *s->r);
  s->wl = ts_calloc((size_t)(s->nrec ? s->nrec : 1), sizeof *s->wl);
  if (!s->r || !s->wl) return fprintf(stderr, "tessel costmodel: out of memory\n"), 1;
  for (int k = 0; k < s->ndb; k++)
    for (int i = 0; i < tun_db_count(s->dbs[k]); i++) set_add(s, tun_db_get(s->dbs[k], i), k >= n - nextra);
  return 0;
}

static void shuffle(ts_rng *rng, int *idx, int k) {
  for (int i = k - 1; i > 0; i--) {
    int j = (int)ts_rng_below(rng, (uint64_t)i + 1), tmp = idx[i];
    idx[i] = idx[j];
    idx[j] = tmp;
  }
}

/* Marks the train records: by_workload, a seeded frac of the workloads of
 * the main logs (at least one held out), else a seeded frac of each
 * workload's records; records of --extra logs train unless their workload
 * is held out. */
static void split(rec_set *s, uint64_t seed, double frac, bool by_workload) {
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  int *idx = ts_malloc((size_t)(s->nr > s->nwl ? s->nr : s->nwl) * sizeof *idx + 1);
  if (!idx) return;
  /* extra records of a held-out workload neither train nor score */
  for (int i = 0; i < s->nr; i++) s->r[i].train = !s->wl[s->r[i].wl].main || (!by_workload && s->r[i].extra);
  if (by_workload) {
    int nm = 0;
    for (int w = 0; w < s->nwl; w++)
      if (s->wl[w].main) idx[nm++] = w;
    shuffle(&rng, idx, nm);
    int kt = (int)(nm * frac + 0.5);
    if (kt >= nm) kt = nm - 1;
    for (int i = 0; i < s->nr; i++)
      for (int j = 0; j < kt; j++)
        if (s->r[i].wl == idx[j]) s->r[i].train = true;
  } else {
    for (int w = 0; w < s->nwl; w++) {
      int k = 0;
      for (int i = 0; i < s->nr; i++)
        if (s->r[i].wl == w && !s->r[i].extra) idx[k++] = i;
      shuffle(&rng, idx, k);
      int kt = (int)(k * frac + 0.5);
      for (int i = 0; i < kt; i++) s->r[idx[i]].train = true;
    }
  }
  ts_free(idx);
}

/* Scores model m on the records that are not train (scored_all: all). */
/* Scores of one model on a record set (weighted over workloads by their
 * scored records): pairwise accuracy over all pairs (acc) and over the
 * pairs beyond the noise margin (acc_n), recall@30 (rec). */
typedef struct score {
  double acc, acc_n, rec;
  int nscored, nwl;
} score;

static void eval_model(cm_model *m, const rec_set *s, bool scored_all, double noise, FILE *per, score *out) {
  double wacc = 0, wacn = 0, wrec = 0;
  int tot = 0, nw = 0, n = s->nr;
  cm_features *c = ts_malloc((size_t)(n ? n : 1) * sizeof *c);
  double *sc = ts_malloc((size_t)(n ? n : 1) * sizeof *sc);
  double *co = ts_malloc((size_t)(n ? n : 1) * sizeof *co);
  if (!c || !sc || !co) goto out;
  for (int w = 0; w < s->nwl; w++) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (s->r[i].wl == w && (scored_all || !s->r[i].train) && !s->r[i].extra && s->r[i].valid) {
        c[k] = s->r[i].feat;
        co[k] = s->r[i].cost;
        k++;
      }
    if (k < 2) continue;
    if (cm_predict(m, c, k, sc, NULL) != TS_OK) continue;
    if (per) {
      double lo = co[0], hi = co[0];
      for (int i = 1; i < k; i++) {
        lo = co[i] < lo ? co[i] : lo;
        hi = co[i] > hi ? co[i] : hi;
      }
      fprintf(per, "    %-70.70s %3d records, slowest/fastest %7.2f: pairwise %.3f (beyond noise %.3f)\n",
              s->wl[w].text, k, hi / lo, cm_pairwise_accuracy(sc, co, k), cm_pairwise_accuracy_margin(sc, co, k, noise));
    }
    wacc += cm_pairwise_accuracy(sc, co, k) * k;
    wacn += cm_pairwise_accuracy_margin(sc, co, k, noise) * k;
    wrec += cm_recall_at_k(sc, co, k, 30) * k;
    tot += k;
    nw++;
  }
out:
  out->acc = tot ? wacc / tot : 0;
  out->acc_n = tot ? wacn / tot : 0;
  out->rec = tot ? wrec / tot : 0;
  out->nscored = tot;
  out->nwl = nw;
  ts_free(c);
  ts_free(sc);
  ts_free(co);
}

/* A new xgb model trained on s's train records; NULL (printed) on error. */
static cm_model *train_on(const rec_set *s, uint64_t seed, bool rank, int rounds, int depth, int *ntrain) {
  ts_diag d;
  ts_diag_clear(&d);
  cm_sample *smp = ts_malloc((size_t)(s->nr ? s->nr : 1) * sizeof *smp);
  cm_model *m = cm_xgb_new(0, seed, &d);
  *ntrain = 0;
  if (!smp || !m) {
    fprintf(stderr, "tessel costmodel: %s\n", m ? "out of memory" : d.msg);
    ts_free(smp);
    cm_model_free(m);
    return NULL;
  }
  for (int i = 0; i < s->nr; i++)
    if (s->r[i].train) smp[(*ntrain)++] = (cm_sample){s->r[i].group, &s->r[i].feat, s->r[i].cost};
  cm_xgb_set_min_samples(m, 1); /* evaluate the booster even on small logs */
  cm_xgb_set_objective(m, rank);
  if (rounds > 0) cm_xgb_set_max_rounds(m, rounds);
  if (depth > 0) cm_xgb_set_max_depth(m, depth);
  if (*ntrain > 0 && cm_update(m, smp, *ntrain, &d) != TS_OK) {
    fprintf(stderr, "tessel costmodel: training: %s\n", d.msg);
    cm_model_free(m);
    m = NULL;
  }
  ts_free(smp);
  return m;
}

/* The resolved target of s's records (the first one's), for families. */
static bool set_target(const rec_set *s, cg_target *tg) {
  if (!s->target || cg_target_parse(s->target, tg, NULL) != TS_OK) return false;
  return tun_resolve_target(tg, NULL) == TS_OK;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: tessel costmodel eval LOG... [--json] [--seed N] [--seeds K] [--train-frac F]\n"
          "                         [--split records|workloads] [--objective packsum|rank]\n"
          "                         [--max-rounds N] [--max-depth N] [--noise F] [--drop-features LIST]\n"
          "                         [--per-workload] [--extra LOG]... [--dump-features FILE]\n"
          "       tessel costmodel eval LOG... --cost-model FILE|default [--json] [--noise F]\n"
          "       tessel costmodel train LOG... -o MODEL [--seed N] [--objective packsum|rank]\n"
          "                         [--max-rounds N] [--max-depth N] [--extra LOG]... [--drop-features LIST]\n"
          "                         [--json]\n"
          "       tessel costmodel dataset --log LOG --trials N [...]  (see dataset --help)\n"
          "       tessel costmodel features   (the feature table, markdown)\n"
          "  eval replays each record's trace and extracts features, trains the XGBoost model\n"
          "  on a seeded split (of each workload's records, or --split workloads: of the\n"
          "  workloads, so scored workloads are never seen in training) and reports\n"
          "  pairwise accuracy and recall@30 on the held-out records beside the random\n"
          "  model's; with --cost-model it ranks every record with that model, training on\n"
          "  none. --seeds K repeats the split for seeds N..N+K-1 (features extracted once)\n"
          "  and adds the mean. pairwise_accuracy counts every pair with different costs;\n"
          "  pairwise_accuracy_beyond_noise only pairs whose costs differ by more than F\n"
          "  (--noise, default 0.02 = 2%%). --drop-features LIST (e.g. 164-181,60) zeroes those\n"
          "  feature columns before training and scoring (ablation); --per-workload prints each\n"
          "  scored workload's figures (text output); --dump-features FILE writes every record's\n"
          "  feature rows as tab-separated lines (workload, record, cost, row, features); --extra\n"
          "  LOG (repeatable) adds a log whose records always train and are never scored (e.g.\n"
          "  logs of another machine). train fits a model on all\n"
          "  records of the logs and writes it in XGBoost's JSON format with the feature\n"
          "  schema and target family (tune --cost-model).\n");
  return f == stdout ? 0 : 2;
}

typedef struct cm_args {
  bool json, rank, by_workload, per_workload;
  uint64_t seed;
  int seeds;
  double frac, noise;
  int rounds, depth;
  const char *cost_model, *out, *drop, *dump;
  char *extra[64]; /* --extra LOG: always training data, never scored */
  int nextra;
} cm_args;

/* Parses the options of eval and train; 0 to go on, else 1 + exit status. */
static int parse_args(int argc, char **argv, const char *cmd, cm_args *o) {
  enum { OPT_JSON = 256, OPT_SEED, OPT_FRAC, OPT_SPLIT, OPT_OBJ, OPT_CM, OPT_ROUNDS, OPT_SEEDS, OPT_NOISE,
         OPT_DROP, OPT_PER, OPT_EXTRA, OPT_DEPTH, OPT_DUMP };
  static const struct option opts[] = {
      {"json", no_argument, 0, OPT_JSON},          {"seed", required_argument, 0, OPT_SEED},
      {"train-frac", required_argument, 0, OPT_FRAC}, {"split", required_argument, 0, OPT_SPLIT},
      {"objective", required_argument, 0, OPT_OBJ}, {"cost-model", required_argument, 0, OPT_CM},
      {"max-rounds", required_argument, 0, OPT_ROUNDS}, {"output", required_argument, 0, 'o'},
      {"seeds", required_argument, 0, OPT_SEEDS},  {"noise", required_argument, 0, OPT_NOISE},
      {"drop-features", required_argument, 0, OPT_DROP}, {"per-workload", no_argument, 0, OPT_PER},
      {"extra", required_argument, 0, OPT_EXTRA},    {"max-depth", required_argument, 0, OPT_DEPTH},
      {"dump-features", required_argument, 0, OPT_DUMP},
      {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
  *o = (cm_args){.seed = 1, .seeds = 1, .frac = 0.7, .noise = 0.02};
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1;) {
    bool ok = true;
    if (c == OPT_JSON) o->json = true;
    else if (c == OPT_SEED) ok = tun_cli_seed(cmd, "--seed", optarg, &o->seed);
    else if (c == OPT_SEEDS) ok = tun_cli_int(cmd, "--seeds", optarg, 1, 1000, &o->seeds);
    else if (c == OPT_FRAC) ok = tun_cli_real(cmd, "--train-frac", optarg, 0, 1, &o->frac);
    else if (c == OPT_NOISE) ok = tun_cli_real(cmd, "--noise", optarg, 0, 10, &o->noise);
    else if (c == OPT_ROUNDS) ok = tun_cli_int(cmd, "--max-rounds", optarg, 1, 100000, &o->rounds);
    else if (c == OPT_DEPTH) ok = tun_cli_int(cmd, "--max-depth", optarg, 1, 30, &o->depth);
    else if (c == OPT_CM) o->cost_model = optarg;
    else if (c == OPT_DROP) o->drop = optarg;
    else if (c == OPT_DUMP) o->dump = optarg;
    else if (c == OPT_PER) o->per_workload = true;
    else if (c == OPT_EXTRA && o->nextra < 64) o->extra[o->nextra++] = optarg;
    else if (c == OPT_EXTRA) {
      fprintf(stderr, "tessel %s: --extra: at most 64 logs\n", cmd);
      ok = false;
    }
    else if (c == 'o') o->out = optarg;
    else if (c == OPT_SPLIT && (!strcmp(optarg, "records") || !strcmp(optarg, "workloads")))
      o->by_workload = !strcmp(optarg, "workloads");
    else if (c == OPT_OBJ && (!strcmp(optarg, "packsum") || !strcmp(optarg, "rank")))
      o->rank = !strcmp(optarg, "rank");
    else if (c == OPT_SPLIT || c == OPT_OBJ) {
      fprintf(stderr, "tessel %s: --%s: unknown value '%s' (valid: %s)\n", cmd,
              c == OPT_SPLIT ? "split" : "objective", optarg,
              c == OPT_SPLIT ? "records, workloads" : "packsum, rank");
      ok = false;
    } else if (c == 'h') return 1 + usage(stdout);
    else return 1 + usage(stderr);
    if (!ok) return 1 + 2;
  }
  if (optind >= argc || o->frac <= 0 || o->frac >= 1) return 1 + usage(stderr);
  return 0;
}

/* Writes every used record's features as tab-separated lines "workload
 * record cost row f0 ... fN-1" (one line per feature row; cost 1e10 for a
 * failure), for analysis outside tessel; false (printed) if it cannot. */
static bool dump_features(const rec_set *s, const char *path, const char *cmd) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "tessel %s: --dump-features: cannot write %s\n", cmd, path);
    return false;
  }
  for (int i = 0; i < s->nr; i++)
    for (int r = 0; r < s->r[i].feat.nrows; r++) {
      fprintf(f, "%d\t%d\t%.9g\t%d", s->r[i].wl, i, s->r[i].valid ? s->r[i].cost : 1e10, r);
      for (int k = 0; k < CM_NUM_FEATURES; k++) fprintf(f, "\t%.6g", s->r[i].feat.rows[(size_t)r * CM_NUM_FEATURES + k]);
      fputc('\n', f);
    }
  bool ok = !ferror(f);
  if (fclose(f) || !ok) {
    fprintf(stderr, "tessel %s: --dump-features: writing %s failed\n", cmd, path);
    return false;
  }
  return true;
}

/* Zeroes the feature columns of list ("164-181,60") in every record of s;
 * false (printed) on a malformed list. */
static bool drop_features(rec_set *s, const char *list, const char *cmd) {
  bool mask[CM_NUM_FEATURES] = {0};
  for (const char *p = list; *p;) {
    char *end;
    long a = strtol(p, &end, 10), b = a;
    if (end == p) goto bad;
    if (*end == '-') {
      const char *q = end + 1;
      b = strtol(q, &end, 10);
      if (end == q) goto bad;
    }
    if (a < 0 || b >= CM_NUM_FEATURES || a > b) goto bad;
    for (long i = a; i <= b; i++) mask[i] = true;
    if (*end == ',') end++;
    else if (*end) goto bad;
    p = end;
  }
  for (int i = 0; i < s->nr; i++)
    for (int r = 0; r < s->r[i].feat.nrows; r++)
      for (int k = 0; k < CM_NUM_FEATURES; k++)
        if (mask[k]) s->r[i].feat.rows[(size_t)r * CM_NUM_FEATURES + k] = 0;
  return true;
bad:
  fprintf(stderr, "tessel %s: --drop-features: '%s' is not a list of feature indices or ranges in 0..%d\n",
          cmd, list, CM_NUM_FEATURES - 1);
  return false;
}

static void print_score_json(const char *key, const score *x) {
  printf("\"%s\": {\"pairwise_accuracy\": %.4f, \"pairwise_accuracy_beyond_noise\": %.4f, "
         "\"recall_at_30\": %.4f}", key, x->acc, x->acc_n, x->rec);
}

/* eval with --cost-model: rank every record with an existing model. */
static int eval_existing(const rec_set *s, const cm_args *o) {
  cg_target tg;
  if (!set_target(s, &tg)) {
    fprintf(stderr, "tessel costmodel eval: the logs hold no usable record\n");
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  cm_model *m = NULL;
  ts_status st = cm_pretrained_open(o->cost_model, &tg, o->seed, stderr, &m, &d);
  if (st || !m) {
    fprintf(stderr, "tessel costmodel eval: %s\n", st ? d.msg : "--cost-model none: no model to evaluate");
    return 2;
  }
  const char *path = strcmp(o->cost_model, "default") ? o->cost_model : cm_pretrained_default_path();
  cm_model *rm = cm_random_new(o->seed);
  score x, r;
  eval_model(m, s, true, o->noise, o->per_workload ? stdout : NULL, &x);
  eval_model(rm, s, true, o->noise, NULL, &r);
  if (o->json) {
    printf("{\"records\": %d, \"used\": %d, \"skipped\": %d, \"workloads\": %d, \"scored\": %d, "
           "\"pairwise_accuracy\": %.4f, \"pairwise_accuracy_beyond_noise\": %.4f, \"noise\": %g, "
           "\"recall_at_30\": %.4f, \"model\": \"%s\", \"trained_records\": 0, ",
           s->nrec, s->nr, s->nskip, x.nwl, x.nscored, x.acc, x.acc_n, o->noise, x.rec, path);
    print_score_json("random", &r);
    printf("}\n");
  } else {
    printf("records %d (used %d, skipped %d), workloads %d, scored %d, model %s (trained on none)\n", s->nrec,
           s->nr, s->nskip, x.nwl, x.nscored, path);
    printf("  model   pairwise accuracy %.4f (pairs beyond %g: %.4f)  recall@30 %.4f\n", x.acc, o->noise,
           x.acc_n, x.rec);
    printf("  random  pairwise accuracy %.4f (pairs beyond %g: %.4f)  recall@30 %.4f\n", r.acc, o->noise,
           r.acc_n, r.rec);
  }
  cm_model_free(m);
  cm_model_free(rm);
  return 0;
}

/* One seeded split, training and scoring; false on a training error. */
static bool eval_split(rec_set *s, const cm_args *o, uint64_t seed, score *x, score *r, int *ntrain,
                       int *rounds) {
  split(s, seed, o->frac, o->by_workload);
  cm_model *xm = train_on(s, seed, o->rank, o->rounds, o->depth, ntrain);
  cm_model *rm = cm_random_new(seed);
  bool ok = xm && rm;
  if (ok) {
    eval_model(xm, s, false, o->noise, o->per_workload ? stdout : NULL, x);
    eval_model(rm, s, false, o->noise, NULL, r);
    *rounds = cm_xgb_last_rounds(xm);
  }
  cm_model_free(xm);
  cm_model_free(rm);
  return ok;
}

static int cmd_eval(rec_set *s, const cm_args *o) {
  if (o->cost_model) return eval_existing(s, o);
  const char *sp = o->by_workload ? "workloads" : "records", *obj = o->rank ? "rank" : "packsum";
  score mx = {0}, mr = {0};
  for (int k = 0; k < o->seeds; k++) {
    uint64_t seed = o->seed + (uint64_t)k;
    score x, r;
    int ntrain = 0, rounds = 0;
    if (!eval_split(s, o, seed, &x, &r, &ntrain, &rounds)) return 1;
    mx.acc += x.acc / o->seeds;
    mx.acc_n += x.acc_n / o->seeds;
    mx.rec += x.rec / o->seeds;
    mr.acc += r.acc / o->seeds;
    mr.acc_n += r.acc_n / o->seeds;
    mr.rec += r.rec / o->seeds;
    if (o->json) {
      printf("{\"records\": %d, \"used\": %d, \"skipped\": %d, \"workloads\": %d, \"split\": \"%s\", "
             "\"seed\": %llu, \"train\": %d, \"heldout\": %d, \"heldout_workloads\": %d, "
             "\"pairwise_accuracy\": %.4f, \"pairwise_accuracy_beyond_noise\": %.4f, \"noise\": %g, "
             "\"recall_at_30\": %.4f, \"model\": \"xgb\", \"objective\": \"%s\", \"trained_records\": %d, "
             "\"rounds\": %d, ",
             s->nrec, s->nr, s->nskip, s->nwl, sp, (unsigned long long)seed, ntrain, x.nscored, x.nwl, x.acc,
             x.acc_n, o->noise, x.rec, obj, ntrain, rounds);
      print_score_json("random", &r);
      printf("}\n");
    } else {
      printf("records %d (used %d, skipped %d), workloads %d, split by %s, seed %llu: train %d, held-out "
             "scored %d (%d workloads)\n", s->nrec, s->nr, s->nskip, s->nwl, sp, (unsigned long long)seed,
             ntrain, x.nscored, x.nwl);
      printf("  xgb     pairwise accuracy %.4f (pairs beyond %g: %.4f)  recall@30 %.4f  (%s, %d rounds)\n",
             x.acc, o->noise, x.acc_n, x.rec, obj, rounds);
      printf("  random  pairwise accuracy %.4f (pairs beyond %g: %.4f)  recall@30 %.4f\n", r.acc, o->noise,
             r.acc_n, r.rec);
    }
  }
  if (o->seeds > 1) {
    if (o->json) {
      printf("{\"mean_of_seeds\": %d, \"split\": \"%s\", \"objective\": \"%s\", \"pairwise_accuracy\": %.4f, "
             "\"pairwise_accuracy_beyond_noise\": %.4f, \"recall_at_30\": %.4f, ",
             o->seeds, sp, obj, mx.acc, mx.acc_n, mx.rec);
      print_score_json("random", &mr);
      printf("}\n");
    } else {
      printf("mean of %d seeds: xgb pairwise %.4f (beyond noise %.4f) recall@30 %.4f; random %.4f (%.4f) %.4f\n",
             o->seeds, mx.acc, mx.acc_n, mx.rec, mr.acc, mr.acc_n, mr.rec);
    }
  }
  return 0;
}

static int cmd_train(rec_set *s, const cm_args *o) {
  if (!o->out) {
    fprintf(stderr, "tessel costmodel train: -o MODEL is required\n");
    return 2;
  }
  cg_target tg;
  if (!set_target(s, &tg)) {
    fprintf(stderr, "tessel costmodel train: the logs hold no usable record\n");
    return 2;
  }
  for (int i = 0; i < s->nr; i++) s->r[i].train = true;
  int ntrain = 0;
  cm_model *m = train_on(s, o->seed, o->rank, o->rounds, o->depth, &ntrain);
  if (!m) return 1;
  char fam[96];
  cm_target_family(&tg, fam, sizeof fam);
  ts_diag d;
  ts_diag_clear(&d);
  int rc = 0;
  if (cm_xgb_export(m, o->out, fam, s->nwl, &d) != TS_OK) {
    fprintf(stderr, "tessel costmodel train: %s\n", d.msg);
    rc = 1;
  } else if (o->json)
    printf("{\"model\": \"%s\", \"records\": %d, \"trained_records\": %d, \"workloads\": %d, "
           "\"family\": \"%s\", \"schema\": %d, \"objective\": \"%s\", \"rounds\": %d}\n",
           o->out, s->nrec, ntrain, s->nwl, fam, CM_FEATURE_SCHEMA, o->rank ? "rank" : "packsum",
           cm_xgb_last_rounds(m));
  else
    printf("%s: trained on %d records of %d workloads (%d skipped), %s, %d rounds, schema %d, for '%s'\n",
           o->out, ntrain, s->nwl, s->nskip, o->rank ? "rank" : "packsum", cm_xgb_last_rounds(m),
           CM_FEATURE_SCHEMA, fam);
  cm_model_free(m);
  return rc;
}

int tun_cmd_costmodel(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
    return usage(argc < 2 ? stderr : stdout);
  if (!strcmp(argv[1], "features")) { /* the table of docs/FEATURES.md */
    printf("| index | name | meaning |\n|---|---|---|\n");
    for (int i = 0; i < CM_NUM_FEATURES; i++)
      printf("| %d | `%s` | %s |\n", i, cm_feature_name(i), cm_feature_desc(i));
    return 0;
  }
  if (!strcmp(argv[1], "dataset")) return tun_cmd_costmodel_dataset(argc - 1, argv + 1);
  bool train = !strcmp(argv[1], "train");
  if (!train && strcmp(argv[1], "eval")) {
    fprintf(stderr, "tessel costmodel: unknown subcommand '%s' (valid: eval, train, dataset, features)\n",
            argv[1]);
    return 2;
  }
  const char *cmd = train ? "costmodel train" : "costmodel eval";
  cm_args o;
  int rc = parse_args(argc - 1, argv + 1, cmd, &o);
  if (rc) return rc - 1;
  if (train && o.cost_model) {
    fprintf(stderr, "tessel costmodel train: --cost-model is for eval\n");
    return 2;
  }
  rec_set s;
  int nmain = argc - 1 - optind;
  char **paths = ts_malloc((size_t)(nmain + o.nextra) * sizeof *paths);
  if (!paths) return fprintf(stderr, "tessel %s: out of memory\n", cmd), 1;
  for (int i = 0; i < nmain; i++) paths[i] = argv[1 + optind + i];
  for (int i = 0; i < o.nextra; i++) paths[nmain + i] = o.extra[i];
  rc = set_load(&s, paths, nmain + o.nextra, o.nextra);
  ts_free(paths);
  if (!rc && o.drop && !drop_features(&s, o.drop, cmd)) rc = 2;
  if (!rc && o.dump && !dump_features(&s, o.dump, cmd)) rc = 2;
  if (!rc) rc = train ? cmd_train(&s, &o) : cmd_eval(&s, &o);
  set_free(&s);
  return rc;
}
