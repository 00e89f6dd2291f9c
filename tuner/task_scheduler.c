/* task_scheduler.c — the task scheduler and the whole-model tuning loop
 * (task_scheduler.h).
 *
 * The gradient follows Ansor's task scheduler (python/tvm/auto_scheduler/
 * task_scheduler.py, OSDI'20 §6) with MetaSchedule's defaults (alpha 0.2,
 * window 3) plus Ansor's beta 2 and the paper's epsilon-greedy 0.05. The
 * objective is Σ weight × latency, so the chain-rule factor is the weight.
 * Unlike MetaSchedule, the per-task search does not live across rounds: each
 * round is one tun_tune call, which warm-starts its search and cost model
 * from the log's records of that task (what makes the run resumable). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fopencookie */
#endif
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/struct.h"
#include "tuner/build.h"
#include "tuner/rpc_runner.h"
#include "tuner/task_scheduler.h"
#include "tuner/library.h"
#include "tuner/runoff.h"

/* ---- the scheduling state ------------------------------------------------------- */

const char *tun_sched_kind_name(tun_sched_kind k) {
  return k == TUN_SCHED_ROUND_ROBIN ? "round-robin" : "gradient";
}

ts_status tun_sched_kind_parse(const char *s, tun_sched_kind *out, ts_diag *d) {
  if (s && !strcmp(s, "gradient")) {
    *out = TUN_SCHED_GRADIENT;
    return TS_OK;
  }
  if (s && (!strcmp(s, "round-robin") || !strcmp(s, "round_robin"))) {
    *out = TUN_SCHED_ROUND_ROBIN;
    return TS_OK;
  }
  return ts_diag_set(d, TS_EINVAL, "task scheduler '%s': expected gradient or round-robin", s ? s : "");
}

void tun_sched_params_default(tun_sched_params *p) {
  memset(p, 0, sizeof *p);
  p->kind = TUN_SCHED_GRADIENT;
  p->alpha = 0.2;
  p->beta = 2;
  p->window = 3;
  p->epsilon = 0.05;
  p->seed = 1;
}

/* Length of name without a trailing "_<digits>" (the instance number fusion
 * appends: fused_conv2d_add_relu_3 -> fused_conv2d_add_relu). */
static size_t name_stem(const char *name) {
  size_t n = strlen(name), k = n;
  while (k > 0 && isdigit((unsigned char)name[k - 1])) k--;
  if (k < n && k > 1 && name[k - 1] == '_') return k - 1;
  return n;
}

/* Ansor's similarity tag: the op kinds (here the name stem) and the FLOP
 * count's bucket on a log scale of base 1.618. */
static void assign_groups(tun_sched *s, const char *const *names) {
  int ng = 0;
  for (int i = 0; i < s->n; i++) s->tasks[i].group = -1;
  for (int i = 0; i < s->n; i++) {
    tun_sched_task *a = &s->tasks[i];
    if (a->group >= 0 || a->flops <= 0 || !names[i]) continue;
    int ba = (int)(log(a->flops + 1) / log(1.618));
    size_t la = name_stem(names[i]);
    int members = 1;
    for (int j = i + 1; j < s->n; j++) {
      tun_sched_task *b = &s->tasks[j];
      if (b->group >= 0 || b->flops <= 0 || !names[j]) continue;
      if ((int)(log(b->flops + 1) / log(1.618)) != ba || name_stem(names[j]) != la ||
          strncmp(names[i], names[j], la))
        continue;
      b->group = ng;
      members++;
    }
    if (members > 1) a->group = ng++;
  }
}

