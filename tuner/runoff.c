/* tuner/runoff.c — the run-off (runoff.h): a task's best trial, default
 * schedule and best record of each library call re-timed back to back, interleaved, and
 * logged as run-off records the best-of selection prefers.
 *
 * Why: a tuning run picks a task's best from single measurements taken
 * minutes apart; on a loaded machine one lucky measurement wins (a kernel
 * timed 1.6x faster than the library call in tuning was slower back to
 * back). Interleaving the rounds gives every candidate the same load, and
 * the median of the rounds drops a round that a burst of load hit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir/struct.h"
#include "runtime/runtime.h"
#include "tessel_config.h"
#include "tuner/build.h"
#include "tuner/database.h"
#include "tuner/library.h"
#include "tuner/runoff.h"

#define RUNOFF_BUILD_TIMEOUT_S 120

typedef struct runoff_cand {
  const tun_record *src; /* the trial it re-times (in the open log) */
  char what[24];         /* "tuned", "default", "library dnnl", "library dnnl packed" */
  char path[96];
  bool ok;               /* built, and every round ran */
  double build_secs;
  double secs[TUN_RUNOFF_ROUNDS];
} runoff_cand;

static bool same_cand(const tun_record *a, const tun_record *b) {
  return a->trace_hash == b->trace_hash && !a->kind == !b->kind;
}

static bool usable_trial(const tun_record *r, int threads) {
  return !r->error && r->verified && r->nruns > 0 && r->threads == threads;
}

/* The candidates: the best generated kernel (a trial that is no library
 * call: when a library call is the best trial, the generated runner-up must
 * still run against it), the default schedule's (the task's first record at
 * this count), the best record of each library call (OpenBLAS's, oneDNN's and
 * the packed one differ by a few % on a projection, less than one trial's
 * noise on a loaded machine: each gets its back-to-back rounds); distinct. */
#define RUNOFF_LIBS (TUN_RUNOFF_MAX - 3)

static int pick(const tun_db *db, const char *key, const char *target, int threads, runoff_cand *c) {
  int cnt = 0, n = 0, nlib = 0;
  const int *idx = tun_db_indices_for(db, key, target, &cnt);
  const tun_record *best = NULL, *def = NULL, *top = NULL; /* top: the best trial of all, first */
  const tun_record *lib[RUNOFF_LIBS] = {0};
  char calls[RUNOFF_LIBS][40];
  bool first = true;
  for (int i = 0; i < cnt; i++) {
    const tun_record *r = tun_db_get(db, idx[i]);
    if (r->threads != threads) continue;
    if (first && !r->kind && usable_trial(r, threads)) def = r;
    first = false;
    if (!usable_trial(r, threads)) continue;
    if (!top || tun_record_mean(r) < tun_record_mean(top)) top = r;
    if (!r->kind && (!best || tun_record_mean(r) < tun_record_mean(best))) best = r;
    if (!r->kind) continue;
    char call[40];
    tun_record_library_call(r, call, sizeof call);
    int j = 0;
    while (j < nlib && strcmp(calls[j], call)) j++;
    if (j == nlib && nlib < RUNOFF_LIBS) snprintf(calls[nlib++], sizeof calls[0], "%s", call);
    if (j < nlib && (!lib[j] || tun_record_mean(r) < tun_record_mean(lib[j]))) lib[j] = r;
  }
  /* top is one of the others: c[0] is the choice before the run-off */
  const tun_record *want[TUN_RUNOFF_MAX + 1] = {top, best, def};
  for (int j = 0; j < nlib; j++) want[3 + j] = lib[j];
  for (int k = 0; k <= TUN_RUNOFF_MAX && n < TUN_RUNOFF_MAX; k++) {
    if (!want[k]) continue;
    bool dup = false;
    for (int j = 0; j < n; j++) dup |= same_cand(c[j].src, want[k]);
    if (dup) continue;
    memset(&c[n], 0, sizeof c[n]);
    c[n].src = want[k];
    char name[16] = "";
    if (tun_record_is_library(want[k], name, sizeof name))
      snprintf(c[n].what, sizeof c[n].what, "library %s%s", name,
               tun_library_packed_param(want[k]) >= 0 ? " packed" : "");
    else
      snprintf(c[n].what, sizeof c[n].what, "%s", want[k] == def ? "default" : "tuned");
    n++;
  }
  return n;
}

