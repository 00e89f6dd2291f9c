/* cmd_tune.c — `tessel tune`: tune one kernel against a trial budget,
 * logging every measured candidate to a JSONL log (resumable), and report
 * the best against the default schedule. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "cli/cli.h"
#include "tuner/build.h"
#include "tuner/rpc_runner.h"
#include "tuner/library.h"
#include "tuner/runoff.h"
#include "tuner/tune.h"

static const char tune_usage[] =
    "usage: tessel tune SUBJECT --trials N --log LOG [--target T] [--batch N]\n"
    "         [--model xgb|random] [--seed S] [--number N] [--repeat N]\n"
    "         [--min-repeat-ms MS] [--timeout S] [--cache-flush] [--cpu-time] [--threads N]\n"
    "         [--build-jobs N] [--slow-cutoff F] [--first-batch N] [--json]\n"
    "         [--no-layout-rewrite] [--no-tensorize] [--no-tensor-core] [--gpu-regcheck]\n"
    "         [--no-default-tiling] [--xgb-min-samples N] [--xgb-max-rounds N] [--no-library]\n"
    "         [--cost-model FILE|default|none] [--no-runoff]\n"
    "         [--runner local|rpc --tracker H:P --key K [--parallel N]\n"
    "          [--secret-file F] [--priority P] [--rpc-wait S] [--rpc-tries N]]\n"
    "Searches schedules of SUBJECT (evolutionary search ranked by the cost model),\n"
    "builds, times (forked child) and verifies each candidate, and appends one record\n"
    "per candidate to LOG (JSONL). Records already in LOG for this workload and\n"
    "target count toward N: rerunning resumes, and a met budget appends nothing.\n"
    "The default schedule is the first candidate: measured as the baseline and logged\n"
    "like any other (a resumed run reads the baseline back from that record).\n"
    "LOG is locked while tuning: a second tuner on the same LOG is refused.\n"
    "--slow-cutoff F (10; 0 = off): a candidate whose warm-up call is over F times\n"
    "the best time so far is recorded with that one call, not timed --repeat times.\n"
    "--first-batch N: the search's first batch has at most N candidates (then --batch).\n"
    "--cpu-time: time kernels with the process's CPU clock, not wall time (with --threads 1\n"
    "the time other processes took from the kernel on a shared machine does not count).\n"
    "--no-layout-rewrite: keep the layout of weights (inputs a model feeds from constants,\n"
    "marked layout_free_buffers) instead of re-laying them (docs/LAYOUT.md).\n"
    "A/B switches: --no-tensorize (CPU intrinsic rule off, docs/TENSORIZE.md),\n"
    "--no-tensor-core (cuda WMMA rule off), --no-default-tiling (plain default schedule),\n"
    "--gpu-regcheck (VerifyGPUCode compiles each candidate and checks registers, docs/CUDA.md),\n"
    "--xgb-min-samples N (50), --xgb-max-rounds N (150) (docs/COSTMODEL.md).\n"
    "Library candidates: a task OpenBLAS or oneDNN covers (an f32 matrix product) gets\n"
    "each library's call measured as one more candidate, logged as a library record,\n"
    "on a host llvm target (cuBLAS's sgemm on a cuda target) and never through RPC;\n"
    "--no-library turns them off\n"
    "(docs/TUNING.md, \"Library candidates\").\n"
    "Run-off: at the end, the best trial, the default schedule's record and each library\n"
    "call's best record are timed again back to back, interleaved, 5 rounds (median), and\n"
    "the winner is what `build --log` replays (logged as run-off records, no trials;\n"
    "docs/TUNING.md, \"Run-off\"); --no-runoff: off, the best single measurement wins.\n"
    "--cost-model FILE|default|none (--model xgb): start from a pre-trained model and keep\n"
    "training it online; default: the committed one (warning on a target mismatch);\n"
    "none (also without the option): online only.\n"
    "--json prints {workload, target, trials, errors, best_seconds, best_gflops,\n"
    "baseline_gflops, log, wall_seconds, phases}; phases gives the wall seconds of\n"
    "search, train, build, measure, verify, baseline and resume (docs/COSTMODEL.md).\n"
    "--runner rpc measures on remote boards: the tracker grants up to N sessions on\n"
    "servers registered under key K (one thread each); candidates are built here for\n"
    "the board's triple (--target, else the triple a granted board reports) while\n"
    "the boards measure. A board that fails mid-measurement (connection lost, reply\n"
    "timeout, grant revoked) gets its candidate retried on another board (at most\n"
    "--rpc-tries boards, 3); that is never logged as the kernel's error. The secret\n"
    "is --secret-file F or the file named by $TESSEL_RPC_SECRET_FILE.\n";

enum { OPT_TARGET = 1000, OPT_TRIALS, OPT_LOG, OPT_BATCH, OPT_MODEL, OPT_SEED, OPT_JOBS, OPT_JSON,
       OPT_RUNNER, OPT_TRACKER, OPT_KEY, OPT_PARALLEL, OPT_SECRET, OPT_PRIORITY, OPT_RPCWAIT,
       OPT_RPCTRIES, OPT_SLOWCUT, OPT_FIRSTBATCH, OPT_NOLAYOUT, OPT_NOTENSORIZE, OPT_NOTENSORCORE,
       OPT_REGCHECK, OPT_NODEFTILING, OPT_XGBMIN, OPT_XGBROUNDS, OPT_NOLIBRARY, OPT_COSTMODEL,
       OPT_NORUNOFF };

/* The options `tessel tune` and `tessel tune-model` share. */
static const struct option shared_options[] = {{"target", required_argument, 0, OPT_TARGET},
                                               {"trials", required_argument, 0, OPT_TRIALS},
                                               {"log", required_argument, 0, OPT_LOG},
                                               {"batch", required_argument, 0, OPT_BATCH},
                                               {"model", required_argument, 0, OPT_MODEL},
                                               {"seed", required_argument, 0, OPT_SEED},
                                               {"build-jobs", required_argument, 0, OPT_JOBS},
                                               {"json", no_argument, 0, OPT_JSON},
                                               {"runner", required_argument, 0, OPT_RUNNER},
                                               {"tracker", required_argument, 0, OPT_TRACKER},
                                               {"key", required_argument, 0, OPT_KEY},
                                               {"parallel", required_argument, 0, OPT_PARALLEL},
                                               {"secret-file", required_argument, 0, OPT_SECRET},
                                               {"priority", required_argument, 0, OPT_PRIORITY},
                                               {"rpc-wait", required_argument, 0, OPT_RPCWAIT},
                                               {"rpc-tries", required_argument, 0, OPT_RPCTRIES},
                                               {"slow-cutoff", required_argument, 0, OPT_SLOWCUT},
                                               {"first-batch", required_argument, 0, OPT_FIRSTBATCH},
                                               {"no-layout-rewrite", no_argument, 0, OPT_NOLAYOUT},
                                               {"no-tensorize", no_argument, 0, OPT_NOTENSORIZE},
                                               {"no-tensor-core", no_argument, 0, OPT_NOTENSORCORE},
                                               {"gpu-regcheck", no_argument, 0, OPT_REGCHECK},
                                               {"no-default-tiling", no_argument, 0, OPT_NODEFTILING},
                                               {"xgb-min-samples", required_argument, 0, OPT_XGBMIN},
                                               {"xgb-max-rounds", required_argument, 0, OPT_XGBROUNDS},
                                               {"no-library", no_argument, 0, OPT_NOLIBRARY},
                                               {"cost-model", required_argument, 0, OPT_COSTMODEL},
                                               {"no-runoff", no_argument, 0, OPT_NORUNOFF},
                                               {0, 0, 0, 0}};

