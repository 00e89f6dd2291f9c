/* capi_tune.c — the public C API's options, tuning and building
 * (include/tessel/tessel.h): one options object set by the CLI's option
 * names from a table (so a new CLI option is one row, not new ABI), then
 * the same calls the CLI's tune, tune-model and build make — tun_tune,
 * tun_tune_model, the log's ranked records replayed, tun_model_build —
 * with the progress callback and the cancel flag passed down as
 * tun_tune_opts' embedding hooks. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tuner/capi_int.h"
#include "ir/graph/passes.h"
#include "ir/schedule/layout.h"
#include "tuner/build.h"
#include "tuner/database.h"
#include "tuner/model_build.h"
#include "tuner/rpc_runner.h"
#include "tuner/task_scheduler.h"
#include "tuner/runoff.h"
#include "tuner/tune.h"

/* ---- options ------------------------------------------------------------------------ */

struct tessel_opts {
  tun_tune_opts tune;
  tun_rpc_opts ro;
  tun_model_opts model;
  tun_sched_kind sched;
  bool no_default;       /* tune-model: do not measure untuned tasks' default schedules */
  bool verbose;
  const char *target;    /* NULL: "llvm" (or the board's triple with the rpc runner) */
  const char *runner;    /* "local" / "rpc" */
  tessel_progress_fn fn;
  void *fn_ctx;
  const volatile int *cancel;
  char *vals[64];        /* per table row: the text last set */
};

typedef enum { K_INT, K_REAL, K_SEED, K_STR, K_FLAG, K_SPECIAL } opt_kind;
typedef struct opt_row {
  const char *name;
  opt_kind kind;
  size_t off;            /* into tessel_opts (not K_SPECIAL) */
  double lo, hi;         /* K_INT, K_REAL */
} opt_row;

#define F(field) offsetof(struct tessel_opts, field)
/* The CLI's options (cli/cmd_tune.c, cli/args.c), by their long names. */
static const opt_row rows[] = {
    {"target", K_STR, F(target), 0, 0},
    {"log", K_STR, F(tune.log_path), 0, 0},
    {"trials", K_INT, F(tune.trials), 0, 1e8},
    {"batch", K_INT, F(tune.batch), 1, 1 << 16},
    {"model", K_STR, F(tune.model), 0, 0},
    {"seed", K_SEED, F(tune.seed), 0, 0},
    {"build-jobs", K_INT, F(tune.build_jobs), 0, 4096},
    {"slow-cutoff", K_REAL, F(tune.slow_cutoff), 0, 1e9},
    {"first-batch", K_INT, F(tune.first_batch), 0, 1 << 16},
    {"population", K_INT, F(tune.population), 0, 1 << 20},
    {"xgb-min-samples", K_INT, F(tune.xgb_min_samples), 1, 1e8},
    {"xgb-max-rounds", K_INT, F(tune.xgb_max_rounds), 0, 1e6},
    {"number", K_INT, F(tune.measure.number), 0, 1 << 24},
    {"repeat", K_INT, F(tune.measure.repeat), 1, TSRT_MAX_REPEAT},
    {"min-repeat-ms", K_REAL, F(tune.measure.min_repeat_ms), 0, 1e7},
    {"timeout", K_REAL, F(tune.measure.timeout_s), 1e-3, 1e6},
    {"threads", K_INT, F(tune.measure.num_threads), 0, 4096},
    {"cache-flush", K_FLAG, F(tune.measure.cache_flush), 0, 0},
    {"no-layout-rewrite", K_FLAG, F(tune.postproc.no_layout_rewrite), 0, 0},
    {"gpu-regcheck", K_FLAG, F(tune.gpu_regcheck), 0, 0},
    {"no-default-tiling", K_FLAG, F(tune.defaults.no_tiling), 0, 0},
    {"no-library", K_FLAG, F(tune.no_library), 0, 0}, /* tuner/library.h */
    {"no-runoff", K_FLAG, F(tune.no_runoff), 0, 0},   /* tuner/runoff.h (tune-model's run-off) */
    {"cost-model", K_STR, F(tune.cost_model), 0, 0},
    {"no-tensorize", K_SPECIAL, 0, 0, 0},
    {"no-tensor-core", K_SPECIAL, 0, 0, 0},
    {"runner", K_STR, F(runner), 0, 0},
    {"tracker", K_STR, F(ro.tracker), 0, 0},
    {"key", K_STR, F(ro.key), 0, 0},
    {"parallel", K_INT, F(ro.parallel), 1, 256},
    {"secret-file", K_STR, F(ro.secret_file), 0, 0},
    {"priority", K_INT, F(ro.priority), -1e6, 1e6},
    {"rpc-wait", K_REAL, F(ro.wait_s), 0, 1e7},
    {"rpc-tries", K_INT, F(ro.max_tries), 1, 1000},
    {"sym", K_SPECIAL, 0, 0, 0},
    {"bind", K_SPECIAL, 0, 0, 0},
    {"buckets", K_SPECIAL, 0, 0, 0},
    {"winograd", K_SPECIAL, 0, 0, 0},
    {"polyphase", K_SPECIAL, 0, 0, 0},
    {"qdq", K_SPECIAL, 0, 0, 0},
    {"conv-layout", K_SPECIAL, 0, 0, 0},
    {"task-scheduler", K_SPECIAL, 0, 0, 0},
    {"no-default", K_FLAG, F(no_default), 0, 0},
    {"verbose", K_FLAG, F(verbose), 0, 0},
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))
_Static_assert(sizeof rows / sizeof rows[0] <= 64, "tessel_opts.vals holds a value per row");

