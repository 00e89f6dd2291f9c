/* main.c — the `tessel` command line: a table of subcommands, each with its
 * own --help. Results go to stdout (one JSON value with --json); progress and
 * diagnostics go to stderr. Exit status: 0 success, 1 the job ran but failed
 * (e.g. a mismatch), 2 bad usage or bad input. */
#include <stdio.h>
#include <string.h>

#include "tessel_config.h"
#include "cli/cli.h"

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"workloads", tun_cmd_workloads, "list the built-in workloads, their parameters and FLOPs"},
    {"show", tun_cmd_show, "print the loop IR of a workload or DSL file"},
    {"run", tun_cmd_run, "run the reference interpreter (--check: against hand-written C)"},
    {"selfcheck", tun_cmd_selfcheck, "check random schedules (traces via JSON) against the interpreter"},
    {"build", tun_cmd_build, "schedule (trace or default), lower and build a shared library"},
    {"bench", tun_cmd_bench, "build, time in a forked child, and verify against the interpreter"},
    {"tune", tun_cmd_tune, "tune one kernel: search, build, measure, verify, log (resumable)"},
    {"tune-model", tun_cmd_tune_model, "tune a model's tasks under one budget (task scheduler; resumable)"},
    {"sketches", tun_cmd_sketches, "print the design space: the traced sketches of the schedule rules"},
    {"log", tun_cmd_log, "inspect a tuning log, or print its best record (log inspect|best LOG)"},
    {"plot", tun_cmd_plot, "draw tuning curves (best-so-far GFLOP/s per trial) of logs as SVG"},
    {"costmodel", tun_cmd_costmodel, "cost model: dataset, train, eval (eval LOG... [--json])"},
    {"tracker", tun_cmd_tracker, "run the tracker: boards register, tuners get exclusive sessions (--port 9190)"},
    {"query", tun_cmd_query, "print a tracker's keys (free/busy/pending) and servers (--tracker H:P [--json])"},
    {"rpc-server", tun_cmd_rpc_server, "serve measurements for a tracker (--tracker H:P --key K [--port P])"},
    {"graph", tun_cmd_graph, "import an ONNX model and print its graph IR (graph show MODEL.onnx [--after PASS])"},
    {"tasks", tun_cmd_tasks, "list a model's tuning tasks: fused kernels, keys, weights, FLOPs (tasks MODEL.onnx)"},
    {"version", tun_cmd_version, "print the version"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: tessel COMMAND [ARGS...]   (tessel COMMAND --help for details)\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\nA SUBJECT is a built-in workload (NAME or NAME:key=value,...; see `tessel workloads`)\n"
          "or a path to a compute-definition (DSL) file.\n");
}

int tun_cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("tessel %s\n", TESSEL_VERSION);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) return tun_cmd_version(argc - 1, argv + 1);
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tessel: unknown command '%s' (valid:", argv[1]);
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(stderr, " %s", commands[i].name);
  fprintf(stderr, ")\n");
  return 2;
}
