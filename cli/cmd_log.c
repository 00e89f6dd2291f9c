/* cmd_log.c — reading tuning logs (docs/LOG.md): `tessel log inspect` (a
 * summary per workload and target), `tessel log best` (the best verified
 * record) and `tessel plot` (an SVG tuning curve of one or more logs). Bad
 * lines in a log are reported on stderr as LOG:LINE and skipped. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "cli/cli.h"
#include "tuner/database.h"

/* Canonical text of a target argument (as the tuner records it), or the
 * argument itself when it does not parse. */
static void canon_target(const char *arg, char *buf, size_t n) {
  cg_target t;
  if (cg_target_parse(arg, &t, NULL) == TS_OK) snprintf(buf, n, "%s", t.text);
  else snprintf(buf, n, "%s", arg);
}

static tun_db *load_or_complain(const char *cmd, const char *path) {
  ts_diag d;
  ts_diag_clear(&d);
  int nwarn = 0;
  tun_db *db = tun_db_load(path, stderr, &nwarn, &d);
  if (!db) fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  else if (nwarn) fprintf(stderr, "tessel %s: %s: %d line%s skipped\n", cmd, path, nwarn, nwarn == 1 ? "" : "s");
  return db;
}

static double gflops_of(const tun_record *r) {
  double fl = tun_record_flops(r), m = tun_record_mean(r);
  return fl > 0 && m > 0 && m < 1e10 ? fl / m * 1e-9 : 0;
}

/* One line of a definition (DSL text can be long and multi-line). */
static void short_def(const char *def, char *buf, size_t n) {
  size_t k = 0;
  while (def[k] && def[k] != '\n' && k + 4 < n) k++;
  memcpy(buf, def, k);
  strcpy(buf + k, def[k] ? "..." : "");
}

static int log_inspect(int argc, char **argv) {
  static const char *usage =
      "usage: tessel log inspect LOG [--json]\n"
      "Summarises a tuning log per (workload, target): trials, error records, verified\n"
      "records, the best verified mean time and (for built-in workloads) GFLOP/s.\n";
  bool json = false;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else {
      int rc = tun_cli_other_arg("log inspect", argv[i], &path, usage);
      if (rc >= 0) return rc;
    }
  }
  if (!path) {
    fprintf(stderr, "%s", usage);
    return 2;
  }
  tun_db *db = load_or_complain("log inspect", path);
  if (!db) return 2;
  int ng = tun_db_groups(db, NULL, 0);
  const tun_record **firsts = ts_calloc((size_t)(ng ? ng : 1), sizeof *firsts);
  if (!firsts) {
    tun_db_close(db);
    fprintf(stderr, "tessel log inspect: out of memory\n");
    return 2;
  }
  tun_db_groups(db, firsts, ng);
  json_t *arr = json ? json_array() : NULL;
  if (!json) printf("%s: %d records, %d workload/target pairs\n", path, tun_db_count(db), ng);
  for (int g = 0; g < ng; g++) {
    const tun_record *f = firsts[g];
    int n, errors = 0, verified = 0;
    const int *idx = tun_db_indices_for(db, f->workload_key, f->target, &n);
    for (int i = 0; i < n; i++) {
      const tun_record *r = tun_db_get(db, idx[i]);
      errors += r->error != NULL;
      verified += !r->error && r->verified;
    }
    const tun_record *b = tun_db_best(db, f->workload_key, f->target);
    double secs = b ? tun_record_mean(b) : 0, gf = b ? gflops_of(b) : 0;
    if (json) {
      json_t *o = json_object();
      json_object_set_new(o, "workload", json_string(f->workload));
      json_object_set_new(o, "workload_key", json_string(f->workload_key));
      json_object_set_new(o, "target", json_string(f->target));
      json_object_set_new(o, "trials", json_integer(n));
      json_object_set_new(o, "errors", json_integer(errors));
      json_object_set_new(o, "verified", json_integer(verified));
      json_object_set_new(o, "best_seconds", b ? json_real(secs) : json_null());
      json_object_set_new(o, "best_gflops", b && gf > 0 ? json_real(gf) : json_null());
      json_object_set_new(o, "best_trace_hash", b ? json_sprintf("%016llx", (unsigned long long)b->trace_hash)
                                                  : json_null());
      json_array_append_new(arr, o);
    } else {
      char def[72];
      short_def(f->workload, def, sizeof def);
      printf("\n%s [%s] on %s\n  trials %d, errors %d, verified %d\n", def, f->workload_key, f->target, n, errors,
             verified);
      if (b) {
        printf("  best: mean %.6g ms", secs * 1e3);
        if (gf > 0) printf(", %.2f GFLOP/s", gf);
        if (b->kind) /* a library record (docs/LOG.md, schema 2) */
          printf(" (%s call %s)\n", b->kind, b->params ? b->params : "?");
        else
          printf(" (trace %016llx)\n", (unsigned long long)b->trace_hash);
      } else {
        printf("  best: none (no verified, error-free record)\n");
      }
    }
  }
  if (json) {
    char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) puts(s);
    free(s);
    json_decref(arr);
  }
  ts_free(firsts);
  tun_db_close(db);
  return 0;
}

/* The best usable record of db for workload w / target t (either NULL: any). */
static const tun_record *find_best(const tun_db *db, const char *w, const char *t) {
  int ng = tun_db_groups(db, NULL, 0);
  const tun_record **firsts = ts_calloc((size_t)(ng ? ng : 1), sizeof *firsts);
  if (!firsts) return NULL;
  tun_db_groups(db, firsts, ng);
  const tun_record *best = NULL;
  for (int g = 0; g < ng; g++) {
    const tun_record *f = firsts[g];
    if (!tun_record_matches(f, w) || (t && strcmp(f->target, t))) continue;
    const tun_record *b = tun_db_best(db, f->workload_key, f->target);
    if (b && (!best || tun_record_mean(b) < tun_record_mean(best))) best = b;
  }
  ts_free(firsts);
  return best;
}

