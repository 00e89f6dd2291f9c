/* tuner/tune.c — the tuning loop for one kernel (tune.h).
 *
 * Resume first: the log's records for this workload+target count toward the
 * budget (a met budget returns at once and appends nothing); their traces
 * are replayed to warm-start the cost model and join the search's measured
 * set (by the record's trace_hash, else the replayed function's hash), so a
 * run killed mid-batch re-measures nothing. Then batch after batch: the
 * search proposes candidates; all are built in parallel by forked children
 * (build_jobs, into a private temp dir; a child is killed after the build
 * timeout); each is measured alone (tsrt_measure_forked) and its outputs
 * verified against the interpreter; one record per candidate is appended
 * (the log fsyncs each) before the next one is measured; then the model is
 * updated with the batch.
 *
 * The default schedule is measured once per run as the baseline (the same
 * measurement options) and is not logged: it is not a search candidate, and
 * logging it would spend the trial budget on it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/struct.h"
#include "search/search.h"
#include "tessel_config.h"
#include "tuner/build.h"
#include "tuner/tune.h"
#include "tuner/verify.h"

#define BUILD_TIMEOUT_S 120

void tun_tune_opts_default(tun_tune_opts *o) {
  memset(o, 0, sizeof *o);
  o->trials = 64;
  o->batch = 64;
  o->model = "xgb";
  o->seed = 1;
  o->measure.repeat = 3;
  o->measure.min_repeat_ms = 100;
  o->measure.timeout_s = 30;
  o->measure.seed = 1;
  o->progress = stderr;
}

static int num_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static void fmt_dur(char *buf, size_t n, double s) {
  if (s < 0) s = 0;
  int t = (int)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, n, "%dh%02dm%02ds", t / 3600, t / 60 % 60, t % 60);
  else
    snprintf(buf, n, "%dm%02ds", t / 60, t % 60);
}

/* ---- parallel builds --------------------------------------------------------------- */
typedef struct build_slot {
  int done;       /* 1 once the child finished this one */
  double secs;
  char error[480];
} build_slot;

static void build_all(ir_func **funcs, int n, const cg_target *t, const char *dir, int jobs,
                      build_slot *slots) {
  if (jobs < 1) jobs = num_cores();
  if (jobs > n) jobs = n;
  pid_t pids[256];
  int np = 0;
  fflush(NULL);
  for (int j = 0; j < jobs && j < 256; j++) {
    pid_t p = fork();
    if (p == 0) {
      alarm(BUILD_TIMEOUT_S);
      for (int i = j; i < n; i += jobs) {
        if (!funcs[i]) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/cand%d.so", dir, i);
        ts_diag d;
        ts_diag_clear(&d);
        double t0 = tsrt_now();
        ts_status st = tun_build_shared(funcs[i], t, path, &d);
        slots[i].secs = tsrt_now() - t0;
        if (st) snprintf(slots[i].error, sizeof slots[i].error, "build: %.400s", d.msg);
        __atomic_store_n(&slots[i].done, 1, __ATOMIC_RELEASE);
      }
      _exit(0);
    }
    if (p > 0) pids[np++] = p;
  }
  if (np == 0) { /* fork failed: build here */
    for (int i = 0; i < n; i++) {
      if (!funcs[i]) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/cand%d.so", dir, i);
      ts_diag d;
      ts_diag_clear(&d);
      double t0 = tsrt_now();
      if (tun_build_shared(funcs[i], t, path, &d))
        snprintf(slots[i].error, sizeof slots[i].error, "build: %.400s", d.msg);
      slots[i].secs = tsrt_now() - t0;
      slots[i].done = 1;
    }
    return;
  }
  for (int k = 0; k < np; k++) {
    int ws;
    while (waitpid(pids[k], &ws, 0) < 0) {
    }
  }
  for (int i = 0; i < n; i++)
    if (funcs[i] && !slots[i].done)
      snprintf(slots[i].error, sizeof slots[i].error, "build: builder died or timed out after %d s",
               BUILD_TIMEOUT_S);
}

/* ---- records ----------------------------------------------------------------------- */
static void count_group(const tun_db *db, const char *key, const char *target, int *errors) {
  *errors = 0;
  for (int i = 0; i < tun_db_count(db); i++) {
    const tun_record *r = tun_db_get(db, i);
    if (strcmp(r->workload_key, key) || !r->target || strcmp(r->target, target)) continue;
    if (r->error) (*errors)++;
  }
}

static bool is_build_error(const char *err) { return err && !strncmp(err, "build", 5); }