ts_status tun_sched_init(tun_sched *s, const tun_sched_params *p, int n, const char *const *names,
                         const double *weights, const double *flops, ts_diag *d) {
  memset(s, 0, sizeof *s);
  if (p)
    s->p = *p;
  else
    tun_sched_params_default(&s->p);
  if (n < 1) return ts_diag_set(d, TS_EINVAL, "task scheduler: no tasks to schedule");
  if (s->p.window < 1 || s->p.alpha < 0 || s->p.alpha > 1 || s->p.beta <= 0 || s->p.epsilon < 0 ||
      s->p.epsilon > 1)
    return ts_diag_set(d, TS_EINVAL,
                       "task scheduler: window %d (>= 1), alpha %g (0..1), beta %g (> 0), epsilon %g (0..1)",
                       s->p.window, s->p.alpha, s->p.beta, s->p.epsilon);
  s->tasks = ts_calloc((size_t)n, sizeof *s->tasks);
  if (!s->tasks) return ts_diag_set(d, TS_ENOMEM, "task scheduler: out of memory");
  s->n = n;
  for (int i = 0; i < n; i++) {
    tun_sched_task *t = &s->tasks[i];
    t->name = names ? names[i] : NULL;
    t->weight = weights ? weights[i] : 1;
    t->flops = flops ? flops[i] : 0;
    t->best = TUN_SCHED_NONE;
    if (!(t->weight > 0) || !(t->flops >= 0)) {
      ts_status st = ts_diag_set(d, TS_EINVAL, "task scheduler: task %d (%s): weight %g must be > 0, flops %g >= 0",
                                 i, t->name ? t->name : "?", t->weight, t->flops);
      tun_sched_fini(s);
      return st;
    }
  }
  if (names) assign_groups(s, names);
  ts_rng_seed(&s->rng, s->p.seed);
  return TS_OK;
}

void tun_sched_fini(tun_sched *s) {
  if (!s) return;
  for (int i = 0; i < s->n && s->tasks; i++) ts_free(s->tasks[i].hist);
  ts_free(s->tasks);
  s->tasks = NULL;
  s->n = 0;
}

static ts_status hist_push(tun_sched_task *t, double v, ts_diag *d) {
  if (t->nhist == t->caphist) {
    int cap = t->caphist ? 2 * t->caphist : 8;
    double *h = ts_realloc(t->hist, (size_t)cap * sizeof *h);
    if (!h) return ts_diag_set(d, TS_ENOMEM, "task scheduler: out of memory");
    t->hist = h;
    t->caphist = cap;
  }
  t->hist[t->nhist++] = v;
  return TS_OK;
}

ts_status tun_sched_restore(tun_sched *s, int i, const double *costs, int ncosts, int batch, ts_diag *d) {
  if (i < 0 || i >= s->n || batch < 1 || ncosts < 0)
    return ts_diag_set(d, TS_EINVAL, "task scheduler: restore of task %d (of %d) with batch %d", i, s->n, batch);
  tun_sched_task *t = &s->tasks[i];
  t->nhist = 0;
  t->rounds = 0;
  t->trials = ncosts;
  t->best = TUN_SCHED_NONE;
  for (int k = 0; k < ncosts; k++) {
    if (costs[k] > 0 && costs[k] < t->best) t->best = costs[k];
    if ((k + 1) % batch == 0 || k == ncosts - 1) {
      ts_status st = hist_push(t, t->best, d);
      if (st) return st;
      t->rounds++;
    }
  }
  return TS_OK;
}

/* The best speed (FLOP/s) among task i's similar tasks, i included; 0 if
 * it has none. */
static double group_best_speed(const tun_sched *s, int i) {
  const tun_sched_task *t = &s->tasks[i];
  if (t->group < 0) return 0;
  int members = 0;
  double best = 0;
  for (int j = 0; j < s->n; j++) {
    const tun_sched_task *u = &s->tasks[j];
    if (u->group != t->group) continue;
    members++;
    double v = u->flops / u->best;
    if (v > best) best = v;
  }
  return members > 1 ? best : 0;
}

/* Ansor: a task tuned many more rounds than the rest of its group that
 * still runs at less than 1/beta of the group's best speed is not similar
 * after all; it leaves the group. */
static void adjust_group(tun_sched *s, int i) {
  tun_sched_task *t = &s->tasks[i];
  double best = group_best_speed(s, i);
  if (best <= 0) return;
  int max_rounds = 0;
  for (int j = 0; j < s->n; j++)
    if (j != i && s->tasks[j].group == t->group && s->tasks[j].rounds > max_rounds) max_rounds = s->tasks[j].rounds;
  if (t->flops / t->best < best / s->p.beta && t->rounds > 5 + max_rounds) t->group = -1;
}