tessel_status tessel_opts_new(tessel_opts **out, tessel_error *err) {
  tessel_opts *o = ts_calloc(1, sizeof *o);
  *out = NULL;
  if (!o) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  tun_tune_opts_default(&o->tune);
  o->tune.trials = -1;
  tun_rpc_opts_default(&o->ro);
  tun_model_opts_init(&o->model);
  o->sched = TUN_SCHED_GRADIENT;
  o->runner = "local";
  *out = o;
  return TESSEL_OK;
}

void tessel_opts_free(tessel_opts *o) {
  if (!o) return;
  for (int i = 0; i < NROWS; i++) ts_free(o->vals[i]);
  ts_free(o);
}

static int find_row(const char *name) {
  for (int i = 0; i < NROWS; i++)
    if (!strcmp(rows[i].name, name)) return i;
  return -1;
}

static tessel_status set_flag(const opt_row *r, const char *v, bool *on, tessel_error *err) {
  if (!v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) *on = true;
  else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) *on = false;
  else return capi_err(err, TESSEL_EINVAL, "option %s is a switch: on/off, true/false or 1/0, got '%s'", r->name, v);
  return TESSEL_OK;
}

/* The rows that are not one field. */
static tessel_status set_special(tessel_opts *o, const opt_row *r, const char *v, tessel_error *err) {
  ts_diag d;
  ts_diag_clear(&d);
  bool on = true;
  if (!strcmp(r->name, "no-tensorize") || !strcmp(r->name, "no-tensor-core")) {
    if (set_flag(r, v, &on, err)) return err ? err->code : TESSEL_EINVAL;
    int k = !strcmp(r->name, "no-tensorize") ? SRCH_RULE_MULTI_LEVEL_TILING_TENSOR : SRCH_RULE_GPU_TENSOR_CORE;
    if (on) o->tune.space.rule_mask = srch_rule_mask_without(o->tune.space.rule_mask, (srch_rule)k);
    else if (o->tune.space.rule_mask) o->tune.space.rule_mask |= 1u << k; /* 0 is every rule already */
    return TESSEL_OK;
  }
  if (!v) return capi_err(err, TESSEL_EINVAL, "option %s needs a value", r->name);
  ts_status st;
  if (!strcmp(r->name, "sym") || !strcmp(r->name, "bind")) st = tun_model_opts_add_sym(&o->model, v, &d);
  else if (!strcmp(r->name, "buckets")) st = tun_model_opts_add_buckets(&o->model, v, &d);
  else if (!strcmp(r->name, "task-scheduler")) st = tun_sched_kind_parse(v, &o->sched, &d);
  else st = tg_pass_opts_set(&o->model.graph, r->name, v, &d);
  if (st) return capi_err(err, (tessel_status)st, "option %s: %.1900s", r->name, d.msg);
  return TESSEL_OK;
}

