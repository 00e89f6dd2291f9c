/* cmd_search.c — `tessel sketches`: the design space of a subject, each
 * sketch's trace in text form (or, with --json, {"sketches": [trace, ...]}).
 * With --instantiate K, sketch K is replayed with fresh decisions from
 * --seed and postprocessed; the candidate's trace (JSON) is printed or
 * written to -o, ready for `tessel bench --trace`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm.h"
#include "search/search.h"
#include "cli/cli.h"

static const char *usage =
    "usage: tessel sketches SUBJECT [--target T] [--json]\n"
    "                      [--instantiate K [--seed S] [-o trace.json]]\n"
    "                      [--replay TRACE.json [-o trace.json]]  (with its decisions)\n";

static int write_candidate(sch_traced *ts, const char *out) {
  char *js = sch_trace_to_json(sch_traced_trace(ts));
  if (!js) return 1;
  FILE *f = out ? fopen(out, "w") : stdout;
  if (!f) {
    perror(out);
    ts_free(js);
    return 1;
  }
  fprintf(f, "%s\n", js);
  if (out) fclose(f);
  ts_free(js);
  return 0;
}

/* --replay: the trace in path replayed with its decisions, postprocessed. */
static int replay(const tun_subject *s, const cg_target *tg, const char *path, const char *out) {
  ts_diag d;
  ts_diag_clear(&d);
  char *text = NULL;
  if (ts_read_file_as(path, TS_FILE_TRACE, &text, NULL, &d)) {
    fprintf(stderr, "tessel sketches: %s\n", d.msg);
    return 1;
  }
  sch_trace *tr = sch_trace_from_json(text, &d);
  ts_free(text);
  if (!tr) {
    fprintf(stderr, "tessel sketches: %s: %s\n", path, d.msg);
    return 1;
  }
  sch_traced *ts = srch_instantiate(tr, s->func, tg, false, 1, &d);
  sch_trace_free(tr);
  if (!ts) {
    fprintf(stderr, "tessel sketches: %s: rejected: %s\n", path, d.msg);
    return 1;
  }
  int rc = write_candidate(ts, out);
  sch_traced_free(ts);
  return rc;
}

static int instantiate(const tun_subject *s, const cg_target *tg, sch_trace **sk, int n, int k,
                       uint64_t seed, const char *out) {
  if (k < 0 || k >= n) {
    fprintf(stderr, "tessel sketches: --instantiate %d: there are %d sketches\n", k, n);
    return 1;
  }
  ts_diag d;
  for (int tries = 0; tries < 100; tries++) {
    ts_diag_clear(&d);
    sch_traced *ts = srch_instantiate(sk[k], s->func, tg, true, seed + (uint64_t)tries, &d);
    if (!ts) continue;
    int rc = write_candidate(ts, out);
    sch_traced_free(ts);
    return rc;
  }
  fprintf(stderr, "tessel sketches: no valid instantiation of sketch %d in 100 seeds: %s\n", k, d.msg);
  return 1;
}

int tun_cmd_sketches(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},      {"target", required_argument, 0, 't'},
                                       {"json", no_argument, 0, 'j'},      {"instantiate", required_argument, 0, 'i'},
                                       {"seed", required_argument, 0, 's'}, {"output", required_argument, 0, 'o'},
                                       {"replay", required_argument, 0, 'r'},
                                       {0, 0, 0, 0}};
  const char *target = "llvm", *out = NULL, *rep = NULL;
  bool json = false;
  int inst = -1;
  uint64_t seed = 1;
  tun_cli_getopt g = tun_cli_getopt_start("ho:", opts, usage);
  g.usage_on_error = true;
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    switch (c) {
    case 't': target = optarg; break;
    case 'j': json = true; break;
    case 'i':
      if (!tun_cli_int("sketches", "--instantiate", optarg, 0, 1000000, &inst)) return 2;
      break;
    case 's':
      if (!tun_cli_seed("sketches", "--seed", optarg, &seed)) return 2;
      break;
    case 'o': out = optarg; break;
    case 'r': rep = optarg; break;
    }
  }
  if (g.rc >= 0) return g.rc;
  if (optind + 1 != argc) {
    fprintf(stderr, "%s", usage);
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  if (cg_target_parse(target, &tg, &d) || (tg.kind == CG_TARGET_LLVM && cg_llvm_resolve_target(&tg, &d))) {
    fprintf(stderr, "tessel sketches: %s\n", d.msg);
    return 1;
  }
  ts_arena a;
  tun_subject s;
  if (tun_cli_subject("sketches", "SUBJECT", argc, argv, &a, &s)) {
    ts_arena_fini(&a);
    return 1;
  }
  if (rep) {
    int rc = replay(&s, &tg, rep, out);
    ts_arena_fini(&a);
    return rc;
  }
  sch_trace **sk;
  int n;
  if (srch_sketches(s.func, &tg, NULL, &sk, &n, &d)) {
    fprintf(stderr, "tessel sketches: %s\n", d.msg);
    ts_arena_fini(&a);
    return 1;
  }
  int rc = 0;
  if (inst >= 0) {
    rc = instantiate(&s, &tg, sk, n, inst, seed, out);
  } else if (json) {
    printf("{\"sketches\": [");
    for (int i = 0; i < n; i++) {
      char *js = sch_trace_to_json(sk[i]);
      printf("%s%s", i ? ",\n" : "\n", js ? js : "null");
      ts_free(js);
    }
    printf("\n]}\n");
  } else {
    for (int i = 0; i < n; i++) {
      char *tx = sch_trace_to_text(sk[i]);
      printf("# sketch %d of %d (%s)\n%s\n", i, n, s.label, tx ? tx : "");
      ts_free(tx);
    }
  }
  for (int i = 0; i < n; i++) sch_trace_free(sk[i]);
  ts_free(sk);
  ts_arena_fini(&a);
  return rc;
}