ts_status tun_sched_update(tun_sched *s, int i, int new_trials, double best_seconds, ts_diag *d) {
  if (i < 0 || i >= s->n) return ts_diag_set(d, TS_EINVAL, "task scheduler: no task %d (of %d)", i, s->n);
  tun_sched_task *t = &s->tasks[i];
  if (new_trials < 0) new_trials = 0;
  t->trials += new_trials;
  if (best_seconds > 0 && best_seconds < t->best) t->best = best_seconds;
  t->rounds++;
  ts_status st = hist_push(t, t->best, d);
  if (st) return st;
  if (new_trials == 0) t->dead = true;
  adjust_group(s, i);
  return TS_OK;
}

double tun_sched_gradient(const tun_sched *s, int i) {
  const tun_sched_task *t = &s->tasks[i];
  if (t->dead) return 0;
  int cts = t->rounds > 0 ? t->rounds : 1;
  int w = s->p.window;
  double backward = 0;
  if (t->rounds - 1 < t->nhist && t->rounds - 1 - w >= 0)
    backward = (t->hist[t->rounds - 1] - t->hist[t->rounds - 1 - w]) / w;
  double next1 = t->best - t->best / cts;
  double next2 = s->p.beta * 1e30;
  double gs = group_best_speed(s, i);
  if (gs > 0) next2 = s->p.beta * t->flops / gs;
  double forward = (next1 < next2 ? next1 : next2) - t->best;
  double g = t->weight * (s->p.alpha * backward + (1 - s->p.alpha) * forward);
  return g < 0 ? g : 0;
}

static int random_live(tun_sched *s) {
  int live = 0;
  for (int i = 0; i < s->n; i++) live += !s->tasks[i].dead;
  if (!live) return -1;
  int k = (int)ts_rng_below(&s->rng, (uint64_t)live);
  for (int i = 0; i < s->n; i++)
    if (!s->tasks[i].dead && k-- == 0) return i;
  return -1;
}

int tun_sched_next(tun_sched *s) {
  s->last_random = false;
  for (int i = 0; i < s->n; i++) /* warm-up: one round each */
    if (!s->tasks[i].dead && s->tasks[i].rounds == 0) return i;
  if (s->p.kind == TUN_SCHED_ROUND_ROBIN) {
    /* in turn from the cursor; the fewest rounds first, so a resumed run
     * (restored rounds) evens the tasks out before cycling again */
    int best = -1;
    for (int k = 0; k < s->n; k++) {
      int i = (s->rr_next + k) % s->n;
      if (!s->tasks[i].dead && (best < 0 || s->tasks[i].rounds < s->tasks[best].rounds)) best = i;
    }
    if (best >= 0) s->rr_next = (best + 1) % s->n;
    return best;
  }
  int live = 0, only = -1;
  for (int i = 0; i < s->n; i++)
    if (!s->tasks[i].dead) {
      live++;
      only = i;
    }
  if (live <= 1) return only;
  if (s->p.epsilon > 0 && ts_rng_unit(&s->rng) < s->p.epsilon) {
    s->last_random = true;
    return random_live(s);
  }
  int best = -1;
  double gmin = 0, gmax = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->tasks[i].dead) continue;
    double g = tun_sched_gradient(s, i);
    if (best < 0 || g < gmin) {
      if (best < 0) gmax = g;
      best = i;
      gmin = g;
    }
    if (g > gmax) gmax = g;
  }
  if (best >= 0 && gmin == gmax) {
    s->last_random = true;
    return random_live(s);
  }
  return best;
}

/* ---- estimate and table ------------------------------------------------------------ */

