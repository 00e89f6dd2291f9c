/* args.c — argument helpers the model commands share (build, tune-model,
 * tasks, graph show, run): --sym/--bind NAME=VALUE and the graph passes'
 * switches --winograd and --polyphase, all into a tun_model_opts
 * (tuner/model_build.h), with one wording for their errors. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "ir/graph/passes.h"

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

int tun_cli_model_arg(const char *cmd, int argc, char **argv, int *i, tun_model_opts *o) {
  const char *a = argv[*i];
  if (*i + 1 >= argc) return 0;
  if (!strcmp(a, "--sym") || !strcmp(a, "--bind")) return tun_cli_sym_arg(cmd, argv[++*i], o) ? -1 : 1;
  if (!strcmp(a, "--winograd") || !strcmp(a, "--polyphase"))
    return tun_cli_graph_opt(cmd, a + 2, argv[++*i], o) ? -1 : 1;
  return 0;
}