/* Replays a logged or proposed trace; NULL if it no longer applies. */
static sch_traced *replay_json(const char *json, const ir_func *f, sch_trace **tr_out) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_trace *tr = sch_trace_from_json(json, &d);
  if (!tr) return NULL;
  sch_traced *ts = sch_trace_replay(tr, f, 1, &d);
  if (tr_out)
    *tr_out = tr;
  else
    sch_trace_free(tr);
  return ts;
}

static double measure_one(const char *path, const tsrt_measure_opts *mo, const ir_func *f,
                          tun_record *rec, char *errbuf, size_t errn) {
  tsrt_measure_result res;
  tsrt_measure_opts m = *mo;
  m.want_outputs = true;
  tsrt_measure_forked(path, &m, &res);
  double med = 0;
  errbuf[0] = 0;
  if (res.status != TSRT_OK) {
    snprintf(errbuf, errn, "run: %s: %s", tsrt_status_name(res.status), res.error);
  } else {
    med = tsrt_result_median(&res);
    if (rec) {
      rec->nruns = res.repeat < TUN_MAX_RUNS ? res.repeat : TUN_MAX_RUNS;
      for (int i = 0; i < rec->nruns; i++) rec->run_secs[i] = res.secs[i];
    }
    tun_verify_result vr;
    ts_diag d;
    ts_diag_clear(&d);
    ts_status vs = tun_verify(f, m.seed, res.outputs, res.outputs_bytes, &vr, &d);
    if (vs)
      snprintf(errbuf, errn, "verify: %.500s", d.msg);
    else if (!vr.matched)
      snprintf(errbuf, errn, "wrong output: %s", vr.detail);
    else if (rec)
      rec->verified = true;
  }
  tsrt_result_fini(&res);
  return errbuf[0] ? 0 : med;
}

/* ---- progress ------------------------------------------------------------------------ */
static void progress(const tun_tune_opts *o, int done, int total, double best_s, double flops,
                     double t0, double run_t0, int run_done, bool final) {
  FILE *out = o->progress;
  if (!out) return;
  double el = tsrt_now() - t0;
  double rate = run_done > 0 ? (tsrt_now() - run_t0) / run_done : 0;
  char e1[32], e2[32], best[64];
  fmt_dur(e1, sizeof e1, el);
  fmt_dur(e2, sizeof e2, rate * (total - done));
  if (best_s > 0 && flops > 0)
    snprintf(best, sizeof best, "%.1f GFLOP/s", flops / best_s * 1e-9);
  else if (best_s > 0)
    snprintf(best, sizeof best, "%.4g ms", best_s * 1e3);
  else
    snprintf(best, sizeof best, "-");
  if (o->progress_tty) {
    fprintf(out, "\rtrials %d/%d  best %s  elapsed %s  ETA %s\033[K", done, total, best, e1,
            run_done > 0 ? e2 : "?");
    if (final) fputc('\n', out);
  } else {
    fprintf(out, "trials %d/%d  best %s  elapsed %s  ETA %s\n", done, total, best, e1,
            run_done > 0 ? e2 : "?");
  }
  fflush(out);
}

/* ---- the loop ---------------------------------------------------------------------------- */
static void fill_result(const tun_db *db, const char *key, const char *target, double flops,
                        tun_tune_result *res) {
  res->trials = tun_db_count_for(db, key, target);
  count_group(db, key, target, &res->errors);
  const tun_record *b = tun_db_best(db, key, target);
  res->best_seconds = b ? tun_record_mean(b) : 0;
  res->best_gflops = res->best_seconds > 0 && flops > 0 ? flops / res->best_seconds * 1e-9 : 0;
}