void tun_tune_model_estimate(tun_tune_model_result *r) {
  r->estimated_seconds = 0;
  r->from_default = r->missing = 0;
  r->trials = 0;
  for (int i = 0; i < r->ntasks; i++) {
    const tun_model_task_status *t = &r->tasks[i];
    r->trials += t->trials;
    if (t->best_seconds > 0)
      r->estimated_seconds += t->weight * t->best_seconds;
    else if (t->default_seconds > 0) {
      r->estimated_seconds += t->weight * t->default_seconds;
      r->from_default++;
    } else
      r->missing++;
  }
}

void tun_tune_model_print(FILE *out, const tun_tune_model_result *r, const char *title) {
  if (!out) return;
  if (title) fprintf(out, "%s\n", title);
  fprintf(out, "%3s  %-44s %6s %10s %12s %10s %7s %-14s\n", "ID", "task", "weight", "MFLOP", "best (ms)", "GFLOP/s",
          "trials", "library");
  for (int i = 0; i < r->ntasks; i++) {
    const tun_model_task_status *t = &r->tasks[i];
    char lat[32], gf[32];
    double s = t->best_seconds > 0 ? t->best_seconds : t->default_seconds;
    if (s > 0) {
      snprintf(lat, sizeof lat, "%.4f%s", s * 1e3, t->best_seconds > 0 ? "" : "*");
      if (t->flops > 0)
        snprintf(gf, sizeof gf, "%.2f", t->flops / s * 1e-9);
      else
        snprintf(gf, sizeof gf, "-");
    } else {
      snprintf(lat, sizeof lat, "-");
      snprintf(gf, sizeof gf, "-");
    }
    char lib[40];
    tun_library_cell(t->lib_seconds, t->lib, t->kernel_seconds, lib, sizeof lib);
    fprintf(out, "%3d  %-44.44s %6d %10.3f %12s %10s %7d %-14s%s", i, t->name ? t->name : "?", t->weight,
            t->flops * 1e-6, lat, gf, t->trials, lib, t->dead ? "  (search exhausted)" : "");
    if (t->runoff_changed) fprintf(out, "  (run-off: %s, not %s)", t->runoff_winner, t->runoff_was);
    fprintf(out, "\n");
  }
  if (r->missing == r->ntasks)
    fprintf(out, "estimated end-to-end latency: - (no task measured yet)");
  else
    fprintf(out, "estimated end-to-end latency: %.4f ms", r->estimated_seconds * 1e3);
  if (r->from_default) fprintf(out, " (* %d by the default schedule)", r->from_default);
  if (r->missing && r->missing < r->ntasks) fprintf(out, " (%d tasks not measured yet, left out)", r->missing);
  fprintf(out, "  trials %d\n", r->trials);
  fflush(out);
}

/* ---- the driver -------------------------------------------------------------------- */

void tun_tune_model_opts_default(tun_tune_model_opts *o) {
  memset(o, 0, sizeof *o);
  tun_tune_opts_default(&o->tune);
  tun_sched_params_default(&o->sched);
  o->progress = stderr;
  o->measure_defaults = true;
}

void tun_tune_model_result_fini(tun_tune_model_result *r) {
  if (!r) return;
  ts_free(r->tasks);
  r->tasks = NULL;
  r->ntasks = 0;
}

/* A stream that forwards to `out` and counts the newlines written, so the
 * live table knows how many lines tun_tune's progress took. */
typedef struct line_counter {
  FILE *out;
  int lines;
} line_counter;

static ssize_t lc_write(void *cookie, const char *buf, size_t n) {
  line_counter *lc = cookie;
  for (size_t i = 0; i < n; i++) lc->lines += buf[i] == '\n';
  fwrite(buf, 1, n, lc->out);
  fflush(lc->out);
  return (ssize_t)n;
}

/* The default schedule of f, built and timed the way tun_tune times its
 * baseline (here or on a board); 0 and err set on failure. */
