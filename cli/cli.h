/* cli.h — the tessel CLI's subcommands (cli/cmd_*.c) and the helpers they
 * share (args.c): resolving a SUBJECT argument into a PrimFunc, one getopt
 * loop, and the option tables several commands take. */
#ifndef TESSEL_TUNER_CLI_H
#define TESSEL_TUNER_CLI_H

#include <getopt.h>

#include "ir/ir.h"
#include "ir/workloads/workloads.h"

int tun_cmd_workloads(int argc, char **argv);
int tun_cmd_show(int argc, char **argv);
int tun_cmd_run(int argc, char **argv);
int tun_cmd_version(int argc, char **argv);
int tun_cmd_selfcheck(int argc, char **argv); /* cmd_schedule.c */
int tun_cmd_build(int argc, char **argv);     /* cmd_build.c */
int tun_cmd_bench(int argc, char **argv);
int tun_cmd_costmodel(int argc, char **argv); /* cmd_costmodel.c */
int tun_cmd_costmodel_dataset(int argc, char **argv); /* cmd_costmodel_data.c: argv[0] = "dataset" */
int tun_cmd_tune(int argc, char **argv);     /* cmd_tune.c */
int tun_cmd_tracker(int argc, char **argv);  /* cmd_tracker.c */
int tun_cmd_query(int argc, char **argv);
int tun_cmd_log(int argc, char **argv);      /* cmd_log.c */
int tun_cmd_plot(int argc, char **argv);
int tun_cmd_sketches(int argc, char **argv); /* cmd_search.c */
int tun_cmd_rpc_server(int argc, char **argv); /* cmd_rpc.c */
int tun_cmd_build_model(int argc, char **argv); /* cmd_model.c: tessel build MODEL.onnx */
int tun_cmd_run_model(int argc, char **argv);   /* cmd_model.c: tessel run MODEL.so */
int tun_cmd_graph(int argc, char **argv);      /* cmd_graph.c */
int tun_cmd_tasks(int argc, char **argv);      /* cmd_tasks.c */
int tun_cmd_tune_model(int argc, char **argv); /* cmd_tune_model.c */

/* What a SUBJECT argument named. */
typedef struct tun_subject {
  ir_func *func;        /* in the caller's arena */
  bool is_workload;
  ir_wl_inst wl;        /* valid when is_workload */
  char label[256];      /* canonical workload spec or the file path */
} tun_subject;

/* Resolves SUBJECT: a built-in workload spec, else an existing DSL file
 * (its single function, or the one named after '#': file.tsl#name).
 * Errors name the argument and list the valid workloads. */
ts_status tun_subject_load(ts_arena *a, const char *arg, tun_subject *out, ts_diag *d);
/* After getopt: argv[optind] must be the last argument (else "expected one
 * WHAT"), loaded into sub in a (initialised here: the caller finis it even
 * on failure). 0, or 2 after printing why (naming cmd). */
int tun_cli_subject(const char *cmd, const char *what, int argc, char **argv, ts_arena *a, tun_subject *sub);

/* ---- the options the model commands share (args.c) ---- */
#include "tuner/model_build.h"

/* Their lines of usage text. */
#define TUN_CLI_GRAPH_USAGE                                                                        \
  "  --winograd on|off|all  the Winograd rewrite of 3x3 convolutions: where it gains (on, default),\n" \
  "                     nowhere, or on every eligible one (docs/PASSES.md)\n"                   \
  "  --winograd-tile 4|2 the Winograd form's output tile: F(4x4, 3x3) (default) or F(2x2, 3x3)\n" \
  "  --polyphase on|off strided convolutions read their padded input in polyphase order (on)\n"
/* Prints j (json_dumps flags) and a newline on stdout; 0, or 1 after saying
 * "tessel CMD: out of memory" (j NULL too). j stays the caller's. */
struct json_t;
int tun_cli_put_json(const char *cmd, const struct json_t *j, size_t flags);
/* Loads the RPC secret (file, or TESSEL_RPC_SECRET_FILE when NULL); 0, or 2
 * after "tessel CMD: why". */
struct rpc_secret;
int tun_cli_secret(const char *cmd, const char *file, struct rpc_secret *sec);
/* A new module for a model (ir_module_free), or NULL after saying so. */
ir_module *tun_cli_module(const char *cmd);
/* Adds a NAME=VALUE symbol size; 0, or 2 after printing why (naming cmd). */
int tun_cli_sym_arg(const char *cmd, const char *spec, tun_model_opts *o);
/* Sets graph switch name ("winograd", "polyphase") to value; 0 or 2 as above. */
int tun_cli_graph_opt(const char *cmd, const char *name, const char *value, tun_model_opts *o);
/* Those four as long options (codes 950..), ended by a zero entry, and
 * applying one getopt_long result: 1 applied, 0 not one of them, -1 a bad
 * value (printed). */
extern const struct option tun_cli_model_options[];
int tun_cli_model_option(const char *cmd, int opt, const char *arg, tun_model_opts *o);
/* If argv[*i] is --sym/--bind/--winograd/--polyphase with a value, applies
 * it and steps *i past the value: 1; a bad value: -1 (printed); else 0. */
