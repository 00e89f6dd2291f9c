/* cmd_costmodel.c — `tessel costmodel eval LOG [--json] [--seed N]
 * [--train-frac F]`: how well the XGBoost cost model ranks a tuning log.
 *
 * Each record's trace is replayed on its workload (canonical spec through
 * ir_workload_from_spec, else DSL text) and its features extracted for the
 * record's target. Per workload, records are shuffled (seeded) and split
 * into train and held-out parts; the model trains on every workload's
 * train part (failures included at cost 1e10, as the tuner does) and is
 * scored on each held-out part (error-free records only): pairwise accuracy
 * and recall@30, averaged over workloads weighted by held-out size. The
 * random model's numbers are printed beside it for comparison.
 * `tessel costmodel features` prints the table of docs/FEATURES.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "ir/parse.h"
#include "ir/schedule/trace.h"
#include "cli/cli.h"
#include "tuner/database.h"

typedef struct wl_ent {
  const char *text;
  ir_func *func; /* NULL if it could not be built */
} wl_ent;

typedef struct rec_ent {
  int wl;         /* index into the workload table */
  uint64_t group;
  cm_features feat;
  double cost;
  bool valid;     /* error-free with runs */
  bool train;
} rec_ent;

static ir_func *workload_func(ts_arena *a, const char *text) {
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  if (ir_workload_from_spec(a, text, &f, &d) == TS_OK) return f;
  ts_diag_clear(&d);
  if (ir_parse_func(a, text, strlen(text), "<log>", &f, &d) == TS_OK) return f;
  return NULL;
}

static void eval_model(cm_model *m, rec_ent *r, int n, int nwl, double *acc, double *rec,
                       int *nscored) {
  double wacc = 0, wrec = 0;
  int tot = 0;
  cm_features *c = ts_malloc((size_t)(n ? n : 1) * sizeof *c);
  double *sc = ts_malloc((size_t)(n ? n : 1) * sizeof *sc);
  double *co = ts_malloc((size_t)(n ? n : 1) * sizeof *co);
  if (!c || !sc || !co) goto out;
  for (int w = 0; w < nwl; w++) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (r[i].wl == w && !r[i].train && r[i].valid) {
        c[k] = r[i].feat;
        co[k] = r[i].cost;
        k++;
      }
    if (k < 2) continue;
    if (cm_predict(m, c, k, sc, NULL) != TS_OK) continue;
    wacc += cm_pairwise_accuracy(sc, co, k) * k;
    wrec += cm_recall_at_k(sc, co, k, 30) * k;
    tot += k;
  }
out:
  *acc = tot ? wacc / tot : 0;
  *rec = tot ? wrec / tot : 0;
  *nscored = tot;
  ts_free(c);
  ts_free(sc);
  ts_free(co);
}