static double measure_default(const ir_func *f, const cg_target *t, const tun_tune_opts *o, char *err, size_t errn) {
  err[0] = 0;
  sch_traced *ts = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  char dir[] = "/tmp/tessel-tm-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(err, errn, "cannot create a temporary directory");
    return 0;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/default.so", dir);
  double secs = 0;
  if (tun_schedule(f, NULL, t, &ts, &d) || tun_build_shared(sch_traced_func(ts), t, path, &d)) {
    snprintf(err, errn, "%.500s", d.msg);
  } else if (o->rpc) {
    tun_rpc_done dn;
    memset(&dn, 0, sizeof dn);
    if (tun_rpc_submit(o->rpc, -1, path, &o->measure, &d) || tun_rpc_next(o->rpc, -1, &dn, &d))
      snprintf(err, errn, "%.500s", d.msg);
    else if (dn.lost)
      snprintf(err, errn, "lost: %.500s", dn.error);
    else if (dn.res.status != TS_OK)
      snprintf(err, errn, "%s: %.480s", tsrt_status_name(dn.res.status), dn.res.error);
    else
      secs = tsrt_result_median(&dn.res);
    if (!dn.lost) tsrt_result_fini(&dn.res);
  } else {
    tsrt_measure_result res;
    tsrt_measure_forked(path, &o->measure, &res);
    if (res.status != TS_OK)
      snprintf(err, errn, "%s: %.480s", tsrt_status_name(res.status), res.error);
    else
      secs = tsrt_result_median(&res);
    tsrt_result_fini(&res);
  }
  sch_traced_free(ts);
  unlink(path);
  rmdir(dir);
  return secs;
}

typedef struct tm_ctx {
  const tun_tune_model_opts *o;
  const cg_target *t;
  tun_tune_model_result *r;
  tun_sched *s;
  FILE *out;        /* the progress stream (counting on a TTY) */
  line_counter lc;
  int drawn;        /* lines of the table on screen (TTY) */
  double t0;
} tm_ctx;

/* A round's tun_tune reports its task's records; the model's hook gets the
 * whole model's (the other tasks' records plus this one's). */
typedef struct tm_progress {
  const tun_tune_opts *outer;
  int others;   /* records of the other tasks */
  int total;    /* the model's budget */
} tm_progress;

static int tm_on_progress(void *ctx, int done, int total, double best_seconds) {
  const tm_progress *p = ctx;
  (void)total;
  (void)best_seconds; /* a task's best is not the model's */
  return p->outer->on_progress(p->outer->progress_ctx, p->others + done, p->total, 0);
}

static bool tm_cancelled(const tun_tune_model_opts *o, const tun_tune_model_result *r) {
  bool stop = o->tune.cancel && *o->tune.cancel;
  if (o->tune.on_progress && o->tune.on_progress(o->tune.progress_ctx, r->trials, o->tune.trials, 0)) stop = true;
  return stop;
}

static void sync_result(tm_ctx *c) {
  for (int i = 0; i < c->r->ntasks; i++) {
    c->r->tasks[i].rounds = c->s->tasks[i].rounds;
    c->r->tasks[i].dead = c->s->tasks[i].dead;
  }
  tun_tune_model_estimate(c->r);
}

static void show(tm_ctx *c, const char *what) {
  if (!c->o->progress) return;
  sync_result(c);
  char title[1200];
  snprintf(title, sizeof title, "tune-model %.200s on %.300s (%s): %.320s, trials %d/%d, elapsed %.0f s",
           c->o->model_name ? c->o->model_name : "", c->t->text, tun_sched_kind_name(c->s->p.kind), what,
           c->r->trials, c->o->tune.trials, tsrt_now() - c->t0);
  if (c->o->progress_tty) {
    int up = c->drawn + c->lc.lines;
    if (up > 0) fprintf(c->o->progress, "\r\033[%dA\033[J", up);
    else fprintf(c->o->progress, "\r\033[K");
    tun_tune_model_print(c->o->progress, c->r, title);
    c->drawn = c->r->ntasks + 3;
    c->lc.lines = 0;
  } else {
    tun_tune_model_print(c->o->progress, c->r, title);
  }
}

/* The default schedule's latency from the log: tun_tune measures it as a
 * task's first candidate, and its record is the one whose trace_hash is the
 * default schedule's function hash. 0 when not logged (or an error). */