bool tun_tune_cli_options(struct option *out, size_t cap, const struct option *own) {
  const struct option *const tables[] = {own, shared_options, tun_cli_measure_options};
  return tun_cli_options_join(out, cap, tables, 3);
}

void tun_tune_cli_init(tun_tune_cli *c) {
  memset(c, 0, sizeof *c);
  tun_tune_opts_default(&c->o);
  c->cmd = "tune";
  c->o.trials = -1;
  c->runner = "local";
  tun_rpc_opts_default(&c->ro);
}

bool tun_tune_cli_option(tun_tune_cli *c, int opt, const char *arg) {
  tun_tune_opts *o = &c->o;
  tun_rpc_opts *ro = &c->ro;
  const char *cmd = c->cmd ? c->cmd : "tune";
  bool ok = true;
  switch (opt) {
  case OPT_TARGET: c->target = arg; break;
  case OPT_TRIALS: ok = tun_cli_int(cmd, "--trials", arg, 0, 100000000, &o->trials); break;
  case OPT_LOG: o->log_path = arg; break;
  case OPT_BATCH: ok = tun_cli_int(cmd, "--batch", arg, 1, 1 << 16, &o->batch); break;
  case OPT_MODEL: o->model = arg; break;
  case OPT_SEED: ok = tun_cli_seed(cmd, "--seed", arg, &o->seed); break;
  case OPT_JOBS: ok = tun_cli_int(cmd, "--build-jobs", arg, 0, 4096, &o->build_jobs); break;
  case OPT_JSON: c->json = true; break;
  case OPT_RUNNER: c->runner = arg; break;
  case OPT_TRACKER: ro->tracker = arg; break;
  case OPT_KEY: ro->key = arg; break;
  case OPT_PARALLEL: ok = tun_cli_int(cmd, "--parallel", arg, 1, 256, &ro->parallel); break;
  case OPT_SECRET: ro->secret_file = arg; break;
  case OPT_PRIORITY: ok = tun_cli_int(cmd, "--priority", arg, -1000000, 1000000, &ro->priority); break;
  case OPT_RPCWAIT: ok = tun_cli_real(cmd, "--rpc-wait", arg, 0, 1e7, &ro->wait_s); break;
  case OPT_RPCTRIES: ok = tun_cli_int(cmd, "--rpc-tries", arg, 1, 1000, &ro->max_tries); break;
  case OPT_SLOWCUT: ok = tun_cli_real(cmd, "--slow-cutoff", arg, 0, 1e9, &o->slow_cutoff); break;
  case OPT_FIRSTBATCH: ok = tun_cli_int(cmd, "--first-batch", arg, 0, 1 << 16, &o->first_batch); break;
  /* the RewriteLayout postprocessor reads it (search/postproc/postproc.c, docs/LAYOUT.md) */
  case OPT_NOLAYOUT: o->postproc.no_layout_rewrite = true; break;
  case OPT_NOTENSORIZE:
    o->space.rule_mask = srch_rule_mask_without(o->space.rule_mask, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR);
    break;
  case OPT_NOTENSORCORE:
    o->space.rule_mask = srch_rule_mask_without(o->space.rule_mask, SRCH_RULE_GPU_TENSOR_CORE);
    break;
  case OPT_REGCHECK: o->gpu_regcheck = true; break;
  case OPT_NODEFTILING: o->defaults.no_tiling = true; break;
  case OPT_NOLIBRARY: o->no_library = true; break; /* tuner/library.h */
  case OPT_NORUNOFF: o->no_runoff = true; break;   /* tuner/runoff.h */
  case OPT_XGBMIN:
    ok = tun_cli_int(cmd, "--xgb-min-samples", arg, 0, 100000000, &o->xgb_min_samples);
    if (o->xgb_min_samples < 1) o->xgb_min_samples = 1;
    break;
  case OPT_XGBROUNDS: ok = tun_cli_int(cmd, "--xgb-max-rounds", arg, 0, 1000000, &o->xgb_max_rounds); break;
  case OPT_COSTMODEL: o->cost_model = arg; break; /* FILE|default|none (docs/COSTMODEL.md) */
  default: return tun_cli_measure_option(cmd, &o->measure, opt, arg) > 0;
  }
  return ok;
}