tessel_status tessel_opts_set(tessel_opts *o, const char *name, const char *value, tessel_error *err) {
  if (!name) return capi_err(err, TESSEL_EINVAL, "no option name given");
  if (!strncmp(name, "--", 2)) name += 2;
  int i = find_row(name);
  if (i < 0) return capi_err(err, TESSEL_EINVAL, "unknown option '%s' (the CLI's long option names, docs/API.md)", name);
  const opt_row *r = &rows[i];
  char *copy = value ? ts_strdup(value) : r->kind == K_FLAG ? ts_strdup("1") : NULL; /* a bare switch reads "1" */
  if ((value || r->kind == K_FLAG) && !copy) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  void *field = (char *)o + r->off;
  const char *why = "not a number";
  tessel_status st = TESSEL_OK;
  int64_t iv;
  switch (r->kind) {
  case K_INT:
    if (!value || !ts_parse_i64(value, (int64_t)r->lo, (int64_t)r->hi, &iv, &why))
      st = capi_err(err, TESSEL_EINVAL, "option %s wants an integer in %lld..%lld, got '%s' (%s)", r->name,
                    (long long)r->lo, (long long)r->hi, value ? value : "nothing", value ? why : "no value");
    else *(int *)field = (int)iv;
    break;
  case K_REAL:
    if (!value || !ts_parse_f64(value, r->lo, r->hi, (double *)field, &why))
      st = capi_err(err, TESSEL_EINVAL, "option %s wants a number in %g..%g, got '%s' (%s)", r->name, r->lo, r->hi,
                    value ? value : "nothing", value ? why : "no value");
    break;
  case K_SEED:
    if (!value || !ts_parse_u64(value, (uint64_t *)field, &why))
      st = capi_err(err, TESSEL_EINVAL, "option %s wants an unsigned 64-bit integer, got '%s' (%s)", r->name,
                    value ? value : "nothing", value ? why : "no value");
    break;
  case K_STR:
    if (!value || !*value) st = capi_err(err, TESSEL_EINVAL, "option %s needs a value", r->name);
    else *(const char **)field = copy;
    break;
  case K_FLAG: st = set_flag(r, value, (bool *)field, err); break;
  case K_SPECIAL: st = set_special(o, r, value, err); break;
  }
  if (st) {
    ts_free(copy);
    return st;
  }
  ts_free(o->vals[i]); /* a K_STR field pointed at it: now at copy */
  o->vals[i] = copy;
  return TESSEL_OK;
}

const char *tessel_opts_get(const tessel_opts *o, const char *name) {
  if (name && !strncmp(name, "--", 2)) name += 2;
  int i = name ? find_row(name) : -1;
  return i < 0 ? NULL : o->vals[i];
}

void tessel_opts_set_progress(tessel_opts *o, tessel_progress_fn fn, void *ctx) {
  o->fn = fn;
  o->fn_ctx = ctx;
}

void tessel_opts_set_cancel(tessel_opts *o, const volatile int *flag) { o->cancel = flag; }

/* ---- tuning --------------------------------------------------------------------------- */

/* What `tessel tune`'s setup checks (cli/cmd_tune.c), then the target
 * (asking a board for its triple when the rpc runner has no target). */