/* True when the latest run-off timed exactly these candidates. */
static bool already_run(const tun_db *db, const char *key, const char *target, int threads, const runoff_cand *c,
                        int n) {
  const tun_record *last[TUN_RUNOFF_MAX * 4];
  int nl = 0;
  if (!tun_db_runoff_last(db, key, target, threads, last, TUN_RUNOFF_MAX * 4, &nl)) return false;
  for (int i = 0; i < n; i++) {
    bool found = false;
    for (int j = 0; j < nl; j++) found |= same_cand(c[i].src, last[j]);
    if (!found) return false;
  }
  return true;
}

static void build_cands(const ir_func *f, const cg_target *t, const tun_device *dev, const char *dir, runoff_cand *c,
                        int n, FILE *progress) {
  for (int i = 0; i < n; i++) {
    snprintf(c[i].path, sizeof c[i].path, "%s/ro%d.%s", dir, i, dev->artifact_ext);
    ts_diag bd;
    ts_diag_clear(&bd);
    double t0 = tsrt_now();
    sch_traced *s = tun_record_schedule(c[i].src, f, t, &bd);
    c[i].ok = s && tun_build_shared_isolated(sch_traced_func(s), t, c[i].path, RUNOFF_BUILD_TIMEOUT_S, &bd) == TS_OK;
    c[i].build_secs = tsrt_now() - t0;
    sch_traced_free(s);
    if (!c[i].ok && progress) fprintf(progress, "run-off: %s drops out: %s\n", c[i].what, bd.msg);
  }
}

/* The rounds: every candidate once per round, the starting one rotating
 * so no candidate always runs first (or right after another). */
static void time_cands(const tun_device *dev, const tun_tune_opts *o, runoff_cand *c, int n, FILE *progress) {
  tsrt_measure_opts m = o->measure;
  m.repeat = 1;
  m.want_outputs = false; /* each was verified as a trial; the rebuilt kernel is the same schedule */
  m.slow_stop_s = 0;
  for (int r = 0; r < TUN_RUNOFF_ROUNDS; r++)
    for (int k = 0; k < n; k++) {
      runoff_cand *x = &c[(r + k) % n];
      if (!x->ok) continue;
      tsrt_measure_result res;
      dev->measure(x->path, &m, &res);
      if (res.status != TS_OK || res.repeat < 1) {
        x->ok = false;
        if (progress) fprintf(progress, "run-off: %s drops out: %s: %s\n", x->what, tsrt_status_name(res.status), res.error);
      } else {
        x->secs[r] = tsrt_result_median(&res);
      }
      tsrt_result_fini(&res);
    }
}

static ts_status log_cands(tun_db *db, const char *path, runoff_cand *c, int n, int id, ts_diag *d) {
  for (int i = 0; i < n; i++) {
    if (!c[i].ok) continue;
    tun_record rec = *c[i].src; /* its strings stay the log's: the append copies them */
    rec.runoff = id;
    rec.nruns = TUN_RUNOFF_ROUNDS;
    memcpy(rec.run_secs, c[i].secs, sizeof c[i].secs);
    rec.build_secs = c[i].build_secs;
    rec.time = (double)time(NULL);
    rec.version = (char *)TESSEL_VERSION;
    ts_diag ad;
    ts_diag_clear(&ad);
    ts_status st = tun_db_append(db, &rec, &ad);
    if (st) return ts_diag_set(d, st, "run-off: appending to %s: %s", path, ad.msg);
  }
  return TS_OK;
}