int tun_cli_model_arg(const char *cmd, int argc, char **argv, int *i, tun_model_opts *o);
/* The last branch of an argument loop: --help or -h prints usage (0); the one
 * positional argument goes to *pos (-1: go on); anything else is reported
 * naming cmd (2). */
int tun_cli_other_arg(const char *cmd, const char *a, const char **pos, const char *usage);
/* 0 when a model path was given, else 2 after "tessel CMD: no model given". */
int tun_cli_need_model(const char *cmd, const char *path, const char *usage);

/* ---- option parsing (args.c) ---- */
#include "runtime/runtime.h"

/* A command's getopt_long loop: start it (optind back to 1), then
 * `for (int c; (c = tun_cli_getopt_next(&g, argc, argv));) switch (c) ...`
 * sees only the command's own options; after the loop g.rc >= 0 is the exit
 * status to return (0 after --help/-h printed usage on stdout, 2 after a bad
 * option, getopt having said which; with usage_on_error usage follows on
 * stderr). */
typedef struct tun_cli_getopt {
  const char *shortopts;
  const struct option *opts;
  const char *usage;
  bool usage_on_error;
  int rc; /* -1: go on */
} tun_cli_getopt;
tun_cli_getopt tun_cli_getopt_start(const char *shortopts, const struct option *opts, const char *usage);
/* The next option code, or 0 when the loop is over (see g->rc). */
int tun_cli_getopt_next(tun_cli_getopt *g, int argc, char **argv);
/* Copies the option tables (each ended by a zero entry) one after another
 * into out, zero-terminated; false when more than cap entries. */
bool tun_cli_options_join(struct option *out, size_t cap, const struct option *const *tables, int ntables);

/* Strict numeric option values: the whole of arg, within [lo, hi] (a real:
 * finite too; a seed: any unsigned 64-bit value, decimal or 0x hex). true,
 * or false after "tessel CMD: OPT wants ..., got 'ARG' (why)". */
bool tun_cli_int(const char *cmd, const char *opt, const char *arg, long long lo, long long hi, int *out);
bool tun_cli_real(const char *cmd, const char *opt, const char *arg, double lo, double hi, double *out);
bool tun_cli_seed(const char *cmd, const char *opt, const char *arg, uint64_t *out);

/* The measurement options build, bench, tune and tune-model share (--number,
 * --repeat, --min-repeat-ms, --timeout, --cache-flush, --threads; codes 900..
 * 999), ended by a zero entry. */
extern const struct option tun_cli_measure_options[];
/* Applies one getopt_long result to mo: 1 applied, 0 not a measurement
 * option, -1 a bad value (printed, naming cmd and the option). */
int tun_cli_measure_option(const char *cmd, tsrt_measure_opts *mo, int opt, const char *arg);

/* Imports the model at path and lists its tuning tasks (tun_model_tasks)
 * into a new module *m (ir_module_free, set even on failure); 0, or the exit
 * status after "tessel CMD: why" (1 out of memory for the module, else 2). */
int tun_cli_model_tasks(const char *cmd, const char *path, const tun_model_opts *o, ir_module **m, tg_graph **g,
                        tg_task **tasks, int *ntasks);

/* ---- the options `tessel tune` and `tessel tune-model` share (cmd_tune.c) ---- */

#include "codegen/codegen.h"
#include "tuner/rpc_runner.h"
#include "tuner/tune.h"

typedef struct tun_tune_cli {
  const char *cmd;          /* "tune" (tun_tune_cli_init) or "tune-model": names the command in messages */
  tun_tune_opts o;          /* trials (-1 until given), log, batch, model, seed, measure, build jobs */
  tun_rpc_opts ro;          /* --tracker, --key, --parallel, --secret-file, --priority, --rpc-wait, --rpc-tries */
  const char *target;       /* --target (NULL: the host, or the board's triple with --runner rpc) */
  const char *runner;       /* --runner local|rpc */
  bool json;                /* --json */
  bool rpc;                 /* set by tun_tune_cli_setup */
  char board_target[200];
  tun_rpc_runner *rr;       /* tun_tune_cli_start_runner */
} tun_tune_cli;

/* The long options of a tuning command: its own (codes < 900 or >= 2000,
 * ended by a zero entry), the shared ones (>= 1000) and
 * tun_cli_measure_options, into out; false when more than cap entries. */
bool tun_tune_cli_options(struct option *out, size_t cap, const struct option *own);
void tun_tune_cli_init(tun_tune_cli *c);
/* Applies one getopt_long result; false if opt is not a shared option or
 * its value is bad (printed). */
bool tun_tune_cli_option(tun_tune_cli *c, int opt, const char *arg);
/* Checks the options (messages name cmd) and resolves the target (asking
 * the tracker for a board's triple with --runner rpc and no --target).
 * Returns 0, or the exit status (2 bad usage, 1 no board). */
int tun_tune_cli_setup(tun_tune_cli *c, const char *cmd, cg_target *tg);
/* With --runner rpc, starts the RPC runner into c->o.rpc; 0 or exit status 2. */
int tun_tune_cli_start_runner(tun_tune_cli *c, const char *cmd);
/* Stops the runner (if any) and hands back its statistics (zeros if none). */
void tun_tune_cli_stop_runner(tun_tune_cli *c, tun_rpc_stats *rs);

#endif