static ts_status tune_setup(const tessel_opts *o, const char *cmd, cg_target *tg, ts_diag *d) {
  const tun_tune_opts *t = &o->tune;
  if (t->trials < 0 || !t->log_path) return ts_diag_set(d, TS_EINVAL, "%s: options trials and log are required", cmd);
  if (strcmp(t->model, "xgb") && strcmp(t->model, "random"))
    return ts_diag_set(d, TS_EINVAL, "%s: option model is xgb or random, got '%s'", cmd, t->model);
  bool rpc = !strcmp(o->runner, "rpc");
  if (!rpc && strcmp(o->runner, "local"))
    return ts_diag_set(d, TS_EINVAL, "%s: option runner is local or rpc, got '%s'", cmd, o->runner);
  if (rpc && (!o->ro.tracker || !o->ro.key))
    return ts_diag_set(d, TS_EINVAL, "%s: the rpc runner needs options tracker (H:P) and key", cmd);
  char board[200];
  const char *target = o->target;
  if (!target && rpc) {
    char triple[128];
    ts_status st = tun_rpc_board_triple(&o->ro, triple, sizeof triple, d);
    if (st) return st;
    snprintf(board, sizeof board, "llvm -mtriple=%s", triple);
    target = board;
  }
  ts_status st = cg_target_parse(target ? target : "llvm", tg, d);
  return st ? st : tun_resolve_target(tg, d);
}

/* o's tune options with the hooks and quiet progress; *rr started for the
 * rpc runner (tun_rpc_runner_free it). */
static ts_status tune_opts_for(const tessel_opts *o, tun_tune_opts *to, tun_rpc_runner **rr, ts_diag *d) {
  *to = o->tune;
  to->progress = o->verbose ? stderr : NULL;
  to->progress_tty = false;
  to->on_progress = o->fn;
  to->progress_ctx = o->fn_ctx;
  to->cancel = o->cancel;
  to->rpc = NULL;
  *rr = NULL;
  if (strcmp(o->runner, "rpc")) return TS_OK;
  tun_rpc_opts ro = o->ro;
  ro.log = o->verbose ? stderr : NULL;
  ts_status st = tun_rpc_runner_new(&ro, rr, d);
  to->rpc = *rr;
  return st;
}

static void result_out(void *dst, size_t size, const void *src, size_t n) {
  if (!dst) return;
  size_t k = size < n ? size : n;
  if (k > sizeof(size_t)) memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), k - sizeof(size_t));
}

tessel_status tessel_tune(const tessel_func *f, const tessel_opts *o, tessel_tune_result *res, tessel_error *err) {
  if (!f || !o) return capi_err(err, TESSEL_EINVAL, "tune: no kernel or no options given");
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  if (tune_setup(o, "tune", &tg, &d)) return capi_fail(err, &d);
  tun_tune_opts to;
  tun_rpc_runner *rr;
  if (tune_opts_for(o, &to, &rr, &d)) return capi_fail(err, &d);
  tun_tune_result r;
  ts_status st = tun_tune(f->func, f->definition, f->flops, &tg, &to, &r, &d);
  tun_runoff_result ro; /* as `tessel tune`: the run-off's winner is the log's best */
  if (!st && !r.cancelled && !to.no_runoff && !(st = tun_runoff(f->func, &tg, &to, NULL, &ro, &d)) &&
      ro.best_seconds > 0) {
    r.best_seconds = ro.best_seconds;
    r.best_gflops = f->flops > 0 ? f->flops / ro.best_seconds * 1e-9 : 0;
  }
  tun_rpc_runner_free(rr);
  tessel_tune_result out = {.size = sizeof out, .trials = r.trials, .new_trials = r.new_trials, .errors = r.errors,
                            .best_seconds = r.best_seconds, .best_gflops = r.best_gflops,
                            .baseline_seconds = r.baseline_seconds, .baseline_gflops = r.baseline_gflops,
                            .wall_seconds = r.wall_seconds};
  snprintf(out.target, sizeof out.target, "%s", tg.text);
  if (res) result_out(res, res->size, &out, sizeof out);
  if (st) return capi_fail(err, &d);
  if (o->fn && !r.cancelled) o->fn(o->fn_ctx, r.trials, o->tune.trials, r.best_seconds); /* also when the log met the budget */
  if (r.cancelled)
    return capi_err(err, TESSEL_ECANCELED, "tune: cancelled at %d of %d trials (the log %s keeps them)", r.trials,
                    o->tune.trials, o->tune.log_path);
  return TESSEL_OK;
}

