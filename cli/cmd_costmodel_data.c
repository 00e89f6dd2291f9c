/* cmd_costmodel_data.c — `tessel costmodel dataset --log LOG --trials N
 * [--workloads W] [--corpus-seed S] [--time-limit SEC] [--list] [tune
 * options]`: the cost model's training set. Takes the first W workloads of
 * the corpus (costmodel/corpus.c: ResNet-50, MobileNetV2 and BERT layers,
 * then seeded random ones) and tunes each with the normal tuner (local or
 * `--runner rpc`) for N trials into one ordinary tuning log, by default with
 * the random model so the sampled schedules are not steered by a model.
 * Resumable: a workload whose budget the log already holds measures nothing,
 * so rerunning (or rerunning with a larger W) only adds what is missing.
 * --time-limit stops starting new workloads after SEC seconds. --order
 * small-first tunes the same W workloads by family in round robin, each
 * family's smallest (FLOPs) first, so a short run covers every family at
 * the cheapest shapes. */
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
    "         [--time-limit SEC] [--order corpus|small-first] [--list] [tune options: --target,\n"
    "         --batch, --model, --seed,\n"
    "         --threads, --runner rpc ...]\n"
    "Tunes each of the first W corpus workloads (default: the fixed ResNet/MobileNet/BERT\n"
    "layers, then random ones up to W) for N trials into LOG (--model defaults to random).\n"
    "Rerunning resumes. --list prints the corpus specs and exits (--list --heldout: the\n"
    "benchmark's held-out workloads, which the corpus never holds). --order small-first\n"
    "takes the same W workloads family by family in round robin, smallest FLOPs first.\n";

enum { OPT_NWL = 2100, OPT_CSEED, OPT_TLIMIT, OPT_LIST, OPT_HELDOUT, OPT_ORDER };

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

typedef struct spec_ent {
  int idx, fam, rank; /* corpus index, family (first appearance), rank by FLOPs in it */
  double flops;
} spec_ent;

static int cmp_flops(const void *pa, const void *pb) {
  const spec_ent *a = pa, *b = pb;
  if (a->fam != b->fam) return a->fam - b->fam;
  if (a->flops != b->flops) return a->flops < b->flops ? -1 : 1;
  return a->idx - b->idx;
}
static int cmp_round(const void *pa, const void *pb) {
  const spec_ent *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank - b->rank;
  return a->fam - b->fam;
}

/* The family of a corpus spec for --order small-first: the op name, with
 * the kernel size for convolutions and pooling (",r=3"), and the unary and
 * binary elementwise ops as one family. */
static void family_of(const char *spec, char *f, size_t n) {
  static const char *const ew[] = {"add", "mul", "relu", "gelu", "sigmoid", "exp"};
  int len = (int)strcspn(spec, ":");
  for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++)
    if ((int)strlen(ew[i]) == len && !strncmp(spec, ew[i], (size_t)len)) {
      snprintf(f, n, "elementwise");
      return;
    }
  const char *r = strstr(spec, ",r=");
  snprintf(f, n, "%.*s%.*s", len, spec, r ? (int)strcspn(r + 1, ",") + 1 : 0, r ? r : "");
}

/* order[0..n): the corpus indices 0..n-1, small-first (family round robin,
 * each family by ascending FLOPs; family_of) or as is. */