static double cand_time(const runoff_cand *c) {
  tun_record r;
  memset(&r, 0, sizeof r);
  r.nruns = TUN_RUNOFF_ROUNDS;
  r.runoff = 1;
  memcpy(r.run_secs, c->secs, sizeof c->secs);
  return tun_record_mean(&r);
}

/* Fills res from the timed candidates and prints the line. */
static void report(runoff_cand *c, int n, tun_runoff_result *res, FILE *progress, const char *task) {
  int w = -1, kern = -1;
  for (int i = 0; i < n; i++) {
    if (!c[i].ok) continue;
    double s = cand_time(&c[i]);
    if (w < 0 || s < cand_time(&c[w])) w = i;
    if (!strcmp(c[i].what, "default")) res->default_seconds = s;
    if (c[i].src->kind) { /* the fastest library call */
      if (res->lib_seconds <= 0 || s < res->lib_seconds) {
        res->lib_seconds = s;
        tun_record_is_library(c[i].src, res->lib, sizeof res->lib);
      }
    } else if (kern < 0 || s < cand_time(&c[kern])) {
      kern = i;
    }
  }
  if (kern >= 0) res->kernel_seconds = cand_time(&c[kern]);
  snprintf(res->was, sizeof res->was, "%s", c[0].what);
  res->trial_seconds = tun_record_mean(c[0].src);
  if (w < 0) return;
  res->best_seconds = cand_time(&c[w]);
  res->changed = w != 0;
  snprintf(res->winner, sizeof res->winner, "%s", c[w].what);
  if (!progress) return;
  fprintf(progress, "run-off%s%s: %d rounds:", task ? " " : "", task ? task : "", TUN_RUNOFF_ROUNDS);
  for (int i = 0; i < n; i++)
    if (c[i].ok)
      fprintf(progress, " %s %.4g ms (logged %.4g)%s", c[i].what, cand_time(&c[i]) * 1e3,
              tun_record_mean(c[i].src) * 1e3, i + 1 < n ? "," : "");
  fprintf(progress, " -> %s%s%s\n", c[w].what, res->changed ? ", choice changed from " : " stays",
          res->changed ? c[0].what : "");
}

ts_status tun_runoff(const ir_func *f, const cg_target *t, const tun_tune_opts *o, const char *label,
                     tun_runoff_result *res, ts_diag *d) {
  memset(res, 0, sizeof *res);
  double t0 = tsrt_now();
  if (o->rpc) {
    res->skipped = "not through boards";
    return TS_OK;
  }
  tun_db *db = tun_db_open(o->log_path, NULL, NULL, d);
  if (!db) return d && d->code ? d->code : TS_EIO;
  char key[17];
  ir_workload_key(f, key);
  int threads = tun_device_threads(t, o->measure.num_threads, false);
  const tun_device *dev = tun_device_of(t);
  runoff_cand c[TUN_RUNOFF_MAX];
  int n = pick(db, key, t->text, threads, c);
  ts_status st = TS_OK;
  char dir[32] = "/tmp/tessel-runoff-XXXXXX";
  if (n < 2) {
    res->skipped = "one candidate";
  } else if (already_run(db, key, t->text, threads, c, n)) {
    res->skipped = "already run off";
  } else if (!mkdtemp(dir)) {
    st = ts_diag_set(d, TS_EIO, "run-off: cannot create a temporary directory");
  } else {
    build_cands(f, t, dev, dir, c, n, o->progress);
    time_cands(dev, o, c, n, o->progress);
    for (int i = 0; i < n; i++) unlink(c[i].path);
    rmdir(dir);
    res->ncands = n;
    report(c, n, res, o->progress, label);
    st = log_cands(db, o->log_path, c, n, tun_db_runoff_next(db, key, t->text), d);
  }
  tun_db_close(db);
  res->wall_seconds = tsrt_now() - t0;
  return st;
}
