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
 * The default schedule (tun_schedule_opts with pack_weights: a model
 * build's, int8 weights packed for their kernel) is the first candidate of a
 * workload's tuning: measured, verified and logged like the others (one
 * trial of the budget), so the search starts from it and the log's best is
 * never worse than the default. A rerun finds it in the log by its scheduled-function
 * hash and takes the baseline from that record instead of measuring again.
 * Next come the library candidates (tuner/library.h): each library call
 * that covers the task, one trial each, logged as a library record (a rerun
 * finds it by its parameters' hash and does not measure it again). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir/schedule/layout.h"
#include "ir/struct.h"
#include "search/search.h"
#include "tessel_config.h"
#include "tuner/build.h"
#include "tuner/library.h"
#include "tuner/rpc_runner.h"
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
  o->slow_cutoff = 10;
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
/* Candidate i's artifact in dir, named with t's device extension. */
static void cand_path(char *buf, size_t n, const char *dir, int i, const cg_target *t) {
  snprintf(buf, n, "%s/cand%d.%s", dir, i, tun_device_of(t)->artifact_ext);
}

typedef struct build_slot {
  int done;       /* 1 once the child finished this one */
  double secs;
  char error[480];
} build_slot;

/* Forks one builder: candidates from, from + jobs, ... in order (those not
 * done yet); returns its pid, or -1 if fork failed. */
static pid_t fork_builder(ir_func **funcs, int n, const cg_target *t, const char *dir, int jobs,
                          build_slot *slots, int from) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    for (int i = from; i < n; i += jobs) {
      if (!funcs[i] || __atomic_load_n(&slots[i].done, __ATOMIC_ACQUIRE)) continue;
      /* the limit is per candidate: one alarm for the child's whole share
       * (n/jobs builds) lost every build after the 120th second on a
       * loaded machine (10-60 of 128 trials in bench/cost_model_curve.sh) */
      alarm(BUILD_TIMEOUT_S);
      char path[512];
      cand_path(path, sizeof path, dir, i, t);
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
  return p;
}

/* Forks the builders (jobs children, candidate i in child i % jobs, in
 * order); returns how many were forked (0: fork failed, nothing built). */
static int build_start(ir_func **funcs, int n, const cg_target *t, const char *dir, int jobs,
                       build_slot *slots, pid_t *pids) {
  if (jobs < 1) jobs = num_cores();
  if (jobs > n) jobs = n;
  int np = 0;
  for (int j = 0; j < jobs && j < 256; j++) {
    pid_t p = fork_builder(funcs, n, t, dir, jobs, slots, j);
    if (p > 0) pids[np++] = p;
  }
  return np;
}

/* After every builder exited: a candidate never finished gets an error. */
static void build_mark_lost(ir_func **funcs, int n, build_slot *slots) {
  for (int i = 0; i < n; i++)
    if (funcs[i] && !__atomic_load_n(&slots[i].done, __ATOMIC_ACQUIRE)) {
      snprintf(slots[i].error, sizeof slots[i].error, "build: builder died or timed out after %d s",
               BUILD_TIMEOUT_S);
      __atomic_store_n(&slots[i].done, 1, __ATOMIC_RELEASE);
    }
}

static void build_here(ir_func **funcs, int n, const cg_target *t, const char *dir, build_slot *slots) {
  for (int i = 0; i < n; i++) {
    if (!funcs[i]) continue;
    char path[512];
    cand_path(path, sizeof path, dir, i, t);
    ts_diag d;
    ts_diag_clear(&d);
    double t0 = tsrt_now();
    if (tun_build_shared(funcs[i], t, path, &d))
      snprintf(slots[i].error, sizeof slots[i].error, "build: %.400s", d.msg);
    slots[i].secs = tsrt_now() - t0;
    slots[i].done = 1;
  }
}

static void build_all(ir_func **funcs, int n, const cg_target *t, const char *dir, int jobs,
                      build_slot *slots) {
  pid_t pids[256];
  int np = build_start(funcs, n, t, dir, jobs, slots, pids);
  if (np == 0) { /* fork failed: build here */
    build_here(funcs, n, t, dir, slots);
    return;
  }
  if (jobs < 1) jobs = num_cores();
  if (jobs > n) jobs = n;
  if (jobs > 256) jobs = 256;
  /* A builder that dies (a crash, or the alarm of a candidate over the
   * limit) takes only the candidate it was building: that one gets the
   * error, and a new builder continues with the rest of its share. */
  while (np > 0) {
    for (int k = 0; k < np; k++) {
      int ws;
      while (waitpid(pids[k], &ws, 0) < 0) {
      }
    }
    np = 0;
    for (int j = 0; j < jobs; j++) {
      int i = j;
      while (i < n && (!funcs[i] || __atomic_load_n(&slots[i].done, __ATOMIC_ACQUIRE))) i += jobs;
      if (i >= n) continue;
      snprintf(slots[i].error, sizeof slots[i].error, "build: builder died or timed out after %d s",
               BUILD_TIMEOUT_S);
      __atomic_store_n(&slots[i].done, 1, __ATOMIC_RELEASE);
      int k = i + jobs;
      while (k < n && !funcs[k]) k += jobs;
      if (k >= n) continue;
      pid_t p = fork_builder(funcs, n, t, dir, jobs, slots, k);
      if (p > 0) pids[np++] = p;
    }
  }
  build_mark_lost(funcs, n, slots);
}

/* ---- records ----------------------------------------------------------------------- */
static void count_group(const tun_db *db, const char *key, const char *target, int threads, int *errors) {
  *errors = 0;
  for (int i = 0; i < tun_db_count(db); i++) {
    const tun_record *r = tun_db_get(db, i);
    if (strcmp(r->workload_key, key) || !r->target || strcmp(r->target, target) || r->threads != threads) continue;
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

/* Judges a measurement (local or from a board): a kernel error, wrong
 * output, or the median with rec's runs filled and verified set. */
static double judge_result(tsrt_measure_result *res, uint64_t seed, const ir_func *f, tun_record *rec,
                           char *errbuf, size_t errn, double *verify_s) {
  double med = 0;
  errbuf[0] = 0;
  if (res->status != TS_OK) {
    snprintf(errbuf, errn, "run: %s: %s", tsrt_status_name(res->status), res->error);
  } else {
    med = tsrt_result_median(res);
    if (rec) {
      rec->nruns = res->repeat < TUN_MAX_RUNS ? res->repeat : TUN_MAX_RUNS;
      for (int i = 0; i < rec->nruns; i++) rec->run_secs[i] = res->secs[i];
    }
    tun_verify_result vr;
    ts_diag d;
    ts_diag_clear(&d);
    double vt0 = tsrt_now();
    ts_status vs = tun_verify(f, seed, res->outputs, res->outputs_bytes, &vr, &d);
    if (verify_s) *verify_s += tsrt_now() - vt0;
    if (vs)
      snprintf(errbuf, errn, "verify: %.500s", d.msg);
    else if (!vr.matched)
      snprintf(errbuf, errn, "wrong output: %s", vr.detail);
    else if (rec)
      rec->verified = true;
  }
  return errbuf[0] ? 0 : med;
}

/* What a candidate's kernel is verified against: f, or f with the weight
 * layout rewrites of its trace (TransformLayout, docs/LAYOUT.md) applied,
 * since that kernel reads its random inputs in the packed layout. In a. */
static const ir_func *verify_ref(ts_arena *a, const ir_func *f, const sch_trace *tr) {
  const ir_func *r = tr ? sch_layout_reference(a, f, tr, NULL) : NULL;
  return r ? r : f;
}

static double measure_one(const tun_device *dev, const char *path, const tsrt_measure_opts *mo, const ir_func *f,
                          tun_record *rec, char *errbuf, size_t errn, tun_tune_result *tr) {
  tsrt_measure_result res;
  tsrt_measure_opts m = *mo;
  m.want_outputs = true;
  double mt0 = tsrt_now();
  dev->measure(path, &m, &res);
  if (tr) tr->measure_seconds += tsrt_now() - mt0;
  double med = judge_result(&res, m.seed, f, rec, errbuf, errn, tr ? &tr->verify_seconds : NULL);
  tsrt_result_fini(&res);
  return med;
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

/* ---- one run, one batch ------------------------------------------------------------ */
/* What one tun_tune call works with, shared by its steps. */
typedef struct tune_run {
  const ir_func *f;
  const char *definition;
  char key[17];
  const char *target;
  const cg_target *t;
  const tun_device *dev;
  const tun_tune_opts *o;
  tun_db *db;
  srch_evo *evo;
  cm_model *model;
  uint64_t group;
  int have, run_done;
  double best_s;
  tun_tune_result *res;
  double flops, t0, run_t0;
  char dir[32];
  build_slot *slots;
  int batch;
  int threads;          /* the pool size its kernels are measured with (0: unknown, a board's own) */
} tune_run;

/* One batch of candidates (n of them, index-aligned arrays). */
typedef struct batch_ctx {
  tune_run *r;
  srch_candidate *cands;
  ir_func **funcs;
  sch_traced **tss;
  char **errs;
  cm_features *fe;
  cm_sample *smp;
  int nsmp;
} batch_ctx;

/* The measurement options of the next candidate: the run's, with the
 * slow-candidate cutoff from the best time so far (local and remote alike). */
static tsrt_measure_opts cand_measure_opts(const tune_run *r) {
  tsrt_measure_opts mo = r->o->measure;
  mo.want_outputs = true;
  /* not below min_repeat_ms: a warm-up also pays one-time costs
   * (the pool's start), which only matter for fast kernels */
  if (r->o->slow_cutoff > 0 && r->best_s > 0) {
    mo.slow_stop_s = r->o->slow_cutoff * r->best_s;
    if (mo.slow_stop_s < mo.min_repeat_ms * 1e-3) mo.slow_stop_s = mo.min_repeat_ms * 1e-3;
  }
  return mo;
}

/* Appends candidate i's record (rec holds its runs and verified flag when
 * measured; err its error or ""), tells the search, keeps a model sample. */
static ts_status log_candidate(batch_ctx *c, int i, tun_record *rec, const char *err, ts_diag *d) {
  rec->schema = TUN_LOG_SCHEMA;
  memcpy(rec->workload_key, c->r->key, 17);
  rec->workload = (char *)c->r->definition;
  rec->target = (char *)c->r->target;
  char *tj = sch_trace_to_json(c->cands[i].trace);
  rec->trace = tj;
  rec->build_secs = c->r->slots[i].secs;
  rec->time = (double)time(NULL);
  rec->version = (char *)TESSEL_VERSION;
  rec->trace_hash = c->cands[i].hash;
  rec->graph_opts = (char *)c->r->o->graph_opts;
  rec->threads = c->r->threads;
  rec->error = err && err[0] ? (char *)err : NULL;
  if (rec->error) rec->verified = false;
  ts_diag ad;
  ts_diag_clear(&ad);
  ts_status as = tun_db_append(c->r->db, rec, &ad);
  double mean = rec->error ? 1e10 : tun_record_mean(rec);
  srch_evo_notify(c->r->evo, c->cands[i].trace, c->cands[i].hash, mean, NULL);
  double ft0 = tsrt_now();
  bool feat_ok = c->tss[i] && !is_build_error(rec->error) && !c->errs[i] &&
                 cm_extract(c->funcs[i], c->r->t, &c->fe[c->nsmp], NULL) == TS_OK;
  c->r->res->search_seconds += tsrt_now() - ft0;
  if (feat_ok) {
    c->smp[c->nsmp].group = c->r->group;
    c->smp[c->nsmp].feat = &c->fe[c->nsmp];
    c->smp[c->nsmp].cost = rec->error ? 1e10 : tun_record_median(rec);
    c->nsmp++;
  }
  ts_free(tj);
  if (as) return ts_diag_set(d, as, "tune: appending to %s: %s", c->r->o->log_path, ad.msg);
  (c->r->have)++;
  (c->r->run_done)++;
  c->r->res->new_trials++;
  if (!rec->error && (c->r->best_s <= 0 || mean < c->r->best_s)) c->r->best_s = mean;
  if (c->r->o->progress_tty)
    progress(c->r->o, c->r->have, c->r->o->trials, c->r->best_s, c->r->flops, c->r->t0, c->r->run_t0, c->r->run_done, false);
  return TS_OK;
}

/* The RPC runner's batch: builders run (forked, on the host, for the board's
 * triple) while the boards measure: a candidate is submitted as soon as its
 * build is done, and results are logged as they come back (any order). A
 * candidate lost to board failures (every try's board died) is not logged. */
static ts_status rpc_batch(batch_ctx *c, int nc, const char *dir, ts_diag *d) {
  const tun_tune_opts *o = c->r->o;
  pid_t pids[256];
  int np = build_start(c->funcs, nc, c->r->t, dir, o->build_jobs, c->r->slots, pids);
  if (np == 0) build_here(c->funcs, nc, c->r->t, dir, c->r->slots);
  char *handled = ts_calloc((size_t)nc, 1);
  if (!handled) return ts_diag_set(d, TS_ENOMEM, "tune: out of memory");
  int left = nc, alive = np, lost = 0;
  ts_status st = TS_OK;
  uint64_t vseed = o->measure.seed;
  while (left > 0 && !st) {
    /* reap builders; once all are gone, unfinished builds are errors */
    for (int k = 0; k < np; k++) {
      int ws;
      if (pids[k] > 0 && waitpid(pids[k], &ws, WNOHANG) == pids[k]) {
        pids[k] = 0;
        alive--;
      }
    }
    if (alive == 0) build_mark_lost(c->funcs, nc, c->r->slots);
    for (int i = 0; i < nc && !st; i++) {
      if (handled[i]) continue;
      char path[512];
      cand_path(path, sizeof path, dir, i, c->r->t);
      if (c->errs[i] || (__atomic_load_n(&c->r->slots[i].done, __ATOMIC_ACQUIRE) && c->r->slots[i].error[0])) {
        tun_record rec;
        memset(&rec, 0, sizeof rec);
        handled[i] = 2;
        left--;
        unlink(path);
        st = log_candidate(c, i, &rec, c->errs[i] ? c->errs[i] : c->r->slots[i].error, d);
      } else if (__atomic_load_n(&c->r->slots[i].done, __ATOMIC_ACQUIRE)) {
        handled[i] = 1;
        ts_diag sd;
        ts_diag_clear(&sd);
        tsrt_measure_opts m = cand_measure_opts(c->r);
        if (tun_rpc_submit(o->rpc, i, path, &m, &sd)) {
          tun_record rec;
          memset(&rec, 0, sizeof rec);
          handled[i] = 2;
          left--;
          char err[600];
          snprintf(err, sizeof err, "build: %.500s", sd.msg);
          st = log_candidate(c, i, &rec, err, d);
        }
        unlink(path);
      }
    }
    if (st) break;
    tun_rpc_done dn;
    ts_diag nd;
    ts_diag_clear(&nd);
    ts_status ns = tun_rpc_next(o->rpc, alive > 0 ? 0.02 : 0.5, &dn, &nd);
    if (ns == TS_ETIMEOUT || ns == TS_ENOTFOUND) {
      if (ns == TS_ENOTFOUND && alive > 0) usleep(20000);
      continue;
    }
    if (ns) {
      st = ts_diag_set(d, ns, "tune: %s", nd.msg);
      break;
    }
    if (dn.tag < 0 || dn.tag >= nc || handled[dn.tag] != 1) { /* not ours: cannot happen */
      tsrt_result_fini(&dn.res);
      continue;
    }
    handled[dn.tag] = 2;
    left--;
    if (dn.lost) {
      lost++;
      if (o->progress)
        fprintf(o->progress, "%stune: candidate lost to board failures, not logged: %s\n",
                o->progress_tty ? "\n" : "", dn.error);
      continue;
    }
    tun_record rec;
    memset(&rec, 0, sizeof rec);
    char err[600];
    ts_arena ra;
    ts_arena_init(&ra);
    judge_result(&dn.res, vseed, verify_ref(&ra, c->r->f, c->cands[dn.tag].trace), &rec, err, sizeof err,
                 &c->r->res->verify_seconds);
    ts_arena_fini(&ra);
    tsrt_result_fini(&dn.res);
    st = log_candidate(c, dn.tag, &rec, err, d);
  }
  /* on an error: leave nothing running */
  for (int k = 0; k < np; k++)
    if (pids[k] > 0) {
      kill(pids[k], SIGKILL);
      waitpid(pids[k], NULL, 0);
    }
  while (st && tun_rpc_outstanding(o->rpc) > 0) {
    tun_rpc_done dn;
    if (tun_rpc_next(o->rpc, 1, &dn, NULL) != TS_OK) break;
    tsrt_result_fini(&dn.res);
  }
  for (int i = 0; i < nc; i++) {
    char path[512];
    cand_path(path, sizeof path, dir, i, c->r->t);
    unlink(path);
  }
  ts_free(handled);
  (void)lost;
  return st;
}

/* The local runner's batch: every candidate built first (both cores), then
 * each measured alone, verified and logged in order. */
static ts_status local_batch(batch_ctx *c, int nc, const char *dir, ts_diag *d) {
  const tun_tune_opts *o = c->r->o;
  ts_status st = TS_OK;
  double bt1 = tsrt_now();
  build_all(c->funcs, nc, c->r->t, dir, o->build_jobs, c->r->slots);
  c->r->res->build_seconds += tsrt_now() - bt1;
  for (int i = 0; i < nc && !st; i++) {
    char err[600] = "";
    char path[512];
    cand_path(path, sizeof path, dir, i, c->r->t);
    tun_record rec;
    memset(&rec, 0, sizeof rec);
    if (c->errs[i])
      snprintf(err, sizeof err, "%s", c->errs[i]);
    else if (c->r->slots[i].error[0])
      snprintf(err, sizeof err, "%s", c->r->slots[i].error);
    else {
      tsrt_measure_opts mo = cand_measure_opts(c->r);
      ts_arena ra;
      ts_arena_init(&ra);
      measure_one(c->r->dev, path, &mo, verify_ref(&ra, c->r->f, c->cands[i].trace), &rec, err, sizeof err, c->r->res);
      ts_arena_fini(&ra);
    }
    unlink(path);
    st = log_candidate(c, i, &rec, err, d);
  }
  return st;
}

/* ---- the loop ---------------------------------------------------------------------------- */
static void fill_result(const tun_db *db, const char *key, const char *target, int threads, double flops,
                        tun_tune_result *res) {
  res->trials = tun_db_count_at(db, key, target, threads);
  res->threads = threads;
  count_group(db, key, target, threads, &res->errors);
  const tun_record *b = tun_db_best_at(db, key, target, threads);
  res->best_seconds = b ? tun_record_mean(b) : 0;
  res->best_gflops = res->best_seconds > 0 && flops > 0 ? flops / res->best_seconds * 1e-9 : 0;
  tun_library_split(db, key, target, threads, &res->lib_seconds, res->lib, sizeof res->lib, &res->kernel_seconds);
}

/* The cost model and the search of a run (r->model, r->evo). */
static ts_status run_setup(tune_run *r, ts_diag *d) {
  const tun_tune_opts *o = r->o;
  if (o->model && !strcmp(o->model, "random")) {
    r->model = cm_random_new(o->seed);
  } else {
    if (cm_pretrained_open(o->cost_model, r->t, o->seed, o->progress ? o->progress : stderr, &r->model, d))
      return d && d->code ? d->code : TS_EINVAL;
    if (!r->model) r->model = cm_xgb_new(0, o->seed, d);
    if (r->model && o->xgb_min_samples > 0) cm_xgb_set_min_samples(r->model, o->xgb_min_samples);
    if (r->model && o->xgb_max_rounds > 0) cm_xgb_set_max_rounds(r->model, o->xgb_max_rounds);
  }
  if (!r->model) return d && d->code ? d->code : TS_ENOMEM;
  srch_evo_opts eo;
  srch_evo_opts_default(&eo);
  if (o->population > 0) eo.population = o->population;
  if (o->first_batch > 0) eo.first_batch = o->first_batch;
  eo.space = o->space;
  eo.postproc = o->postproc;
  if (o->gpu_regcheck) eo.postproc.gpu_regcheck = r->dev->regcheck;
  r->evo = srch_evo_new(r->f, r->t, &eo, o->seed, d);
  if (!r->evo) return d && d->code ? d->code : TS_EINVAL;
  r->group = ir_struct_hash_func(r->f);
  return TS_OK;
}

/* Resume: warm-start the model and the measured set from the log. */
static void run_resume(tune_run *r) {
  double rt0 = tsrt_now();
  int n = tun_db_count(r->db), ns = 0;
  cm_sample *smp = ts_calloc((size_t)(n > 0 ? n : 1), sizeof *smp);
  cm_features *fe = ts_calloc((size_t)(n > 0 ? n : 1), sizeof *fe);
  for (int i = 0; i < n && smp && fe; i++) {
    const tun_record *rec = tun_db_get(r->db, i);
    if (strcmp(rec->workload_key, r->key) || !rec->target || strcmp(rec->target, r->target) || !rec->trace ||
        rec->threads != r->threads || /* another thread count's times would mislead the model */
        rec->runoff > 0)              /* a re-timing of a trial the model has */
      continue;
    sch_trace *tr = NULL;
    sch_traced *ts = replay_json(rec->trace, r->f, &tr);
    uint64_t h = rec->trace_hash;
    if (ts) {
      if (!h) h = ir_struct_hash_func(sch_traced_func(ts));
      if (!is_build_error(rec->error) && cm_extract(sch_traced_func(ts), r->t, &fe[ns], NULL) == TS_OK) {
        smp[ns].group = r->group;
        smp[ns].feat = &fe[ns];
        smp[ns].cost = rec->error ? 1e10 : tun_record_median(rec);
        ns++;
      }
    }
    if (h) srch_evo_notify(r->evo, tr, h, rec->error ? 1e10 : tun_record_mean(rec), NULL);
    sch_traced_free(ts);
    sch_trace_free(tr);
  }
  double ut0 = tsrt_now();
  if (ns) cm_update(r->model, smp, ns, NULL);
  r->res->train_seconds += tsrt_now() - ut0;
  rt0 += tsrt_now() - ut0; /* resume_seconds leaves the training out */
  for (int i = 0; i < ns; i++) cm_features_fini(&fe[i]);
  ts_free(smp);
  ts_free(fe);
  r->res->resume_seconds = tsrt_now() - rt0;
}

static void set_baseline(tune_run *r, double secs) {
  r->res->baseline_seconds = secs;
  r->res->baseline_gflops = r->flops > 0 ? r->flops / secs * 1e-9 : 0;
}

/* Baseline: the default schedule. It is the run's first candidate: built,
 * measured, verified and logged like any other (one trial of the budget), so
 * the measured set, the model and "best" all start from it and a tuned
 * build is never slower than the default. A log that already holds it (same
 * scheduled-function hash) gives the baseline without measuring again: then
 * NULL, else the schedule to measure (*hash its hash). */
static sch_traced *run_baseline_lookup(tune_run *r, uint64_t *hash) {
  sch_traced *def = NULL;
  ts_diag bd;
  ts_diag_clear(&bd);
  /* the default a model build makes of this kernel: its layout-free
   * weights packed where the int8 kernel wants them (as the search's
   * candidates do), not the unpacked one a plain `tessel build` makes */
  tun_default_opts dop = r->o->defaults;
  dop.pack_weights = true;
  if (tun_schedule_opts(r->f, NULL, r->t, &dop, &def, &bd) != TS_OK) {
    if (r->o->progress) fprintf(r->o->progress, "tune: default schedule: %s\n", bd.msg);
    return NULL;
  }
  *hash = ir_struct_hash_func(sch_traced_func(def));
  int cnt = 0;
  const int *idx = tun_db_indices_for(r->db, r->key, r->target, &cnt);
  for (int k = 0; k < cnt; k++) {
    const tun_record *rec = tun_db_get(r->db, idx[k]);
    if (rec->trace_hash == *hash && !rec->error && rec->verified && rec->threads == r->threads) {
      set_baseline(r, tun_record_mean(rec));
      break;
    }
  }
  if (r->res->baseline_seconds > 0 || tun_db_has_trace_at(r->db, r->key, r->target, *hash, r->threads)) {
    sch_traced_free(def); /* logged before (maybe as an error): not again */
    return NULL;
  }
  return def;
}

/* Measures one batch (local or remote) and updates the model with it. */
static ts_status run_measure(tune_run *r, batch_ctx *bc, int nc, ts_diag *d) {
  memset(r->slots, 0, (size_t)r->batch * sizeof(build_slot));
  ts_status st = !r->o->rpc ? local_batch(bc, nc, r->dir, d) : rpc_batch(bc, nc, r->dir, d);
  if (!st && bc->nsmp) {
    ts_diag ud;
    ts_diag_clear(&ud);
    double ut1 = tsrt_now();
    ts_status us = cm_update(r->model, bc->smp, bc->nsmp, &ud);
    r->res->train_seconds += tsrt_now() - ut1;
    if (us && r->o->progress)
      fprintf(r->o->progress, "%stune: cost model update: %s\n", r->o->progress_tty ? "\n" : "", ud.msg);
  }
  for (int i = 0; i < bc->nsmp; i++) cm_features_fini(&bc->fe[i]);
  return st;
}

/* The default schedule def (hash def_hash) as the run's first candidate. */
static ts_status run_default(tune_run *r, sch_traced *def, uint64_t def_hash, ts_diag *d) {
  srch_candidate dc = {(sch_trace *)sch_traced_trace(def), def_hash, 0};
  ir_func *df = sch_traced_func(def);
  char *derr = NULL;
  cm_features dfe;
  cm_sample dsmp;
  memset(&dfe, 0, sizeof dfe);
  memset(&dsmp, 0, sizeof dsmp);
  batch_ctx bc = {r, &dc, &df, &def, &derr, &dfe, &dsmp, 0};
  double dt0 = tsrt_now();
  ts_status st = run_measure(r, &bc, 1, d);
  const tun_record *last = tun_db_count(r->db) > 0 ? tun_db_get(r->db, tun_db_count(r->db) - 1) : NULL;
  if (!st && last && last->trace_hash == def_hash && !last->error)
    set_baseline(r, tun_record_mean(last));
  else if (!st && last && last->trace_hash == def_hash && r->o->progress)
    fprintf(r->o->progress, "%stune: default schedule: %s\n", r->o->progress_tty ? "\n" : "", last->error);
  r->res->baseline_seconds_wall += tsrt_now() - dt0;
  return st;
}

/* Library candidate c: built, measured and verified here, logged as a
 * library record (an error record when any step fails). */
static ts_status run_library_one(tune_run *r, const tun_lib_cand *c, ts_diag *d) {
  char err[700] = "", path[96];
  tun_record rec;
  memset(&rec, 0, sizeof rec);
  snprintf(path, sizeof path, "%s/lib.%s", r->dir, r->dev->artifact_ext);
  ts_diag ld;
  ts_diag_clear(&ld);
  double bt0 = tsrt_now();
  sch_traced *s = tun_library_schedule(r->f, r->t, c, &ld);
  if (!s)
    snprintf(err, sizeof err, "replay: library: %.600s", ld.msg);
  else if (tun_build_shared_isolated(sch_traced_func(s), r->t, path, BUILD_TIMEOUT_S, &ld))
    snprintf(err, sizeof err, "build: %.600s", ld.msg);
  rec.build_secs = tsrt_now() - bt0;
  sch_traced_free(s);
  if (!err[0]) {
    tsrt_measure_opts mo = cand_measure_opts(r);
    mo.slow_stop_s = 0; /* the library is timed in full: it is what the table compares against */
    measure_one(r->dev, path, &mo, r->f, &rec, err, sizeof err, r->res);
  }
  unlink(path);
  rec.schema = TUN_LOG_SCHEMA;
  memcpy(rec.workload_key, r->key, 17);
  rec.workload = (char *)r->definition;
  rec.target = (char *)r->target;
  rec.time = (double)time(NULL);
  rec.version = (char *)TESSEL_VERSION;
  rec.trace_hash = c->hash;
  rec.graph_opts = (char *)r->o->graph_opts;
  rec.threads = r->threads;
  rec.kind = (char *)TUN_KIND_LIBRARY;
  rec.params = (char *)c->params;
  rec.error = err[0] ? err : NULL;
  if (rec.error) {
    rec.verified = false;
    rec.nruns = 0;
  }
  ts_diag ad;
  ts_diag_clear(&ad);
  ts_status as = tun_db_append(r->db, &rec, &ad);
  if (as) return ts_diag_set(d, as, "tune: appending to %s: %s", r->o->log_path, ad.msg);
  double mean = tun_record_mean(&rec);
  r->have++;
  r->run_done++;
  r->res->new_trials++;
  if (!rec.error && (r->best_s <= 0 || mean < r->best_s)) r->best_s = mean;
  if (r->o->progress)
    fprintf(r->o->progress, "%stune: library %s (%s): %s\n", r->o->progress_tty ? "\n" : "", c->fn, c->lib,
            rec.error ? rec.error : "measured");
  return TS_OK;
}

/* The library candidates not yet in the log, while the budget lasts. */
static ts_status run_library(tune_run *r, ts_diag *d) {
  if (r->o->no_library || r->o->rpc) return TS_OK;
  tun_lib_cand cs[TUN_LIB_MAX_CANDS];
  int n = tun_library_candidates(r->f, r->t, cs, TUN_LIB_MAX_CANDS);
  ts_status st = TS_OK;
  for (int i = 0; i < n && !st && r->have < r->o->trials; i++)
    if (!tun_db_has_trace_at(r->db, r->key, r->target, cs[i].hash, r->threads)) st = run_library_one(r, &cs[i], d);
  return st;
}

/* One batch of the search: proposed, replayed, measured, logged. *done is
 * set when the space is exhausted. */
static ts_status run_batch(tune_run *r, bool *done, ts_diag *d) {
  const tun_tune_opts *o = r->o;
  int want = o->trials - r->have < r->batch ? o->trials - r->have : r->batch;
  srch_candidate *cands = NULL;
  int nc = 0;
  double st0 = tsrt_now();
  ts_status st = srch_evo_next_batch(r->evo, r->model, want, &cands, &nc, d);
  r->res->search_seconds += tsrt_now() - st0;
  if (st) return st;
  if (nc == 0) {
    if (o->progress) fprintf(o->progress, "%stune: the search space is exhausted\n", o->progress_tty ? "\n" : "");
    *done = true;
    return TS_OK;
  }
  batch_ctx bc = {r, cands, ts_calloc((size_t)nc, sizeof(ir_func *)), ts_calloc((size_t)nc, sizeof(sch_traced *)),
                  ts_calloc((size_t)nc, sizeof(char *)), ts_calloc((size_t)nc, sizeof(cm_features)),
                  ts_calloc((size_t)nc, sizeof(cm_sample)), 0};
  if (!bc.funcs || !bc.tss || !bc.errs || !bc.fe || !bc.smp) {
    st = ts_diag_set(d, TS_ENOMEM, "tune: out of memory");
  } else {
    double pt0 = tsrt_now();
    for (int i = 0; i < nc; i++) {
      ts_diag rd;
      ts_diag_clear(&rd);
      bc.tss[i] = sch_trace_replay(cands[i].trace, r->f, 1, &rd);
      if (bc.tss[i]) {
        bc.funcs[i] = sch_traced_func(bc.tss[i]);
      } else {
        char b[600];
        snprintf(b, sizeof b, "replay: %.500s", rd.msg);
        bc.errs[i] = ts_strdup(b);
      }
    }
    r->res->search_seconds += tsrt_now() - pt0;
    st = run_measure(r, &bc, nc, d);
    if (!o->progress_tty) progress(o, r->have, o->trials, r->best_s, r->flops, r->t0, r->run_t0, r->run_done, false);
  }
  for (int i = 0; i < nc; i++) {
    sch_traced_free(bc.tss ? bc.tss[i] : NULL);
    if (bc.errs) ts_free(bc.errs[i]);
    srch_candidate_fini(&cands[i]);
  }
  ts_free(cands);
  ts_free(bc.funcs);
  ts_free(bc.tss);
  ts_free(bc.errs);
  ts_free(bc.fe);
  ts_free(bc.smp);
  return st;
}

/* Reports progress to the embedding hook and says whether to stop (the
 * hook's verdict or the cancel flag). */
static bool run_cancelled(tune_run *r) {
  const tun_tune_opts *o = r->o;
  bool stop = o->cancel && *o->cancel;
  if (o->on_progress && o->on_progress(o->progress_ctx, r->have, o->trials, r->best_s)) stop = true;
  if (stop && r->have < o->trials) r->res->cancelled = true;
  return stop;
}

static void run_stats(const tune_run *r) {
  srch_evo_stats ss;
  srch_evo_get_stats(r->evo, &ss);
  r->res->search_replay_seconds = ss.replay_seconds;
  r->res->search_predict_seconds = ss.predict_seconds;
  r->res->search_replays = ss.replays;
  r->res->search_cache_hits = ss.cache_hits;
}

ts_status tun_tune(const ir_func *f, const char *definition, double flops, const cg_target *t,
                   const tun_tune_opts *o, tun_tune_result *res, ts_diag *d) {
  memset(res, 0, sizeof *res);
  tune_run r = {.f = f, .definition = definition, .target = t->text, .t = t, .dev = tun_device_of(t), .o = o,
                .res = res, .flops = flops, .t0 = tsrt_now(), .dir = "/tmp/tessel-tune-XXXXXX",
                .slots = MAP_FAILED};
  if (!o || !o->log_path || o->trials < 0)
    return ts_diag_set(d, TS_EINVAL, "tune: a log path and a trial budget are required");
  ts_status cs = ir_func_check_sizes(f, d);
  if (cs) return cs;
  r.batch = o->batch > 0 ? o->batch : 64;
  r.db = tun_db_open(o->log_path, stderr, NULL, d);
  if (!r.db) return d && d->code ? d->code : TS_EIO;
  ir_workload_key(f, r.key);
  r.threads = tun_device_threads(t, o->measure.num_threads, o->rpc != NULL);
  r.have = tun_db_count_at(r.db, r.key, r.target, r.threads);
  ts_status st = TS_OK;
  sch_traced *def = NULL; /* the default schedule, measured first unless logged */
  bool have_dir = false;
  if (r.have >= o->trials) goto out;
  if (!(have_dir = mkdtemp(r.dir) != NULL)) {
    st = ts_diag_set(d, TS_EIO, "tune: cannot create a temporary directory");
    goto out;
  }
  if ((st = run_setup(&r, d))) goto out;
  run_resume(&r);
  double bt0 = tsrt_now();
  uint64_t def_hash = 0;
  def = run_baseline_lookup(&r, &def_hash);
  res->baseline_seconds_wall = tsrt_now() - bt0;
  r.slots = mmap(NULL, (size_t)r.batch * sizeof(build_slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (r.slots == MAP_FAILED) {
    st = ts_diag_set(d, TS_ENOMEM, "tune: cannot map the build slots");
    goto out;
  }
  r.run_t0 = tsrt_now();
  const tun_record *bst = tun_db_best_at(r.db, r.key, r.target, r.threads);
  r.best_s = bst ? tun_record_mean(bst) : 0;
  progress(o, r.have, o->trials, r.best_s, flops, r.t0, r.run_t0, 0, false);
  if (def) st = run_default(&r, def, def_hash, d);
  if (!st) st = run_library(&r, d);
  bool done = false;
  while (!st && !done && !run_cancelled(&r) && r.have < o->trials) st = run_batch(&r, &done, d);
  if (o->progress_tty) progress(o, r.have, o->trials, r.best_s, flops, r.t0, r.run_t0, r.run_done, true);

out:
  fill_result(r.db, r.key, r.target, r.threads, flops, res);
  res->wall_seconds = tsrt_now() - r.t0;
  if (r.evo) run_stats(&r);
  if (r.slots != MAP_FAILED) munmap(r.slots, (size_t)r.batch * sizeof(build_slot));
  if (have_dir) rmdir(r.dir);
  sch_traced_free(def);
  srch_evo_free(r.evo);
  cm_model_free(r.model);
  tun_db_close(r.db);
  return st;
}