static bool corpus_order(uint64_t cseed, int n, bool small_first, int *order) {
  spec_ent *e = ts_calloc((size_t)n, sizeof *e);
  char (*fam)[64] = ts_calloc((size_t)n, sizeof *fam);
  if (!e || !fam) {
    ts_free(e);
    ts_free(fam);
    return false;
  }
  int nfam = 0;
  for (int i = 0; i < n; i++) {
    char spec[512];
    cm_corpus_spec(cseed, i, spec, sizeof spec);
    char f[64];
    family_of(spec, f, sizeof f);
    int k = 0;
    while (k < nfam && strcmp(fam[k], f)) k++;
    if (k == nfam) snprintf(fam[nfam++], sizeof fam[0], "%s", f);
    ir_wl_inst w;
    e[i] = (spec_ent){.idx = i, .fam = k, .flops = ir_wl_parse(spec, &w, NULL) == TS_OK ? ir_wl_flops(&w) : 0};
  }
  if (small_first) {
    qsort(e, (size_t)n, sizeof *e, cmp_flops);
    for (int i = 0; i < n; i++) e[i].rank = i > 0 && e[i - 1].fam == e[i].fam ? e[i - 1].rank + 1 : 0;
    qsort(e, (size_t)n, sizeof *e, cmp_round);
  }
  for (int i = 0; i < n; i++) order[i] = e[i].idx;
  ts_free(e);
  ts_free(fam);
  return true;
}

int tun_cmd_costmodel_dataset(int argc, char **argv) {
  static const struct option own[] = {{"workloads", required_argument, 0, OPT_NWL},
                                      {"corpus-seed", required_argument, 0, OPT_CSEED},
                                      {"time-limit", required_argument, 0, OPT_TLIMIT},
                                      {"list", no_argument, 0, OPT_LIST},
                                      {"heldout", no_argument, 0, OPT_HELDOUT},
                                      {"order", required_argument, 0, OPT_ORDER},
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
  bool list = false, heldout = false, small_first = false;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, data_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    bool ok = true;
    if (c == OPT_NWL) ok = tun_cli_int("costmodel dataset", "--workloads", optarg, 1, 1000000, &nwl);
    else if (c == OPT_CSEED) ok = tun_cli_seed("costmodel dataset", "--corpus-seed", optarg, &cseed);
    else if (c == OPT_TLIMIT) ok = tun_cli_real("costmodel dataset", "--time-limit", optarg, 0, 1e9, &tlimit);
    else if (c == OPT_LIST) list = true;
    else if (c == OPT_HELDOUT) heldout = true;
    else if (c == OPT_ORDER) {
      small_first = !strcmp(optarg, "small-first");
      if (!small_first && strcmp(optarg, "corpus")) {
        fprintf(stderr, "tessel costmodel dataset: --order: unknown value '%s' (valid: corpus, small-first)\n",
                optarg);
        ok = false;
      }
    }
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
  int *order = ts_malloc((size_t)nwl * sizeof *order);
  if (!order || !corpus_order(cseed, nwl, small_first, order)) {
    ts_free(order);
    fprintf(stderr, "tessel costmodel dataset: out of memory\n");
    return 1;
  }
  if (list) {
    for (int i = 0; i < nwl; i++) {
      cm_corpus_spec(cseed, order[i], spec, sizeof spec);
      printf("%s\n", spec);
    }
    ts_free(order);
    return 0;
  }
  cg_target tg;
  int rc = tun_tune_cli_setup(&cli, "costmodel dataset", &tg);
  if (rc || (rc = tun_tune_cli_start_runner(&cli, "costmodel dataset"))) {
    ts_free(order);
    return rc;
  }
  cli.o.progress = stderr;
  cli.o.progress_tty = isatty(STDERR_FILENO);
  double t0 = tsrt_now();
  int done = 0, failed = 0, new_trials = 0;
  for (int i = 0; i < nwl; i++) {
    if (tlimit > 0 && tsrt_now() - t0 > tlimit) {
      fprintf(stderr, "dataset: time limit reached after %d of %d workloads (rerun to go on)\n", i, nwl);
      break;
    }
    cm_corpus_spec(cseed, order[i], spec, sizeof spec);
    if (tune_spec(&cli, spec, &tg, &new_trials)) failed++;
    else done++;
  }
  ts_free(order);
  tun_rpc_stats rs;
  tun_tune_cli_stop_runner(&cli, &rs);
  printf("dataset: %d workloads tuned (%d failed), %d new trials in %.0f s, log %s\n", done, failed,
         new_trials, tsrt_now() - t0, cli.o.log_path);
  return failed && !done ? 1 : 0;
}