ts_status tun_tune(const ir_func *f, const char *definition, double flops, const cg_target *t,
                   const tun_tune_opts *o, tun_tune_result *res, ts_diag *d) {
  memset(res, 0, sizeof *res);
  double t0 = tsrt_now();
  if (!o || !o->log_path || o->trials < 0)
    return ts_diag_set(d, TS_EINVAL, "tune: a log path and a trial budget are required");
  int batch = o->batch > 0 ? o->batch : 64;
  tun_db *db = tun_db_open(o->log_path, stderr, NULL, d);
  if (!db) return d && d->code ? d->code : TS_EIO;
  char key[17];
  ir_workload_key(f, key);
  const char *target = t->text;
  int have = tun_db_count_for(db, key, target);
  if (have >= o->trials) {
    fill_result(db, key, target, flops, res);
    res->wall_seconds = tsrt_now() - t0;
    tun_db_close(db);
    return TS_OK;
  }

  ts_status st = TS_OK;
  cm_model *model = NULL;
  srch_evo *evo = NULL;
  char dir[] = "/tmp/tessel-tune-XXXXXX";
  bool have_dir = mkdtemp(dir) != NULL;
  build_slot *slots = MAP_FAILED;
  if (!have_dir) {
    st = ts_diag_set(d, TS_EIO, "tune: cannot create a temporary directory");
    goto out;
  }
  if (o->model && !strcmp(o->model, "random"))
    model = cm_random_new(o->seed);
  else
    model = cm_xgb_new(0, o->seed, d);
  if (!model) {
    st = d && d->code ? d->code : TS_ENOMEM;
    goto out;
  }
  srch_evo_opts eo;
  srch_evo_opts_default(&eo);
  if (o->population > 0) eo.population = o->population;
  evo = srch_evo_new(f, t, &eo, o->seed, d);
  if (!evo) {
    st = d && d->code ? d->code : TS_EINVAL;
    goto out;
  }
  uint64_t group = ir_struct_hash_func(f);

  /* Resume: warm-start the model and the measured set from the log. */
  {
    int n = tun_db_count(db), ns = 0;
    cm_sample *smp = ts_calloc((size_t)(n > 0 ? n : 1), sizeof *smp);
    cm_features *fe = ts_calloc((size_t)(n > 0 ? n : 1), sizeof *fe);
    for (int i = 0; i < n && smp && fe; i++) {
      const tun_record *r = tun_db_get(db, i);
      if (strcmp(r->workload_key, key) || !r->target || strcmp(r->target, target) || !r->trace) continue;
      sch_trace *tr = NULL;
      sch_traced *ts = replay_json(r->trace, f, &tr);
      uint64_t h = r->trace_hash;
      if (ts) {
        if (!h) h = ir_struct_hash_func(sch_traced_func(ts));
        if (!is_build_error(r->error) &&
            cm_extract(sch_traced_func(ts), t, &fe[ns], NULL) == TS_OK) {
          smp[ns].group = group;
          smp[ns].feat = &fe[ns];
          smp[ns].cost = r->error ? 1e10 : tun_record_median(r);
          ns++;
        }
      }
      if (h) srch_evo_notify(evo, tr, h, r->error ? 1e10 : tun_record_mean(r), NULL);
      sch_traced_free(ts);
      sch_trace_free(tr);
    }
    if (ns) cm_update(model, smp, ns, NULL);
    for (int i = 0; i < ns; i++) cm_features_fini(&fe[i]);
    ts_free(smp);
    ts_free(fe);
  }

  /* Baseline: the default schedule, measured the same way (not logged). */
  {
    sch_traced *ts = NULL;
    ts_diag bd;
    ts_diag_clear(&bd);
    if (tun_schedule(f, NULL, t, &ts, &bd) == TS_OK) {
      char path[512], err[600];
      snprintf(path, sizeof path, "%s/baseline.so", dir);
      if (tun_build_shared(sch_traced_func(ts), t, path, &bd) == TS_OK) {
        double s = measure_one(path, &o->measure, f, NULL, err, sizeof err);
        if (s > 0) {
          res->baseline_seconds = s;
          res->baseline_gflops = flops > 0 ? flops / s * 1e-9 : 0;
        } else if (o->progress) {
          fprintf(o->progress, "tune: default schedule: %s\n", err);
        }
      }
      unlink(path);
      sch_traced_free(ts);
    }
  }

  slots = mmap(NULL, (size_t)batch * sizeof(build_slot), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) {
    st = ts_diag_set(d, TS_ENOMEM, "tune: cannot map the build slots");
    goto out;
  }
  double run_t0 = tsrt_now();
  int run_done = 0;
  const tun_record *bst = tun_db_best(db, key, target);
  double best_s = bst ? tun_record_mean(bst) : 0;
  progress(o, have, o->trials, best_s, flops, t0, run_t0, 0, false);
  while (have < o->trials) {
    int want = o->trials - have < batch ? o->trials - have : batch;
    srch_candidate *cands = NULL;
    int nc = 0;
    if ((st = srch_evo_next_batch(evo, model, want, &cands, &nc, d))) break;
    if (nc == 0) {
      if (o->progress) fprintf(o->progress, "%stune: the search space is exhausted\n", o->progress_tty ? "\n" : "");
      break;
    }
    ir_func **funcs = ts_calloc((size_t)nc, sizeof *funcs);
    sch_traced **tss = ts_calloc((size_t)nc, sizeof *tss);
    char **errs = ts_calloc((size_t)nc, sizeof *errs);
    cm_features *fe = ts_calloc((size_t)nc, sizeof *fe);
    cm_sample *smp = ts_calloc((size_t)nc, sizeof *smp);
    if (!funcs || !tss || !errs || !fe || !smp) {
      st = ts_diag_set(d, TS_ENOMEM, "tune: out of memory");
    } else {
      for (int i = 0; i < nc; i++) {
        ts_diag rd;
        ts_diag_clear(&rd);
        tss[i] = sch_trace_replay(cands[i].trace, f, 1, &rd);
        if (tss[i])
          funcs[i] = sch_traced_func(tss[i]);
        else {
          char b[600];
          snprintf(b, sizeof b, "replay: %.500s", rd.msg);
          errs[i] = ts_strdup(b);
        }
      }
      memset(slots, 0, (size_t)batch * sizeof(build_slot));
      build_all(funcs, nc, t, dir, o->build_jobs, slots);
      int nsmp = 0;
      for (int i = 0; i < nc; i++) {
        tun_record rec;
        memset(&rec, 0, sizeof rec);
        rec.schema = TUN_LOG_SCHEMA;
        memcpy(rec.workload_key, key, 17);
        rec.workload = (char *)definition;
        rec.target = (char *)target;
        char *tj = sch_trace_to_json(cands[i].trace);
        rec.trace = tj;
        rec.build_secs = slots[i].secs;
        rec.time = (double)time(NULL);
        rec.version = (char *)TESSEL_VERSION;
        rec.trace_hash = cands[i].hash;
        char err[600] = "";
        char path[512];
        snprintf(path, sizeof path, "%s/cand%d.so", dir, i);
        if (errs[i])
          snprintf(err, sizeof err, "%s", errs[i]);
        else if (slots[i].error[0])
          snprintf(err, sizeof err, "%s", slots[i].error);
        else
          measure_one(path, &o->measure, f, &rec, err, sizeof err);
        unlink(path);
        rec.error = err[0] ? err : NULL;
        if (rec.error) rec.verified = false;
        ts_diag ad;
        ts_diag_clear(&ad);
        ts_status as = tun_db_append(db, &rec, &ad);
        double mean = rec.error ? 1e10 : tun_record_mean(&rec);
        srch_evo_notify(evo, cands[i].trace, cands[i].hash, mean, NULL);
        if (tss[i] && !is_build_error(rec.error) && !errs[i] &&
            cm_extract(funcs[i], t, &fe[nsmp], NULL) == TS_OK) {
          smp[nsmp].group = group;
          smp[nsmp].feat = &fe[nsmp];
          smp[nsmp].cost = rec.error ? 1e10 : tun_record_median(&rec);
          nsmp++;
        }
        ts_free(tj);
        if (as) {
          st = ts_diag_set(d, as, "tune: appending to %s: %s", o->log_path, ad.msg);
          break;
        }
        have++;
        run_done++;
        res->new_trials++;
        if (!rec.error && (best_s <= 0 || mean < best_s)) best_s = mean;
        if (o->progress_tty) progress(o, have, o->trials, best_s, flops, t0, run_t0, run_done, false);
      }
      if (!st && nsmp) {
        ts_diag ud;
        ts_diag_clear(&ud);
        if (cm_update(model, smp, nsmp, &ud) && o->progress)
          fprintf(o->progress, "%stune: cost model update: %s\n", o->progress_tty ? "\n" : "", ud.msg);
      }
      for (int i = 0; i < nsmp; i++) cm_features_fini(&fe[i]);
      if (!o->progress_tty) progress(o, have, o->trials, best_s, flops, t0, run_t0, run_done, false);
    }
    for (int i = 0; i < nc; i++) {
      sch_traced_free(tss ? tss[i] : NULL);
      if (errs) ts_free(errs[i]);
      srch_candidate_fini(&cands[i]);
    }
    ts_free(cands);
    ts_free(funcs);
    ts_free(tss);
    ts_free(errs);
    ts_free(fe);
    ts_free(smp);
    if (st) break;
  }
  if (o->progress_tty) progress(o, have, o->trials, best_s, flops, t0, run_t0, run_done, true);

out:
  fill_result(db, key, target, flops, res);
  res->wall_seconds = tsrt_now() - t0;
  if (slots != MAP_FAILED) munmap(slots, (size_t)batch * sizeof(build_slot));
  if (have_dir) rmdir(dir);
  srch_evo_free(evo);
  cm_model_free(model);
  tun_db_close(db);
  return st;
}
