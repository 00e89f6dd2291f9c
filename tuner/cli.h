/* cli.h — the tessel CLI's subcommands (tuner/cmd_*.c) and the helpers they
 * share: resolving a SUBJECT argument into a PrimFunc. */
#ifndef TESSEL_TUNER_CLI_H
#define TESSEL_TUNER_CLI_H

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

#endif
