/* args.c — argument and output helpers the commands share, with one wording
 * for their errors: the model commands' --sym/--bind NAME=VALUE, --buckets
 * NAME=V1,V2,... and graph
 * switches --winograd/--polyphase/--qdq/--conv-layout (into a tun_model_opts,
 * tuner/model_build.h), the one SUBJECT of show/run/selfcheck, and printing
 * a JSON result. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "rpc/auth.h"
#include "ir/graph/passes.h"

int tun_cli_put_json(const char *cmd, const json_t *j, size_t flags) {
  char *s = j ? json_dumps(j, flags) : NULL;
  if (!s) {
    fprintf(stderr, "tessel %s: out of memory\n", cmd);
    return 1;
  }
  printf("%s\n", s);
  free(s);
  return 0;
}

int tun_cli_subject(const char *cmd, const char *what, int argc, char **argv, ts_arena *a, tun_subject *sub) {
  ts_arena_init(a);
  if (optind != argc - 1) {
    fprintf(stderr, "tessel %s: expected one %s (see tessel %s --help)\n", cmd, what, cmd);
    return 2;
  }
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_subject_load(a, argv[optind], sub, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  return 2;
}

int tun_cli_secret(const char *cmd, const char *file, rpc_secret *sec) {
  ts_diag d = {0};
  if (rpc_secret_load(sec, file, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  return 2;
}

ir_module *tun_cli_module(const char *cmd) {
  ir_module *m = ir_module_new();
  if (!m) fprintf(stderr, "tessel %s: out of memory\n", cmd);
  return m;
}

int tun_cli_sym_arg(const char *cmd, const char *spec, tun_model_opts *o) {
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_model_opts_add_sym(o, spec, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  return 2;
}

int tun_cli_graph_opt(const char *cmd, const char *name, const char *value, tun_model_opts *o) {
  ts_diag d;
  ts_diag_clear(&d);
  if (tg_pass_opts_set(&o->graph, name, value, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: --%s\n", cmd, d.msg);
  return 2;
}

enum { OPT_SYM = 950, OPT_WINOGRAD, OPT_POLYPHASE, OPT_QDQ, OPT_BUCKETS, OPT_CONV_LAYOUT, OPT_WINOGRAD_TILE };

static int buckets_arg(const char *cmd, const char *spec, tun_model_opts *o) {
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_model_opts_add_buckets(o, spec, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  return 2;
}

const struct option tun_cli_model_options[] = {{"sym", required_argument, 0, OPT_SYM},
                                               {"bind", required_argument, 0, OPT_SYM},
                                               {"winograd", required_argument, 0, OPT_WINOGRAD},
                                               {"winograd-tile", required_argument, 0, OPT_WINOGRAD_TILE},
                                               {"polyphase", required_argument, 0, OPT_POLYPHASE},
                                               {"qdq", required_argument, 0, OPT_QDQ},
                                               {"buckets", required_argument, 0, OPT_BUCKETS},
                                               {"conv-layout", required_argument, 0, OPT_CONV_LAYOUT},
                                               {0, 0, 0, 0}};

int tun_cli_model_option(const char *cmd, int opt, const char *arg, tun_model_opts *o) {
  switch (opt) {
  case OPT_SYM: return tun_cli_sym_arg(cmd, arg, o) ? -1 : 1;
  case OPT_WINOGRAD: return tun_cli_graph_opt(cmd, "winograd", arg, o) ? -1 : 1;
  case OPT_WINOGRAD_TILE: return tun_cli_graph_opt(cmd, "winograd_tile", arg, o) ? -1 : 1;
  case OPT_POLYPHASE: return tun_cli_graph_opt(cmd, "polyphase", arg, o) ? -1 : 1;
  case OPT_QDQ: return tun_cli_graph_opt(cmd, "qdq", arg, o) ? -1 : 1;
  case OPT_BUCKETS: return buckets_arg(cmd, arg, o) ? -1 : 1;
  case OPT_CONV_LAYOUT: return tun_cli_graph_opt(cmd, "conv-layout", arg, o) ? -1 : 1;
  default: return 0;
  }
}

int tun_cli_model_arg(const char *cmd, int argc, char **argv, int *i, tun_model_opts *o) {
  const char *a = argv[*i];
  if (*i + 1 >= argc || strncmp(a, "--", 2)) return 0;
  for (const struct option *m = tun_cli_model_options; m->name; m++)
    if (!strcmp(a + 2, m->name)) return tun_cli_model_option(cmd, m->val, argv[++*i], o);
  return 0;
}

int tun_cli_other_arg(const char *cmd, const char *a, const char **pos, const char *usage) {
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    printf("%s", usage);
    return 0;
  }
  if (a[0] == '-' || *pos) {
    fprintf(stderr, "tessel %s: unexpected argument '%s'\n%s", cmd, a, usage);
    return 2;
  }
  *pos = a;
  return -1;
}

int tun_cli_need_model(const char *cmd, const char *path, const char *usage) {
  if (path) return 0;
  fprintf(stderr, "tessel %s: no model given\n%s", cmd, usage);
  return 2;
}

tun_cli_getopt tun_cli_getopt_start(const char *shortopts, const struct option *opts, const char *usage) {
  optind = 1;
  return (tun_cli_getopt){shortopts, opts, usage, false, -1};
}

int tun_cli_getopt_next(tun_cli_getopt *g, int argc, char **argv) {
  if (g->rc >= 0) return 0;
  int c = getopt_long(argc, argv, g->shortopts, g->opts, NULL);
  if (c == -1) return 0;
  if (c == 'h') {
    printf("%s", g->usage);
    g->rc = 0;
    return 0;
  }
  if (c == '?' || c == ':') {
    if (g->usage_on_error) fprintf(stderr, "%s", g->usage);
    g->rc = 2;
    return 0;
  }
  return c;
}

bool tun_cli_options_join(struct option *out, size_t cap, const struct option *const *tables, int ntables) {
  size_t n = 0;
  for (int t = 0; t < ntables; t++)
    for (const struct option *o = tables[t]; o->name; o++) {
      if (n + 1 >= cap) return false;
      out[n++] = *o;
    }
  if (n >= cap) return false;
  out[n] = (struct option){0, 0, 0, 0};
  return true;
}

enum { OPT_NUMBER = 900, OPT_REPEAT, OPT_MINMS, OPT_TIMEOUT, OPT_FLUSH, OPT_THREADS, OPT_CPUTIME };

const struct option tun_cli_measure_options[] = {
    {"number", required_argument, 0, OPT_NUMBER},   {"repeat", required_argument, 0, OPT_REPEAT},
    {"min-repeat-ms", required_argument, 0, OPT_MINMS}, {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"cache-flush", no_argument, 0, OPT_FLUSH},     {"threads", required_argument, 0, OPT_THREADS},
    {"cpu-time", no_argument, 0, OPT_CPUTIME},      {0, 0, 0, 0}};

bool tun_cli_int(const char *cmd, const char *opt, const char *arg, long long lo, long long hi, int *out) {
  int64_t v;
  const char *why = "not an integer";
  if (lo >= INT_MIN && hi <= INT_MAX && ts_parse_i64(arg, lo, hi, &v, &why)) {
    *out = (int)v;
    return true;
  }
  fprintf(stderr, "tessel %s: %s wants an integer in %lld..%lld, got '%s' (%s)\n", cmd, opt, lo, hi, arg, why);
  return false;
}

bool tun_cli_real(const char *cmd, const char *opt, const char *arg, double lo, double hi, double *out) {
  const char *why = "not a number";
  if (ts_parse_f64(arg, lo, hi, out, &why)) return true;
  fprintf(stderr, "tessel %s: %s wants a number in %g..%g, got '%s' (%s)\n", cmd, opt, lo, hi, arg, why);
  return false;
}

bool tun_cli_seed(const char *cmd, const char *opt, const char *arg, uint64_t *out) {
  const char *why = "not an integer";
  if (ts_parse_u64(arg, out, &why)) return true;
  fprintf(stderr, "tessel %s: %s wants an unsigned 64-bit integer, got '%s' (%s)\n", cmd, opt, arg, why);
  return false;
}

int tun_cli_measure_option(const char *cmd, tsrt_measure_opts *mo, int opt, const char *arg) {
  bool ok = true;
  switch (opt) {
  case OPT_NUMBER: ok = tun_cli_int(cmd, "--number", arg, 0, 1 << 24, &mo->number); break;
  case OPT_REPEAT: ok = tun_cli_int(cmd, "--repeat", arg, 1, TSRT_MAX_REPEAT, &mo->repeat); break;
  case OPT_MINMS: ok = tun_cli_real(cmd, "--min-repeat-ms", arg, 0, 1e7, &mo->min_repeat_ms); break;
  case OPT_TIMEOUT:
    ok = tun_cli_real(cmd, "--timeout", arg, 1e-3, 1e6, &mo->timeout_s);
    break;
  case OPT_FLUSH: mo->cache_flush = true; break;
  case OPT_CPUTIME: mo->cpu_time = true; break;
  case OPT_THREADS: ok = tun_cli_int(cmd, "--threads", arg, 0, 4096, &mo->num_threads); break;
  default: return 0;
  }
  return ok ? 1 : -1;
}

int tun_cli_model_tasks(const char *cmd, const char *path, const tun_model_opts *o, ir_module **m, tg_graph **g,
                        tg_task **tasks, int *ntasks) {
  *g = NULL;
  *tasks = NULL;
  *ntasks = 0;
  if (!(*m = tun_cli_module(cmd))) return 1;
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_model_tasks(path, o, *m, g, tasks, ntasks, &d) == TS_OK) return 0;
  fprintf(stderr, "tessel %s: %s\n", cmd, d.msg);
  return 2;
}
