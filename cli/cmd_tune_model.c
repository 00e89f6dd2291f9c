/* cmd_tune_model.c — `tessel tune-model MODEL.onnx`: import the model, run
 * the graph pass pipeline, extract its tasks (one per distinct fused
 * PrimFunc, weighted by how often the model calls it) and tune them under
 * one trial budget with the task scheduler (tuner/task_scheduler.h), into
 * one log that `tessel build MODEL.onnx --log LOG` replays. Runner options
 * are `tessel tune`'s (shared through cli.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/graph/passes.h"
#include "ir/struct.h"
#include "cli/cli.h"
#include "tuner/task_scheduler.h"

static const char usage[] =
    "usage: tessel tune-model MODEL.onnx --trials N --log LOG [--target T]\n"
    "         [--task-scheduler gradient|round-robin] [--sym NAME=VALUE ...] [--buckets NAME=V1,V2,... ...]\n"
    "         [--batch N] [--model xgb|random] [--cost-model FILE|default|none] [--seed S]\n"
    "         [--number N] [--repeat N]\n"
    "         [--min-repeat-ms MS] [--timeout S] [--cache-flush] [--threads N]\n"
    "         [--build-jobs N] [--no-default] [--json] [--winograd on|off|all] [--polyphase on|off] [--qdq on|off] [--conv-layout nchw|nchwc]\n"
    "         [--no-library] [--no-runoff]\n"
    "         [--runner local|rpc --tracker H:P --key K [--parallel N]\n"
    "          [--secret-file F] [--priority P] [--rpc-wait S] [--rpc-tries N]]\n"
    "Imports MODEL, runs the graph passes, and tunes its tasks (the distinct fused\n"
    "kernels; weight = how many times the model calls one) under one budget of N\n"
    "measurement trials in all. Each round gives one task a batch of trials (--batch,\n"
    "64, at most N / tasks) through the same search, builders and runners as\n"
    "`tessel tune`. The task is chosen by\n"
    "  gradient     (default) a round-robin warm-up until each task has had a round,\n"
    "               then the task whose next round should cut the estimated latency\n"
    "               most (Ansor's gradient: alpha 0.2, window 3, beta 2, and a random\n"
    "               task with probability 0.05)\n"
    "  round-robin  every task in turn.\n"
    "Every record goes to LOG; records already there (these tasks, this target) count\n"
    "toward N and restore each task's history: rerunning resumes, a met budget\n"
    "measures no trial. After every round a table (id, task, weight, MFLOP, best\n"
    "latency, GFLOP/s, trials) and the estimated end-to-end latency, the sum of\n"
    "weight x best latency, are printed to stderr (redrawn in place on a terminal).\n"
    "Tasks never tuned are estimated by their default schedule, measured once\n"
    "(--no-default: left out). Symbolic dims (e.g. batch) are bound at 1 for tuning,\n"
    "or at --sym NAME=VALUE (as `tessel tasks`); build with the same --sym values to\n"
    "find the records.\n"
    "--buckets NAME=V1,V2,... (shape buckets, repeatable): every task with a symbolic dim is tuned\n"
    "once per combination of the bucket symbols' values (named TASK@NAME=V,...), each its own task\n"
    "under the one budget; build with the same --buckets to get a kernel per bucket, which runs\n"
    "every size up to it (docs/MODEL.md \"Shape buckets\").\n"
    "--winograd, --polyphase, --qdq and --conv-layout switch graph passes that change the kernels (and keys):\n"
    "build with the same values.\n"
    "Library candidates (as `tessel tune`; --no-library: off): a task OpenBLAS or oneDNN\n"
    "covers gets the library's call as a candidate; the table's lib column says which\n"
    "tasks went to a library and by how much.\n"
    "Run-off (--no-runoff: off): at the end each task's best trial, default schedule and\n"
    "each library call's best are timed again back to back, interleaved, 5 rounds (median), and\n"
    "the winner is what `build --log` replays; the table says \"(run-off: WINNER, not\n"
    "WAS)\" where that changed the choice. Run-off records are no trials; a task whose\n"
    "latest run-off timed the same candidates is not run off again (docs/TUNING.md).\n"
    "--json prints {model, target, task_scheduler, trials, new_trials, rounds, tasks:\n"
    "[{name, key, weight, flops, best_seconds, gflops, default_seconds, trials, and with a\n"
    "library record library, library_seconds, kernel_seconds, after a run-off\n"
    "runoff: {candidates, changed, winner, was}}], estimated_latency_seconds, log,\n"
    "runoff: {tasks, changed, wall_seconds}}.\n";

enum { OPT_SCHED = 2000, OPT_NODEFAULT };

static void print_json(const char *path, const cg_target *tg, const tun_tune_model_opts *mo, const tun_tune_cli *cli,
                       const tun_tune_model_result *r, const tun_rpc_stats *rs) {
  json_t *j = json_object();
  json_object_set_new(j, "model", json_string(path));
  json_object_set_new(j, "target", json_string(tg->text));
  json_object_set_new(j, "task_scheduler", json_string(tun_sched_kind_name(mo->sched.kind)));
  json_object_set_new(j, "trials", json_integer(r->trials));
  json_object_set_new(j, "budget", json_integer(mo->tune.trials));
  json_object_set_new(j, "new_trials", json_integer(r->new_trials));
  json_object_set_new(j, "rounds", json_integer(r->rounds));
  json_object_set_new(j, "trials_per_round", json_integer(r->batch));
  json_t *ja = json_array();
  for (int i = 0; i < r->ntasks; i++) {
    const tun_model_task_status *t = &r->tasks[i];
    json_t *jt = json_object();
    json_object_set_new(jt, "name", json_string(t->name));
    json_object_set_new(jt, "key", json_string(t->key));
    json_object_set_new(jt, "weight", json_integer(t->weight));
    json_object_set_new(jt, "flops", json_real(t->flops));
    json_object_set_new(jt, "best_seconds", json_real(t->best_seconds));
    json_object_set_new(jt, "gflops",
                        json_real(t->best_seconds > 0 && t->flops > 0 ? t->flops / t->best_seconds * 1e-9 : 0));
    json_object_set_new(jt, "default_seconds", json_real(t->default_seconds));
    json_object_set_new(jt, "trials", json_integer(t->trials));
    json_object_set_new(jt, "rounds", json_integer(t->rounds));
    json_object_set_new(jt, "search_exhausted", json_boolean(t->dead));
    if (t->lib_seconds > 0) { /* library candidates: the best call, the best generated kernel */
      json_object_set_new(jt, "library", json_string(t->lib));
      json_object_set_new(jt, "library_seconds", json_real(t->lib_seconds));
      json_object_set_new(jt, "kernel_seconds", json_real(t->kernel_seconds));
    }
    if (t->runoff_cands) { /* the run-off (tuner/runoff.h): best_seconds is its winner's time */
      json_t *jr = json_pack("{s:i, s:b}", "candidates", t->runoff_cands, "changed", t->runoff_changed);
      if (t->runoff_changed) {
        json_object_set_new(jr, "winner", json_string(t->runoff_winner));
        json_object_set_new(jr, "was", json_string(t->runoff_was));
      }
      json_object_set_new(jt, "runoff", jr);
    }
    json_array_append_new(ja, jt);
  }
  json_object_set_new(j, "tasks", ja);
  json_object_set_new(j, "estimated_latency_seconds",
                      r->missing == r->ntasks ? json_null() : json_real(r->estimated_seconds));
  json_object_set_new(j, "estimated_from_default", json_integer(r->from_default));
  json_object_set_new(j, "estimated_missing", json_integer(r->missing));
  json_object_set_new(j, "log", json_string(mo->tune.log_path));
  json_object_set_new(j, "wall_seconds", json_real(r->wall_seconds));
  json_object_set_new(j, "runoff", json_pack("{s:i, s:i, s:f}", "tasks", r->runoffs, "changed", r->runoff_changes,
                                             "wall_seconds", r->runoff_seconds));
  if (cli->rpc) {
    json_t *jr = json_object();
    json_object_set_new(jr, "parallel", json_integer(cli->ro.parallel));
    json_object_set_new(jr, "sessions", json_integer(rs->sessions));
    json_object_set_new(jr, "measured", json_integer(rs->measured));
    json_object_set_new(jr, "board_failures", json_integer(rs->board_failures));
    json_object_set_new(jr, "retries", json_integer(rs->retries));
    json_object_set_new(jr, "lost", json_integer(rs->lost));
    json_object_set_new(j, "rpc", jr);
  }
  tun_cli_put_json("tune-model", j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(j);
}

