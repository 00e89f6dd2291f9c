/* cmd_schedule.c — schedule-level subcommands: `selfcheck`, the randomized
 * property test of the schedule primitives and the trace layer (random
 * traces, each re-applied from its JSON to a fresh copy of the workload and
 * compared with the unscheduled function in the reference interpreter). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/schedule/trace.h"
#include "cli/cli.h"

typedef struct report_ctx {
  const char *label;
  bool verbose;
} report_ctx;

static void report(void *ctx, int index, bool refused, const char *json, const char *why) {
  const report_ctx *r = ctx;
  if (refused) {
    if (r->verbose) fprintf(stderr, "tessel selfcheck: %s: trace %d refused: %s\n", r->label, index, why);
    return;
  }
  fprintf(stderr, "tessel selfcheck: %s: MISMATCH in trace %d: %s\n  trace: %s\n", r->label, index, why, json);
}

static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
  int64_t v;
  if (!ts_parse_i64(s, lo, hi, &v, NULL)) return false;
  *out = v;
  return true;
}

static const char selfcheck_usage[] =
    "usage: tessel selfcheck WORKLOAD [--random-traces N] [--seed S] [--steps MIN:MAX]\n"
    "                        [--json] [--verbose]\n"
    "Schedules WORKLOAD (a workload spec such as matmul:m=6,n=10,k=7, or a DSL file)\n"
    "with N random traces (default 100) drawn from every primitive family, each of\n"
    "MIN..MAX steps (default 1:12). Each trace is written to JSON, read back, applied\n"
    "to a fresh unscheduled copy, and the result is compared with the unscheduled\n"
    "function in the reference interpreter on seeded random inputs (rtol 1e-4,\n"
    "atol 1e-5). A trace with a refused step counts as refused, not checked.\n"
    "Each mismatch prints its reason and trace JSON to stderr (replay it with\n"
    "`tessel show WORKLOAD --trace FILE`); --verbose also prints refusals.\n"
    "--json prints {workload, traces, checked, refused, mismatches}.\n"
    "Exit status: 0 no mismatch, 1 a mismatch, 2 bad usage or input.\n";

int tun_cmd_selfcheck(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"random-traces", required_argument, 0, 'n'},
                                       {"seed", required_argument, 0, 's'},
                                       {"steps", required_argument, 0, 'k'},
                                       {"json", no_argument, 0, 'j'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {0, 0, 0, 0}};
  long long ntraces = 100, seed = 1, lo = 1, hi = 12;
  bool as_json = false, verbose = false;
  tun_cli_getopt g = tun_cli_getopt_start("hv", opts, selfcheck_usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    switch (c) {
    case 'n':
      if (!parse_int(optarg, 0, 100000000, &ntraces)) {
        fprintf(stderr, "tessel selfcheck: --random-traces wants a count >= 0, got '%s'\n", optarg);
        return 2;
      }
      break;
    case 's':
      if (!parse_int(optarg, 0, 0x7fffffffffffffffLL, &seed)) {
        fprintf(stderr, "tessel selfcheck: --seed wants a non-negative integer, got '%s'\n", optarg);
        return 2;
      }
      break;
    case 'k': {
      char buf[64];
      snprintf(buf, sizeof buf, "%s", optarg);
      char *colon = strchr(buf, ':');
      if (colon) *colon = '\0';
      if (!parse_int(buf, 1, 1000, &lo) || !parse_int(colon ? colon + 1 : buf, lo, 1000, &hi)) {
        fprintf(stderr, "tessel selfcheck: --steps wants MIN:MAX with 1 <= MIN <= MAX <= 1000, got '%s'\n",
                optarg);
        return 2;
      }
      break;
    }
    case 'j':
      as_json = true;
      break;
    case 'v':
      verbose = true;
      break;
    }
  }
  if (g.rc >= 0) return g.rc;
  ts_arena a;
  tun_subject sub;
  ts_diag d;
  ts_diag_clear(&d);
  int rc = tun_cli_subject("selfcheck", "WORKLOAD", argc, argv, &a, &sub);
  if (rc) goto out;
  if (sub.func->nsyms) {
    fprintf(stderr, "tessel selfcheck: %s has symbolic sizes; the interpreter needs constant shapes\n",
            sub.label);
    rc = 2;
    goto out;
  }
  sch_random_opts ro = {(int)lo, (int)hi};
  sch_selfcheck_stats stats;
  report_ctx rctx = {sub.label, verbose};
  if (sch_selfcheck(sub.func, (int)ntraces, (uint64_t)seed, &ro, report, &rctx, &stats, &d) != TS_OK) {
    fprintf(stderr, "tessel selfcheck: %s: %s\n", sub.label, d.msg);
    rc = 2;
    goto out;
  }
  if (as_json) {
    json_t *o = json_object();
    json_object_set_new(o, "workload", json_string(sub.label));
    json_object_set_new(o, "traces", json_integer(stats.traces));
    json_object_set_new(o, "checked", json_integer(stats.checked));
    json_object_set_new(o, "refused", json_integer(stats.refused));
    json_object_set_new(o, "mismatches", json_integer(stats.mismatches));
    int bad = tun_cli_put_json("selfcheck", o, JSON_PRESERVE_ORDER);
    json_decref(o);
    if (bad) {
      rc = 2;
      goto out;
    }
  } else {
    printf("%s: %d random traces, %d checked against the interpreter, %d refused, %d mismatch%s\n",
           sub.label, stats.traces, stats.checked, stats.refused, stats.mismatches,
           stats.mismatches == 1 ? "" : "es");
  }
  if (stats.mismatches) rc = 1;
out:
  ts_arena_fini(&a);
  return rc;
}
