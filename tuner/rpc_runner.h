/* rpc_runner.h — measuring on remote boards (`tessel tune --runner rpc`):
 * up to `parallel` worker threads, each with its own tracker connection and
 * granted rpc session, upload and measure jobs built on the host. A reply
 * from a live board is the candidate's result; an RPC failure is the board's
 * and requeues the job with one try spent. docs/DISTRIBUTED.md,
 * docs/TUNING.md ("Notes by file: tuner/"). */
#ifndef TESSEL_TUNER_RPC_RUNNER_H
#define TESSEL_TUNER_RPC_RUNNER_H

#include <stdio.h>

#include "runtime/runtime.h"
#include "base/ts.h"

typedef struct tun_rpc_opts {
  const char *tracker;     /* "HOST:PORT" or an nng URL */
  const char *key;         /* board key, e.g. "rasp4b" */
  const char *secret_file; /* NULL: $TESSEL_RPC_SECRET_FILE */
  int parallel;            /* boards measured at once (>= 1) */
  int priority;            /* tracker queue priority (0) */
  int max_tries;           /* boards one job may be tried on (3) */
  double wait_s;           /* fail when no board was held for this long (120) */
  double rpc_timeout_s;    /* reply timeout of non-measure calls (30) */
  FILE *log;               /* board events (grants, failures, retries); NULL: quiet */
} tun_rpc_opts;
void tun_rpc_opts_default(tun_rpc_opts *o);

typedef struct tun_rpc_runner tun_rpc_runner;

typedef struct tun_rpc_done {
  int tag;                  /* the caller's tag from tun_rpc_submit */
  bool lost;                /* every try failed on the board side; res is empty */
  int tries;                /* boards it was sent to */
  char board[260];          /* address of the board that measured it */
  char error[512];          /* lost: the last board failure */
  tsrt_measure_result res;  /* !lost: the board's result (tsrt_result_fini it) */
} tun_rpc_done;

typedef struct tun_rpc_stats {
  int sessions;     /* sessions granted so far */
  int board_failures;
  int retries;      /* jobs requeued after a board failure */
  int lost;         /* jobs given up after max_tries */
  int measured;
} tun_rpc_stats;

/* Loads the secret, starts the workers (they connect and queue for boards at
 * once). Errors: TS_EINVAL (options, secret). */
ts_status tun_rpc_runner_new(const tun_rpc_opts *o, tun_rpc_runner **out, ts_diag *d);
/* Stops the workers, hands every session back, frees. NULL is a no-op. */
void tun_rpc_runner_free(tun_rpc_runner *r);

/* Queues the artifact at path (read now; the file may be removed after the
 * call) for measurement with mo. Errors: TS_EIO (unreadable). */
ts_status tun_rpc_submit(tun_rpc_runner *r, int tag, const char *path, const tsrt_measure_opts *mo,
                         ts_diag *d);
/* Jobs submitted and not yet returned by tun_rpc_next. */
int tun_rpc_outstanding(tun_rpc_runner *r);
/* Waits up to timeout_s (< 0: until one is done) for a finished job.
 * TS_OK with *out filled; TS_ENOTFOUND when nothing is outstanding; TS_ETIMEOUT
 * on timeout; TS_EIO when no board has been held for wait_s while jobs wait
 * (d says so). */
ts_status tun_rpc_next(tun_rpc_runner *r, double timeout_s, tun_rpc_done *out, ts_diag *d);
void tun_rpc_get_stats(tun_rpc_runner *r, tun_rpc_stats *s);

/* Asks the tracker for one board with o->key, reads its device info and
 * hands it back: the board's triple (e.g. "aarch64-linux-gnu") in triple. */
ts_status tun_rpc_board_triple(const tun_rpc_opts *o, char *triple, size_t n, ts_diag *d);

#endif