static int usage(FILE *f) {
  fprintf(f, "usage: tessel costmodel eval LOG [--json] [--seed N] [--train-frac F]\n"
             "       tessel costmodel features   (the feature table, markdown)\n"
             "  Replays each record's trace, extracts features, trains the XGBoost model on\n"
             "  a per-workload train split and reports pairwise accuracy and recall@30 on\n"
             "  the held-out records, beside the random model's.\n");
  return f == stdout ? 0 : 2;
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
  if (strcmp(argv[1], "eval")) {
    fprintf(stderr, "tessel costmodel: unknown subcommand '%s' (valid: eval, features)\n", argv[1]);
    return 2;
  }
  argc--;
  argv++;
  bool json = false;
  uint64_t seed = 1;
  double frac = 0.7;
  enum { OPT_JSON = 256, OPT_SEED, OPT_FRAC };
  static const struct option opts[] = {{"json", no_argument, 0, OPT_JSON},
                                       {"seed", required_argument, 0, OPT_SEED},
                                       {"train-frac", required_argument, 0, OPT_FRAC},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == OPT_JSON) json = true;
    else if (c == OPT_SEED) {
      if (!tun_cli_seed("costmodel eval", "--seed", optarg, &seed)) return 2;
    } else if (c == OPT_FRAC) {
      if (!tun_cli_real("costmodel eval", "--train-frac", optarg, 0, 1, &frac)) return 2;
    }
    else if (c == 'h') return usage(stdout);
    else return usage(stderr);
  }
  if (optind != argc - 1 || frac <= 0 || frac >= 1) return usage(stderr);
  const char *path = argv[optind];
  ts_diag d;
  ts_diag_clear(&d);
  int nwarn = 0;
  tun_db *db = tun_db_load(path, stderr, &nwarn, &d);
  if (!db) {
    fprintf(stderr, "tessel costmodel: %s\n", d.msg);
    return 2;
  }
  int n = tun_db_count(db);
  ts_arena *a = ts_arena_new();
  rec_ent *r = ts_calloc((size_t)(n ? n : 1), sizeof *r);
  wl_ent *wl = ts_calloc((size_t)(n ? n : 1), sizeof *wl);
  int nwl = 0, nr = 0, nskip = 0, rc = 0;
  if (!a || !r || !wl) {
    fprintf(stderr, "tessel costmodel: out of memory\n");
    rc = 1;
    goto out;
  }
  for (int i = 0; i < n; i++) {
    const tun_record *rec = tun_db_get(db, i);
    if (!rec->workload || !rec->trace || !rec->target) {
      nskip++;
      continue;
    }
    int w = -1;
    for (int j = 0; j < nwl; j++)
      if (!strcmp(wl[j].text, rec->workload)) w = j;
    if (w < 0) {
      w = nwl++;
      wl[w].text = rec->workload;
      wl[w].func = workload_func(a, rec->workload);
    }
    cg_target tg;
    if (!wl[w].func || cg_target_parse(rec->target, &tg, NULL) != TS_OK) {
      nskip++;
      continue;
    }
    sch_trace *tr = sch_trace_from_json(rec->trace, NULL);
    sch_traced *t = tr ? sch_trace_replay(tr, wl[w].func, 1, NULL) : NULL;
    sch_trace_free(tr);
    if (!t) {
      nskip++;
      continue;
    }
    rec_ent *e = &r[nr];
    if (cm_extract(sch_traced_func(t), &tg, &e->feat, NULL) != TS_OK || e->feat.nrows == 0) {
      cm_features_fini(&e->feat);
      sch_traced_free(t);
      nskip++;
      continue;
    }
    sch_traced_free(t);
    e->wl = w;
    e->group = strtoull(rec->workload_key, NULL, 16);
    e->valid = !rec->error && rec->nruns > 0;
    e->cost = e->valid ? tun_record_median(rec) : 1e10;
    if (!(e->cost > 0)) {
      cm_features_fini(&e->feat);
      nskip++;
      continue;
    }
    nr++;
  }
  /* per-workload seeded split */
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  int *idx = ts_malloc((size_t)(nr ? nr : 1) * sizeof *idx);
  cm_sample *s = ts_malloc((size_t)(nr ? nr : 1) * sizeof *s);
  if (!idx || !s) {
    ts_free(idx);
    ts_free(s);
    rc = 1;
    goto out;
  }
  int ntrain = 0;
  for (int w = 0; w < nwl; w++) {
    int k = 0;
    for (int i = 0; i < nr; i++)
      if (r[i].wl == w) idx[k++] = i;
    for (int i = k - 1; i > 0; i--) {
      int j = (int)ts_rng_below(&rng, (uint64_t)i + 1), tmp = idx[i];
      idx[i] = idx[j];
      idx[j] = tmp;
    }
    int kt = (int)(k * frac + 0.5);
    for (int i = 0; i < kt; i++) {
      r[idx[i]].train = true;
      s[ntrain++] = (cm_sample){r[idx[i]].group, &r[idx[i]].feat, r[idx[i]].cost};
    }
  }
  cm_model *xm = cm_xgb_new(0, seed, &d);
  cm_model *rm = cm_random_new(seed);
  double xa = 0, xr = 0, ra = 0, rr = 0;
  int scored = 0;
  if (!xm || !rm) {
    fprintf(stderr, "tessel costmodel: %s\n", d.msg);
    rc = 1;
  } else {
    cm_xgb_set_min_samples(xm, 1); /* evaluate the booster even on small logs */
    if (ntrain > 0 && cm_update(xm, s, ntrain, &d) != TS_OK) {
      fprintf(stderr, "tessel costmodel: training: %s\n", d.msg);
      rc = 1;
    } else {
      eval_model(xm, r, nr, nwl, &xa, &xr, &scored);
      eval_model(rm, r, nr, nwl, &ra, &rr, &scored);
    }
  }
  if (rc == 0) {
    if (json)
      printf("{\"records\": %d, \"used\": %d, \"skipped\": %d, \"workloads\": %d, \"train\": %d, "
             "\"heldout\": %d, \"pairwise_accuracy\": %.4f, \"recall_at_30\": %.4f, "
             "\"model\": \"xgb\", \"rounds\": %d, \"random\": {\"pairwise_accuracy\": %.4f, "
             "\"recall_at_30\": %.4f}}\n",
             n, nr, nskip, nwl, ntrain, scored, xa, xr, cm_xgb_last_rounds(xm), ra, rr);
    else {
      printf("records %d (used %d, skipped %d), workloads %d, train %d, held-out scored %d\n", n,
             nr, nskip, nwl, ntrain, scored);
      printf("  xgb     pairwise accuracy %.4f  recall@30 %.4f  (%d rounds)\n", xa, xr,
             cm_xgb_last_rounds(xm));
      printf("  random  pairwise accuracy %.4f  recall@30 %.4f\n", ra, rr);
    }
  }
  cm_model_free(xm);
  cm_model_free(rm);
  ts_free(idx);
  ts_free(s);
out:
  for (int i = 0; i < nr; i++) cm_features_fini(&r[i].feat);
  ts_free(r);
  ts_free(wl);
  if (a) ts_arena_free(a);
  tun_db_close(db);
  return rc;
}