/* tun_model_tasks for the model at path, checked as `tessel tune-model`
 * checks it; *m is set even on failure (ir_module_free). */
static ts_status model_tasks(const char *path, const tessel_opts *o, ir_module **m, tg_task **tasks, int *n,
                             ts_diag *d) {
  *m = NULL;
  size_t pl = path ? strlen(path) : 0;
  if (pl < 5 || strcmp(path + pl - 5, ".onnx"))
    return ts_diag_set(d, TS_EINVAL, "'%s' is not an ONNX model (a path ending in .onnx)", path ? path : "(null)");
  if (access(path, R_OK)) return ts_diag_set(d, TS_EIO, "cannot read '%s'", path);
  if (!(*m = ir_module_new())) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  tg_graph *g = NULL;
  ts_status st = tun_model_tasks(path, &o->model, *m, &g, tasks, n, d);
  if (!st && *n == 0) st = ts_diag_set(d, TS_EINVAL, "%s has no kernels to tune (every node folded away)", path);
  return st;
}

static void model_result_out(tessel_tune_model_result *res, const tun_tune_model_result *r, const cg_target *tg) {
  tessel_tune_model_result out = {.size = sizeof out, .ntasks = r->ntasks, .trials = r->trials,
                                  .new_trials = r->new_trials, .rounds = r->rounds,
                                  .estimated_seconds = r->estimated_seconds, .missing = r->missing,
                                  .wall_seconds = r->wall_seconds};
  snprintf(out.target, sizeof out.target, "%s", tg->text);
  if (res) result_out(res, res->size, &out, sizeof out);
}

tessel_status tessel_tune_model(const char *path, const tessel_opts *o, tessel_tune_model_result *res,
                                tessel_error *err) {
  if (!o) return capi_err(err, TESSEL_EINVAL, "tune-model: no options given");
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  if (tune_setup(o, "tune-model", &tg, &d)) return capi_fail(err, &d);
  ir_module *m = NULL;
  tg_task *tasks = NULL;
  tun_model_task *mt = NULL;
  tun_rpc_runner *rr = NULL;
  int ntasks = 0;
  tun_tune_model_result r;
  memset(&r, 0, sizeof r);
  ts_status st = model_tasks(path, o, &m, &tasks, &ntasks, &d);
  if (!st && !(mt = tun_model_sched_tasks(tasks, ntasks, o->verbose ? stderr : NULL)))
    st = ts_diag_set(&d, TS_ENOMEM, "out of memory");
  tun_tune_model_opts mo;
  tun_tune_model_opts_default(&mo);
  if (!st) st = tune_opts_for(o, &mo.tune, &rr, &d);
  char gopts[96];
  if (!st) {
    mo.progress = o->verbose ? stderr : NULL;
    mo.progress_tty = false;
    mo.model_name = path;
    mo.sched.kind = o->sched;
    mo.sched.seed = o->tune.seed;
    mo.measure_defaults = !o->no_default;
    mo.tune.graph_opts = tg_pass_opts_str(&o->model.graph, gopts, sizeof gopts);
    st = tun_tune_model(mt, ntasks, &tg, &mo, &r, &d);
  }
  tun_rpc_runner_free(rr);
  model_result_out(res, &r, &tg);
  bool cancelled = r.cancelled;
  if (!st && !cancelled && o->fn) o->fn(o->fn_ctx, r.trials, o->tune.trials, 0); /* the final state, always */
  tun_tune_model_result_fini(&r);
  ts_free(mt);
  if (tasks) tg_tasks_free(tasks, ntasks);
  ir_module_free(m);
  if (st) return capi_fail(err, &d);
  if (cancelled)
    return capi_err(err, TESSEL_ECANCELED, "tune-model: cancelled (the log %s keeps what was measured)",
                    o->tune.log_path);
  return TESSEL_OK;
}

/* ---- building ---------------------------------------------------------------------------- */

/* The best record of the log for f on tg that replays (the next best when it
 * does not), as `tessel build --log` picks it. */