static double logged_default(const tun_db *db, const tun_model_task *k, const cg_target *t, const int *idx,
                             int cnt) {
  sch_traced *def = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  /* as tune.c's first candidate: the model build's default (weights packed) */
  if (tun_schedule_opts(k->func, NULL, t, &(tun_default_opts){.pack_weights = true}, &def, &d) != TS_OK) return 0;
  uint64_t h = ir_struct_hash_func(sch_traced_func(def));
  sch_traced_free(def);
  for (int j = 0; j < cnt; j++) {
    const tun_record *rec = tun_db_get(db, idx[j]);
    if (rec->trace_hash == h && !rec->error && rec->verified) return tun_record_mean(rec);
  }
  return 0;
}

/* The run-off of every task (tuner/runoff.h): its winner becomes the
 * task's best, and the table says when it changed the choice. */
static ts_status run_runoffs(const tun_model_task *tasks, const cg_target *t, const tun_tune_opts *to,
                             tun_tune_model_result *r, ts_diag *d) {
  for (int i = 0; i < r->ntasks; i++) {
    tun_runoff_result ro;
    ts_diag rd;
    ts_diag_clear(&rd);
    ts_status st = tun_runoff(tasks[i].func, t, to, tasks[i].name, &ro, &rd);
    if (st) return ts_diag_set(d, st, "tune-model: task %d (%s): %s", i, tasks[i].name, rd.msg);
    r->runoff_seconds += ro.wall_seconds;
    tun_model_task_status *ts = &r->tasks[i];
    if (!ro.ncands || ro.best_seconds <= 0) continue;
    r->runoffs++;
    ts->runoff_cands = ro.ncands;
    ts->best_seconds = ro.best_seconds;
    if (ro.lib_seconds > 0) {
      ts->lib_seconds = ro.lib_seconds;
      ts->kernel_seconds = ro.kernel_seconds;
    }
    if ((ts->runoff_changed = ro.changed)) {
      r->runoff_changes++;
      snprintf(ts->runoff_winner, sizeof ts->runoff_winner, "%s", ro.winner);
      snprintf(ts->runoff_was, sizeof ts->runoff_was, "%s", ro.was);
    }
  }
  return TS_OK;
}