static void print_text(const char *path, const cg_target *tg, const tun_tune_model_opts *mo,
                       const tun_tune_cli *cli, const tun_tune_model_result *r, const tun_rpc_stats *rs) {
  printf("%s on %s: %d tasks, %d trials (%d new, %d rounds) in %.1f s, log %s\n", path, tg->text, r->ntasks,
         r->trials, r->new_trials, r->rounds, r->wall_seconds, mo->tune.log_path);
  if (r->missing == r->ntasks)
    printf("estimated end-to-end latency: - (no task measured)\n");
  else
    printf("estimated end-to-end latency: %.4f ms (sum of weight x best latency%s%s)\n",
           r->estimated_seconds * 1e3, r->from_default ? "; default schedule for untuned tasks" : "",
           r->missing ? "; some tasks left out" : "");
  if (r->runoffs)
    printf("run-off: %d tasks in %.1f s, %d choices changed (the table's \"run-off:\" marks)\n", r->runoffs,
           r->runoff_seconds, r->runoff_changes);
  if (cli->rpc)
    printf("rpc: %d boards at once, %d sessions, %d measured, %d board failures, %d retried, %d lost\n",
           cli->ro.parallel, rs->sessions, rs->measured, rs->board_failures, rs->retries, rs->lost);
}

/* Parses argv into cli, mo and bo; the model path, or NULL with *rc set
 * (0 after --help, 2 on bad usage). */