static int log_best(int argc, char **argv) {
  static const char *usage =
      "usage: tessel log best LOG [--workload W] [--target T] [--json]\n"
      "Prints the best verified, error-free record (lowest mean time) of the log,\n"
      "optionally of one workload (a spec, its canonical text or its 16-hex key) and\n"
      "target. --json prints the whole record, trace included (docs/LOG.md).\n"
      "Exit status 1 when no record qualifies.\n";
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"workload", required_argument, 0, 'w'},
                                       {"target", required_argument, 0, 't'},
                                       {"json", no_argument, 0, 'j'},
                                       {0, 0, 0, 0}};
  const char *w = NULL, *t = NULL;
  bool json = false;
  tun_cli_getopt g = tun_cli_getopt_start("h", opts, usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    if (c == 'w') w = optarg;
    else if (c == 't') t = optarg;
    else if (c == 'j') json = true;
  }
  if (g.rc >= 0) return g.rc;
  if (optind != argc - 1) {
    fprintf(stderr, "tessel log best: expected one LOG\n%s", usage);
    return 2;
  }
  char tc[1024];
  if (t) canon_target(t, tc, sizeof tc);
  tun_db *db = load_or_complain("log best", argv[optind]);
  if (!db) return 2;
  const tun_record *b = find_best(db, w, t ? tc : NULL);
  int rc = 0;
  if (!b) {
    fprintf(stderr, "tessel log best: %s has no verified, error-free record%s%s%s%s\n", argv[optind],
            w ? " for " : "", w ? w : "", t ? " on " : "", t ? tc : "");
    rc = 1;
  } else if (json) {
    char *line = tun_record_to_json(b);
    json_error_t e;
    json_t *o = line ? json_loads(line, 0, &e) : NULL;
    if (o) {
      json_object_set_new(o, "mean_seconds", json_real(tun_record_mean(b)));
      double gf = gflops_of(b);
      if (gf > 0) json_object_set_new(o, "gflops", json_real(gf));
    }
    char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (s) puts(s);
    free(s);
    json_decref(o);
    ts_free(line);
  } else {
    char def[72];
    short_def(b->workload, def, sizeof def);
    printf("%s [%s] on %s\n  mean %.6g ms, median %.6g ms (%d runs)", def, b->workload_key, b->target,
           tun_record_mean(b) * 1e3, tun_record_median(b) * 1e3, b->nruns);
    double gf = gflops_of(b);
    if (gf > 0) printf(", %.2f GFLOP/s", gf);
    printf("\n  trace %016llx, built in %.3g s, tessel %s\n  %s\n", (unsigned long long)b->trace_hash, b->build_secs,
           b->version, b->trace ? b->trace : b->params ? b->params : "(no trace)");
  }
  tun_db_close(db);
  return rc;
}

int tun_cmd_log(int argc, char **argv) {
  static const char *usage = "usage: tessel log inspect LOG [--json]\n"
                             "       tessel log best LOG [--workload W] [--target T] [--json]\n";
  if (argc < 2) {
    fprintf(stderr, "%s", usage);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    printf("%s", usage);
    return 0;
  }
  if (!strcmp(argv[1], "inspect")) return log_inspect(argc - 1, argv + 1);
  if (!strcmp(argv[1], "best")) return log_best(argc - 1, argv + 1);
  fprintf(stderr, "tessel log: unknown subcommand '%s' (valid: inspect best)\n", argv[1]);
  return 2;
}

int tun_cmd_plot(int argc, char **argv) {
  static const char *usage =
      "usage: tessel plot LOG [LOG ...] -o CURVE.svg [--workload W]\n"
      "Draws the best-so-far GFLOP/s (1/seconds for kernels that are not built-in\n"
      "workloads) against trial index, one line per log. Without --workload each\n"
      "log plots the workload and target of its first record.\n";
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"workload", required_argument, 0, 'w'},
                                       {"output", required_argument, 0, 'o'},
                                       {0, 0, 0, 0}};
  const char *w = NULL, *out = NULL;
  tun_cli_getopt g = tun_cli_getopt_start("ho:", opts, usage);
  for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) {
    if (c == 'w') w = optarg;
    else if (c == 'o') out = optarg;
  }
  if (g.rc >= 0) return g.rc;
  int ndb = argc - optind;
  if (ndb < 1 || !out) {
    fprintf(stderr, "tessel plot: need at least one LOG and -o CURVE.svg\n%s", usage);
    return 2;
  }
  tun_db **dbs = ts_calloc((size_t)ndb, sizeof *dbs);
  if (!dbs) return 2;
  int rc = 0;
  for (int k = 0; k < ndb && rc == 0; k++)
    if (!(dbs[k] = load_or_complain("plot", argv[optind + k]))) rc = 2;
  if (rc == 0) {
    FILE *f = fopen(out, "w");
    if (!f) {
      perror(out);
      rc = 2;
    } else {
      ts_diag d;
      ts_diag_clear(&d);
      ts_status st = tun_plot_svg(dbs, (const char *const *)(argv + optind), ndb, w, f, &d);
      if (fclose(f) != 0 && st == TS_OK) st = ts_diag_set(&d, TS_EIO, "closing %s failed", out);
      if (st) {
        fprintf(stderr, "tessel plot: %s\n", d.msg);
        rc = 2;
      } else {
        fprintf(stderr, "wrote %s\n", out);
      }
    }
  }
  for (int k = 0; k < ndb; k++) tun_db_close(dbs[k]);
  ts_free(dbs);
  return rc;
}