int tun_tune_cli_setup(tun_tune_cli *c, const char *cmd, cg_target *tg) {
  tun_tune_opts *o = &c->o;
  tun_rpc_opts *ro = &c->ro;
  if (o->trials < 0 || !o->log_path) {
    fprintf(stderr, "tessel %s: --trials N and --log LOG are required\n", cmd);
    return 2;
  }
  if (o->batch < 1 || o->measure.repeat < 1 || o->measure.repeat > TSRT_MAX_REPEAT ||
      o->measure.timeout_s <= 0 || (strcmp(o->model, "xgb") && strcmp(o->model, "random"))) {
    fprintf(stderr, "tessel %s: --batch >= 1, --repeat 1..%d, --timeout > 0, --model xgb|random\n", cmd,
            TSRT_MAX_REPEAT);
    return 2;
  }
  c->rpc = !strcmp(c->runner, "rpc");
  if (!c->rpc && strcmp(c->runner, "local")) {
    fprintf(stderr, "tessel %s: --runner local|rpc\n", cmd);
    return 2;
  }
  if (c->rpc && (!ro->tracker || !ro->key || ro->parallel < 1 || ro->parallel > 256 || ro->max_tries < 1)) {
    fprintf(stderr, "tessel %s: --runner rpc needs --tracker H:P and --key K (--parallel 1..256, "
                    "--rpc-tries >= 1)\n", cmd);
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  const char *target = c->target;
  if (!target && c->rpc) { /* the board says what it is */
    char triple[128];
    if (tun_rpc_board_triple(ro, triple, sizeof triple, &d)) {
      fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
      return 1;
    }
    snprintf(c->board_target, sizeof c->board_target, "llvm -mtriple=%s", triple);
    target = c->board_target;
  }
  if (!target) target = "llvm";
  if (cg_target_parse(target, tg, &d) || tun_resolve_target(tg, &d)) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  return 0;
}

int tun_tune_cli_start_runner(tun_tune_cli *c, const char *cmd) {
  if (!c->rpc) return 0;
  ts_diag d;
  ts_diag_clear(&d);
  c->ro.log = stderr;
  if (tun_rpc_runner_new(&c->ro, &c->rr, &d)) {
    fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
    return 2;
  }
  c->o.rpc = c->rr;
  return 0;
}

void tun_tune_cli_stop_runner(tun_tune_cli *c, tun_rpc_stats *rs) {
  memset(rs, 0, sizeof *rs);
  if (!c->rr) return;
  tun_rpc_get_stats(c->rr, rs);
  tun_rpc_runner_free(c->rr);
  c->rr = NULL;
  c->o.rpc = NULL;
}

int tun_cmd_tune(int argc, char **argv) {
  static const struct option help[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  struct option opts[64];
  if (!tun_tune_cli_options(opts, 64, help)) return 2;
  tun_tune_cli cli;
  tun_tune_cli_init(&cli);
  tun_tune_opts *po = &cli.o;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, tune_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));)
    if (!tun_tune_cli_option(&cli, c, optarg)) return 2;
  if (g.rc >= 0) return g.rc;
  if (optind != argc - 1) {
    fprintf(stderr, "tessel tune: expected one SUBJECT (see --help)\n");
    return 2;
  }
  cg_target tg;
  int rc = tun_tune_cli_setup(&cli, "tune", &tg);
  if (rc) return rc;
  ts_diag d;
  ts_diag_clear(&d);
  bool rpc = cli.rpc, json = cli.json;
  tun_rpc_opts ro = cli.ro;
  ts_arena ar;
  ts_arena_init(&ar);
  tun_subject sub;
  if (tun_subject_load(&ar, argv[optind], &sub, &d)) {
    fprintf(stderr, "tessel tune: %s\n", d.msg);
    ts_arena_fini(&ar);
    return 2;
  }
  if (sub.func->nsyms) {
    fprintf(stderr, "tessel tune: %s has symbolic sizes; bind them first\n", sub.label);
    ts_arena_fini(&ar);
    return 2;
  }
  double flops = sub.is_workload ? ir_wl_flops(&sub.wl) : 0;
  po->progress = stderr;
  po->progress_tty = isatty(STDERR_FILENO);
  if ((rc = tun_tune_cli_start_runner(&cli, "tune"))) {
    ts_arena_fini(&ar);
    return rc;
  }
  tun_tune_result r;
  ts_status st = tun_tune(sub.func, sub.label, flops, &tg, po, &r, &d);
  tun_rpc_stats rs;
  tun_tune_cli_stop_runner(&cli, &rs);
  tun_runoff_result ror;
  memset(&ror, 0, sizeof ror);
  ror.skipped = po->no_runoff ? "--no-runoff" : "not run";
  if (!st && !r.cancelled && !po->no_runoff && !(st = tun_runoff(sub.func, &tg, po, NULL, &ror, &d)) &&
      ror.best_seconds > 0) { /* the run-off's winner is the log's best now */
    r.best_seconds = ror.best_seconds;
    r.best_gflops = flops > 0 ? flops / ror.best_seconds * 1e-9 : 0;
    if (ror.default_seconds > 0) { /* timed with the others: the fair baseline */
      r.baseline_seconds = ror.default_seconds;
      r.baseline_gflops = flops > 0 ? flops / ror.default_seconds * 1e-9 : 0;
    }
    if (ror.lib_seconds > 0) {
      r.lib_seconds = ror.lib_seconds;
      r.kernel_seconds = ror.kernel_seconds;
    }
  }
  if (st) fprintf(stderr, "tessel tune: %s\n", d.msg);
  if (st && !r.new_trials) { /* nothing was tuned: no summary to print */
    ts_arena_fini(&ar);
    return 1;
  }
  if (json) {
    json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:s?, s:f}", "workload", sub.label, "target", tg.text,
                          "trials", (json_int_t)r.trials, "errors", (json_int_t)r.errors, "best_seconds",
                          r.best_seconds, "best_gflops", r.best_gflops, "baseline_gflops", r.baseline_gflops, "log",
                          po->log_path, "wall_seconds", r.wall_seconds);
    json_object_set_new(
        j, "phases",
        json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I}", "search", r.search_seconds, "train",
                  r.train_seconds, "build", r.build_seconds, "measure", r.measure_seconds, "verify", r.verify_seconds,
                  "baseline", r.baseline_seconds_wall, "resume", r.resume_seconds, "search_replay_thread_s",
                  r.search_replay_seconds, "search_predict", r.search_predict_seconds, "search_replays",
                  (json_int_t)r.search_replays, "search_cache_hits", (json_int_t)r.search_cache_hits));
    json_object_set_new(j, "threads", json_integer(r.threads));
    if (ror.ncands)
      json_object_set_new(j, "runoff", json_pack("{s:I, s:s, s:s, s:b, s:f, s:f, s:f}", "candidates",
                                                 (json_int_t)ror.ncands, "winner", ror.winner, "was", ror.was,
                                                 "changed", ror.changed, "seconds", ror.best_seconds,
                                                 "trial_seconds", ror.trial_seconds, "wall_seconds",
                                                 ror.wall_seconds));
    else
      json_object_set_new(j, "runoff", json_pack("{s:s}", "skipped", ror.skipped));
    if (r.lib_seconds > 0) /* library candidates: the best call and the best generated kernel */
      json_object_set_new(j, "library", json_pack("{s:s, s:f, s:f}", "lib", r.lib, "seconds", r.lib_seconds,
                                                  "kernel_seconds", r.kernel_seconds));
    if (rpc)
      json_object_set_new(j, "rpc",
                          json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "parallel", (json_int_t)ro.parallel, "sessions",
                                    (json_int_t)rs.sessions, "measured", (json_int_t)rs.measured, "board_failures",
                                    (json_int_t)rs.board_failures, "retries", (json_int_t)rs.retries, "lost",
                                    (json_int_t)rs.lost));
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) puts(s);
    free(s);
    json_decref(j);
  } else {
    printf("%s on %s: %d trials (%d new, %d errors) in %.1f s, log %s", sub.label, tg.text, r.trials,
           r.new_trials, r.errors, r.wall_seconds, po->log_path);
    if (r.threads > 0) printf(" (measured at %d thread%s)", r.threads, r.threads == 1 ? "" : "s");
    printf("\n");
    if (r.best_seconds > 0 && r.baseline_seconds > 0 && flops > 0)
      printf("best %.2f GFLOP/s vs default schedule %.2f GFLOP/s (%.2fx %s)\n", r.best_gflops,
             r.baseline_gflops, r.baseline_seconds / r.best_seconds,
             r.baseline_seconds >= r.best_seconds ? "faster" : "as fast: slower than the default");
    else if (r.best_seconds > 0 && r.baseline_seconds > 0)
      printf("best %.6g ms vs default schedule %.6g ms (%.2fx faster)\n", r.best_seconds * 1e3,
             r.baseline_seconds * 1e3, r.baseline_seconds / r.best_seconds);
    else if (r.best_seconds > 0)
      printf("best %.2f GFLOP/s (%.6g ms)\n", r.best_gflops, r.best_seconds * 1e3);
    else
      printf("no valid candidate yet\n");
    if (ror.ncands)
      printf("run-off: %d candidates in %.1f s, %s %s%s\n", ror.ncands, ror.wall_seconds, ror.winner,
             ror.changed ? "chosen over " : "stays the choice", ror.changed ? ror.was : "");
    if (r.lib_seconds > 0) {
      char cell[40];
      tun_library_cell(r.lib_seconds, r.lib, r.kernel_seconds, cell, sizeof cell);
      printf("library %s: %.6g ms, best generated kernel %.6g ms (%s)\n", r.lib, r.lib_seconds * 1e3,
             r.kernel_seconds * 1e3, cell);
    }
    if (rpc)
      printf("rpc: %d boards at once, %d sessions, %d measured, %d board failures, %d retried, %d lost\n",
             ro.parallel, rs.sessions, rs.measured, rs.board_failures, rs.retries, rs.lost);
  }
  ts_arena_fini(&ar);
  return st ? 1 : 0;
}