static const char *parse_args(int argc, char **argv, tun_tune_cli *cli, tun_tune_model_opts *mo,
                              tun_model_opts *bo, int *rc) {
  static const struct option own[] = {{"help", no_argument, 0, 'h'},
                                      {"task-scheduler", required_argument, 0, OPT_SCHED},
                                      {"no-default", no_argument, 0, OPT_NODEFAULT},
                                      {0, 0, 0, 0}};
  const struct option *const mine[] = {own, tun_cli_model_options};
  struct option model_own[16], opts[64];
  *rc = 2;
  if (!tun_cli_options_join(model_own, 16, mine, 2) || !tun_tune_cli_options(opts, 64, model_own)) {
    fprintf(stderr, "tessel tune-model: the option tables do not fit (a tessel bug)\n");
    return NULL;
  }
  ts_diag d;
  ts_diag_clear(&d);
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    switch (c) {
    case OPT_SCHED:
      if (tun_sched_kind_parse(optarg, &mo->sched.kind, &d)) {
        fprintf(stderr, "tessel tune-model: --task-scheduler: %s\n", d.msg);
        return NULL;
      }
      break;
    case OPT_NODEFAULT: mo->measure_defaults = false; break;
    default: {
      int k = tun_cli_model_option("tune-model", c, optarg, bo);
      if (k < 0 || (k == 0 && !tun_tune_cli_option(cli, c, optarg))) return NULL;
    }
    }
  }
  if (g.rc >= 0) {
    *rc = g.rc;
    return NULL;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "tessel tune-model: expected one MODEL.onnx (see --help)\n");
    return NULL;
  }
  const char *path = argv[optind];
  size_t pl = strlen(path);
  if (pl < 5 || strcmp(path + pl - 5, ".onnx")) {
    fprintf(stderr, "tessel tune-model: '%s' is not an ONNX model (a path ending in .onnx); "
                    "`tessel tune` tunes one kernel\n", path);
    return NULL;
  }
  if (access(path, R_OK)) {
    fprintf(stderr, "tessel tune-model: cannot read '%s'\n", path);
    return NULL;
  }
  *rc = 0;
  return path;
}

int tun_cmd_tune_model(int argc, char **argv) {
  tun_tune_cli cli;
  tun_tune_cli_init(&cli);
  cli.cmd = "tune-model";
  tun_tune_model_opts mo;
  tun_tune_model_opts_default(&mo);
  tun_model_opts bo;
  tun_model_opts_init(&bo);
  int rc;
  const char *path = parse_args(argc, argv, &cli, &mo, &bo, &rc);
  if (!path) return rc;
  cg_target tg;
  if ((rc = tun_tune_cli_setup(&cli, "tune-model", &tg))) return rc;

  ts_diag d;
  ts_diag_clear(&d);
  ir_module *m = NULL;
  tg_graph *g = NULL;
  tg_task *tasks = NULL;
  tun_model_task *mt = NULL;
  int ntasks = 0;
  rc = tun_cli_model_tasks("tune-model", path, &bo, &m, &g, &tasks, &ntasks);
  if (rc) goto out;
  rc = 2;
  if (ntasks == 0) {
    fprintf(stderr, "tessel tune-model: %s has no kernels to tune (every node folded away)\n", path);
    goto out;
  }
  if (!(mt = tun_model_sched_tasks(tasks, ntasks, stderr))) {
    fprintf(stderr, "tessel tune-model: out of memory\n");
    goto out;
  }
  mo.tune = cli.o;
  mo.tune.progress = stderr;
  mo.tune.progress_tty = isatty(STDERR_FILENO);
  mo.progress = stderr;
  mo.progress_tty = mo.tune.progress_tty;
  mo.model_name = path;
  mo.sched.seed = cli.o.seed;
  char gopts[96]; /* the graph switches change the kernels: every record says which were on */
  mo.tune.graph_opts = tg_pass_opts_str(&bo.graph, gopts, sizeof gopts);
  if ((rc = tun_tune_cli_start_runner(&cli, "tune-model"))) goto out;
  mo.tune.rpc = cli.o.rpc;
  tun_tune_model_result r;
  ts_status st = tun_tune_model(mt, ntasks, &tg, &mo, &r, &d);
  tun_rpc_stats rs;
  tun_tune_cli_stop_runner(&cli, &rs);
  if (st) fprintf(stderr, "tessel tune-model: %s\n", d.msg);
  if (cli.json) print_json(path, &tg, &mo, &cli, &r, &rs);
  else print_text(path, &tg, &mo, &cli, &r, &rs);
  tun_tune_model_result_fini(&r);
  rc = st ? 1 : 0;
out:
  ts_free(mt);
  if (tasks) tg_tasks_free(tasks, ntasks);
  ir_module_free(m);
  return rc;
}