static ts_status schedule_from_log(const char *log, const tessel_func *f, const cg_target *tg, bool verbose,
                                   sch_traced **out, ts_diag *d) {
  *out = NULL;
  tun_db *db = tun_db_load(log, verbose ? stderr : NULL, NULL, d);
  if (!db) return d->code ? d->code : ts_diag_set(d, TS_EIO, "log %s cannot be read", log);
  int n = 0;
  const tun_record **rs = tun_db_ranked(db, f->key, tg->text, &n);
  ts_status st = TS_OK;
  if (!n)
    st = ts_diag_set(d, TS_ENOTFOUND, "%s has no usable record for %.200s [%s] on %s (%d records of it, none verified "
                     "and error-free)", log, f->definition, f->key, tg->text, tun_db_count_for(db, f->key, tg->text));
  char last[1024] = "";
  for (int i = 0; i < n && !*out; i++) {
    ts_diag rd;
    ts_diag_clear(&rd);
    sch_trace *tr = sch_trace_from_json(rs[i]->trace, &rd);
    if (tr) *out = sch_trace_replay(tr, f->func, 1, &rd);
    sch_trace_free(tr);
    if (!*out) snprintf(last, sizeof last, "%.1000s", rd.msg);
  }
  if (n && !*out) st = ts_diag_set(d, TS_ESCHEDULE, "%s: none of the %d usable records replays (%s)", log, n, last);
  ts_free(rs);
  tun_db_close(db);
  return st;
}

tessel_status tessel_build(const tessel_func *f, const tessel_opts *o, const char *out, tessel_error *err) {
  if (!f || !o || !out) return capi_err(err, TESSEL_EINVAL, "build: a kernel, options and an output path are needed");
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  if (cg_target_parse(o->target ? o->target : "llvm", &tg, &d) || tun_resolve_target(&tg, &d))
    return capi_fail(err, &d);
  sch_traced *t = NULL;
  ts_status st = o->tune.log_path ? schedule_from_log(o->tune.log_path, f, &tg, o->verbose, &t, &d)
                                  : tun_schedule_opts(f->func, NULL, &tg, &o->tune.defaults, &t, &d);
  ts_arena ar;
  ts_arena_init(&ar);
  /* a schedule that re-lays a weight reads it packed: not the kernel's
   * declared signature, which callers fill (docs/LAYOUT.md) */
  if (!st) {
    const ir_func *ref = sch_layout_reference(&ar, f->func, sch_traced_trace(t), &d);
    if (!ref) st = d.code ? d.code : ts_diag_set(&d, TS_EINTERNAL, "build: layout reference failed");
    else if (ref != f->func)
      st = ts_diag_set(&d, TS_EUNSUPPORTED, "build: the schedule re-lays %.200s's weights (packed inputs); tune with "
                       "option no-layout-rewrite for a kernel with its declared signature", f->definition);
  }
  if (!st) st = tun_device_of(&tg)->build(sch_traced_func(t), &tg, out, NULL, NULL, &d);
  ts_arena_fini(&ar);
  sch_traced_free(t);
  return st ? capi_fail(err, &d) : TESSEL_OK;
}

tessel_status tessel_build_model(const char *path, const tessel_opts *o, const char *out, tessel_error *err) {
  if (!path || !o || !out) return capi_err(err, TESSEL_EINVAL, "build-model: a model, options and an output are needed");
  ts_diag d;
  ts_diag_clear(&d);
  if (access(path, R_OK)) return capi_err(err, TESSEL_EIO, "cannot read '%s'", path);
  tun_model_opts mo = o->model;
  for (int i = 0; i < mo.nsyms; i++) mo.sym_names[i] = mo.sym_buf[i]; /* into this copy */
  mo.target = o->target;
  mo.log = o->tune.log_path;
  mo.warn = o->verbose ? stderr : NULL;
  tun_model_result r;
  ts_status st = tun_model_build(path, out, &mo, &r, &d);
  tun_model_result_fini(&r);
  return st ? capi_fail(err, &d) : TESSEL_OK;
}
