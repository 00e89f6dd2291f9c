/* cmd_costmodel_data.c — `tessel costmodel dataset --log LOG --trials N
 * [--workloads W] [--corpus-seed S] [--time-limit SEC] [--list] [tune
 * options]`: the cost model's training set. Takes the first W workloads of
 * the corpus (costmodel/corpus.c: ResNet-50, MobileNetV2 and BERT layers,
 * then seeded random ones) and tunes each with the normal tuner (local or
 * `--runner rpc`) for N trials into one ordinary tuning log, by default with
 * the random model so the sampled schedules are not steered by a model.
 * Resumable: a workload whose budget the log already holds measures nothing,
 * so rerunning (or rerunning with a larger W) only adds what is missing.
 * --time-limit stops starting new workloads after SEC seconds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "costmodel/costmodel.h"
#include "ir/workloads/workloads.h"
#include "runtime/runtime.h"

static const char data_usage[] =
    "usage: tessel costmodel dataset --log LOG --trials N [--workloads W] [--corpus-seed S]\n"
    "         [--time-limit SEC] [--list] [tune options: --target, --batch, --model, --seed,\n"
    "         --threads, --runner rpc ...]\n"
    "Tunes each of the first W corpus workloads (default: the fixed ResNet/MobileNet/BERT\n"
    "layers, then random ones up to W) for N trials into LOG (--model defaults to random).\n"
    "Rerunning resumes. --list prints the corpus specs and exits (--list --heldout: the\n"
    "benchmark's held-out workloads, which the corpus never holds).\n";

enum { OPT_NWL = 2100, OPT_CSEED, OPT_TLIMIT, OPT_LIST, OPT_HELDOUT };

/* Tunes one corpus spec; 0 or 1 (printed). */
static int tune_spec(tun_tune_cli *cli, const char *spec, const cg_target *tg, int *new_trials) {
  ts_arena a;
  ts_arena_init(&a);
  ts_diag d;
  ts_diag_clear(&d);
  ir_wl_inst w;
  ir_func *f = NULL;
  char label[512];
  int rc = 0;
  if (ir_wl_parse(spec, &w, &d) || ir_wl_build(&a, &w, &f, &d)) {
    fprintf(stderr, "tessel costmodel dataset: %s: %s\n", spec, d.msg);
    rc = 1;
  } else {
    ir_wl_canonical(&w, label, sizeof label);
    tun_tune_result r;
    memset(&r, 0, sizeof r);
    if (tun_tune(f, label, ir_wl_flops(&w), tg, &cli->o, &r, &d)) {
      fprintf(stderr, "tessel costmodel dataset: %s: %s\n", label, d.msg);
      rc = r.new_trials ? 0 : 1;
    }
    *new_trials += r.new_trials;
    fprintf(stderr, "dataset: %s: %d trials (%d new), best %.2f GFLOP/s\n", label, r.trials, r.new_trials,
            r.best_gflops);
  }
  ts_arena_fini(&a);
  return rc;
}

int tun_cmd_costmodel_dataset(int argc, char **argv) {
  static const struct option own[] = {{"workloads", required_argument, 0, OPT_NWL},
                                      {"corpus-seed", required_argument, 0, OPT_CSEED},
                                      {"time-limit", required_argument, 0, OPT_TLIMIT},
                                      {"list", no_argument, 0, OPT_LIST},
                                      {"heldout", no_argument, 0, OPT_HELDOUT},
                                      {"help", no_argument, 0, 'h'},
                                      {0, 0, 0, 0}};
  struct option opts[80];
  if (!tun_tune_cli_options(opts, 80, own)) return 2;
  tun_tune_cli cli;
  tun_tune_cli_init(&cli);
  cli.cmd = "costmodel dataset";
  cli.o.model = "random";
  int nwl = cm_corpus_fixed_count();
  uint64_t cseed = 1;
  double tlimit = 0;
  bool list = false, heldout = false;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, data_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    bool ok = true;
    if (c == OPT_NWL) ok = tun_cli_int("costmodel dataset", "--workloads", optarg, 1, 1000000, &nwl);
    else if (c == OPT_CSEED) ok = tun_cli_seed("costmodel dataset", "--corpus-seed", optarg, &cseed);
    else if (c == OPT_TLIMIT) ok = tun_cli_real("costmodel dataset", "--time-limit", optarg, 0, 1e9, &tlimit);
    else if (c == OPT_LIST) list = true;
    else if (c == OPT_HELDOUT) heldout = true;
    else ok = tun_tune_cli_option(&cli, c, optarg);
    if (!ok) return 2;
  }
  if (g.rc >= 0) return g.rc;
  if (optind != argc) {
    fprintf(stderr, "tessel costmodel dataset: unexpected argument '%s'\n%s", argv[optind], data_usage);
    return 2;
  }
  char spec[512];
  if (list && heldout) { /* the benchmark's workloads, never in the corpus */
    for (int i = 0; i < cm_corpus_heldout_count(); i++) printf("%s\n", cm_corpus_heldout(i));
    return 0;
  }
  if (list) {
    for (int i = 0; i < nwl; i++) {
      cm_corpus_spec(cseed, i, spec, sizeof spec);
      printf("%s\n", spec);
    }
    return 0;
  }
  cg_target tg;
  int rc = tun_tune_cli_setup(&cli, "costmodel dataset", &tg);
  if (rc || (rc = tun_tune_cli_start_runner(&cli, "costmodel dataset"))) return rc;
  cli.o.progress = stderr;
  cli.o.progress_tty = isatty(STDERR_FILENO);
  double t0 = tsrt_now();
  int done = 0, failed = 0, new_trials = 0;
  for (int i = 0; i < nwl; i++) {
    if (tlimit > 0 && tsrt_now() - t0 > tlimit) {
      fprintf(stderr, "dataset: time limit reached after %d of %d workloads (rerun to go on)\n", i, nwl);
      break;
    }
    cm_corpus_spec(cseed, i, spec, sizeof spec);
    if (tune_spec(&cli, spec, &tg, &new_trials)) failed++;
    else done++;
  }
  tun_rpc_stats rs;
  tun_tune_cli_stop_runner(&cli, &rs);
  printf("dataset: %d workloads tuned (%d failed), %d new trials in %.0f s, log %s\n", done, failed,
         new_trials, tsrt_now() - t0, cli.o.log_path);
  return failed && !done ? 1 : 0;
}