ts_status tun_tune_model(const tun_model_task *tasks, int n, const cg_target *t,
                         const tun_tune_model_opts *o, tun_tune_model_result *r, ts_diag *d) {
  memset(r, 0, sizeof *r);
  double t0 = tsrt_now();
  if (!tasks || n < 1) return ts_diag_set(d, TS_EINVAL, "tune-model: the model has no tasks to tune");
  if (!o || !o->tune.log_path || o->tune.trials < 0)
    return ts_diag_set(d, TS_EINVAL, "tune-model: a log path and a trial budget are required");
  r->tasks = ts_calloc((size_t)n, sizeof *r->tasks);
  if (!r->tasks) return ts_diag_set(d, TS_ENOMEM, "tune-model: out of memory");
  r->ntasks = n;
  for (int i = 0; i < n; i++) {
    const tun_model_task *k = &tasks[i];
    tun_model_task_status *ts = &r->tasks[i];
    ts->name = k->name;
    ts->weight = k->weight;
    ts->flops = k->flops;
    if (!k->func || !k->definition || !k->name)
      return ts_diag_set(d, TS_EINVAL, "tune-model: task %d has no %s", i,
                         !k->name ? "name" : !k->func ? "function" : "definition");
    if (k->func->nsyms)
      return ts_diag_set(d, TS_EINVAL, "tune-model: task %d (%s) has %d symbolic size(s) (first: %s); bind them first",
                         i, k->name, k->func->nsyms, k->func->syms[0]->name);
    if (k->weight < 1)
      return ts_diag_set(d, TS_EINVAL, "tune-model: task %d (%s) has weight %d (>= 1)", i, k->name, k->weight);
    ir_workload_key(k->func, ts->key);
    for (int j = 0; j < i; j++)
      if (!strcmp(r->tasks[j].key, ts->key))
        return ts_diag_set(d, TS_EINVAL, "tune-model: tasks %d (%s) and %d (%s) are the same workload (key %s)", j,
                           r->tasks[j].name, i, k->name, ts->key);
  }
  int batch = o->tune.batch > 0 ? o->tune.batch : 64;
  if (o->tune.trials / n < batch) batch = o->tune.trials / n > 0 ? o->tune.trials / n : 1;
  r->batch = batch;

  /* Restore from the log. */
  const char **names = ts_calloc((size_t)n, sizeof *names);
  double *weights = ts_calloc((size_t)n, sizeof *weights);
  double *flops = ts_calloc((size_t)n, sizeof *flops);
  tun_sched s;
  memset(&s, 0, sizeof s);
  ts_status st = TS_OK;
  tun_db *db = NULL; /* held (and so locked) until the end */
  if (!names || !weights || !flops) {
    st = ts_diag_set(d, TS_ENOMEM, "tune-model: out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    names[i] = tasks[i].name;
    weights[i] = tasks[i].weight;
    flops[i] = tasks[i].flops;
  }
  if ((st = tun_sched_init(&s, &o->sched, n, names, weights, flops, d))) goto out;
  /* The log stays open (and so locked against other tuners) for the whole
   * run; each round's tun_tune opens it again within this process. */
  {
    db = tun_db_open(o->tune.log_path, o->progress, NULL, d);
    if (!db) {
      st = d && d->code ? d->code : TS_EIO;
      goto out;
    }
    /* only the records of the thread count this run tunes for (as tun_tune counts them) */
    int thr = tun_device_threads(t, o->tune.measure.num_threads, o->tune.rpc != NULL);
    for (int i = 0; i < n && !st; i++) {
      int all = 0, cnt = 0;
      const int *aidx = tun_db_indices_for(db, r->tasks[i].key, t->text, &all);
      double *costs = ts_calloc((size_t)(all > 0 ? all : 1), sizeof *costs);
      int *idx = ts_calloc((size_t)(all > 0 ? all : 1), sizeof *idx);
      if (!costs || !idx) {
        ts_free(costs);
        ts_free(idx);
        st = ts_diag_set(d, TS_ENOMEM, "tune-model: out of memory");
        break;
      }
      for (int k = 0; k < all; k++) {
        const tun_record *rec = tun_db_get(db, aidx[k]);
        if (rec->threads != thr) continue;
        idx[cnt] = aidx[k];
        costs[cnt++] = !rec->error && rec->verified ? tun_record_mean(rec) : TUN_SCHED_NONE;
      }
      st = tun_sched_restore(&s, i, costs, cnt, batch, d);
      ts_free(costs);
      r->tasks[i].trials = cnt;
      const tun_record *b = tun_db_best_at(db, r->tasks[i].key, t->text, thr);
      r->tasks[i].best_seconds = b ? tun_record_mean(b) : 0;
      r->tasks[i].default_seconds = cnt ? logged_default(db, &tasks[i], t, idx, cnt) : 0;
      tun_library_split(db, r->tasks[i].key, t->text, thr, &r->tasks[i].lib_seconds, r->tasks[i].lib,
                        sizeof r->tasks[i].lib, &r->tasks[i].kernel_seconds);
      ts_free(idx);
    }
    if (st) goto out;
  }

  tm_ctx c = {o, t, r, &s, o->progress, {o->progress, 0}, 0, t0};
  FILE *counted = NULL;
  if (o->progress && o->progress_tty) {
    cookie_io_functions_t io = {.write = lc_write};
    counted = fopencookie(&c.lc, "w", io);
    if (counted) setvbuf(counted, NULL, _IONBF, 0);
  }
  FILE *round_progress = counted ? counted : o->progress;
  show(&c, r->trials >= o->tune.trials ? "budget already met" : "start");

  char what[320];
  while (!st) {
    sync_result(&c);
    if (tm_cancelled(o, r)) {
      r->cancelled = r->trials < o->tune.trials;
      break;
    }
    if (r->trials >= o->tune.trials) break;
    int i = tun_sched_next(&s);
    if (i < 0) {
      if (o->progress) fprintf(round_progress, "tune-model: every task's search space is exhausted\n");
      break;
    }
    int want = o->tune.trials - r->trials < batch ? o->tune.trials - r->trials : batch;
    tun_tune_opts to = o->tune;
    to.trials = r->tasks[i].trials + want;
    to.batch = want;
    to.progress = round_progress;
    to.progress_tty = o->progress_tty;
    tm_progress tp = {&o->tune, r->trials - r->tasks[i].trials, o->tune.trials};
    if (o->tune.on_progress) {
      to.on_progress = tm_on_progress;
      to.progress_ctx = &tp;
    }
    if (o->progress && !o->progress_tty)
      fprintf(o->progress, "round %d: task %d %s (%d trials%s)\n", r->rounds + 1, i, tasks[i].name, want,
              s.last_random ? ", random pick" : "");
    tun_tune_result tr;
    ts_diag td;
    ts_diag_clear(&td);
    ts_status ts = tun_tune(tasks[i].func, tasks[i].definition, tasks[i].flops, t, &to, &tr, &td);
    int before = r->tasks[i].trials;
    r->tasks[i].trials = tr.trials;
    if (tr.best_seconds > 0) r->tasks[i].best_seconds = tr.best_seconds;
    if (tr.baseline_seconds > 0 && r->tasks[i].default_seconds <= 0) r->tasks[i].default_seconds = tr.baseline_seconds;
    r->tasks[i].lib_seconds = tr.lib_seconds;
    r->tasks[i].kernel_seconds = tr.kernel_seconds;
    snprintf(r->tasks[i].lib, sizeof r->tasks[i].lib, "%s", tr.lib);
    r->new_trials += tr.new_trials;
    r->rounds++;
    if (tr.cancelled) {
      r->cancelled = true;
      sync_result(&c);
      break;
    }
    if (ts) {
      st = ts_diag_set(d, ts, "tune-model: task %d (%s): %s", i, tasks[i].name, td.msg);
      break;
    }
    if ((st = tun_sched_update(&s, i, tr.trials - before, tr.best_seconds, d))) break;
    /* Locally every candidate is logged (errors too), so a short round means
     * the search ran out of new schedules. On boards a candidate lost to
     * board failures is not logged: there only an empty round counts. */
    if (!o->tune.rpc && tr.trials - before < want) s.tasks[i].dead = true;
    snprintf(what, sizeof what, "round %d gave task %d %.200s %d trials%s", r->rounds, i, tasks[i].name,
             tr.trials - before, s.last_random ? " (random pick)" : "");
    show(&c, what);
  }

  if (!st && !r->cancelled && !o->tune.no_runoff) {
    tun_tune_opts to = o->tune;
    to.progress = round_progress;
    if ((st = run_runoffs(tasks, t, &to, r, d)) == TS_OK && r->runoffs) {
      snprintf(what, sizeof what, "run-off of %d task%s in %.1f s: %d choice%s changed", r->runoffs,
               r->runoffs == 1 ? "" : "s", r->runoff_seconds, r->runoff_changes, r->runoff_changes == 1 ? "" : "s");
      show(&c, what);
    }
  }
  if (!st && o->measure_defaults && !r->cancelled) {
    int done = 0;
    for (int i = 0; i < n; i++) {
      if (r->tasks[i].best_seconds > 0 || r->tasks[i].default_seconds > 0) continue;
      char err[600];
      double sec = measure_default(tasks[i].func, t, &o->tune, err, sizeof err);
      if (sec > 0)
        r->tasks[i].default_seconds = sec;
      else if (o->progress)
        fprintf(round_progress, "tune-model: task %d (%s): default schedule not measured: %s\n", i, tasks[i].name, err);
      done++;
    }
    if (done) show(&c, "default schedules measured for the tasks without a tuned latency");
  }
  if (counted) fclose(counted);
  sync_result(&c);

out:
  tun_db_close(db);
  tun_sched_fini(&s);
  ts_free(names);
  ts_free(weights);
  ts_free(flops);
  if (r->tasks) tun_tune_model_estimate(r);
  r->wall_seconds = tsrt_now() - t0;
  return st;
}
