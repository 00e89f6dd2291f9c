/* database.h — the tuning log: append-only JSONL, one measurement record per
 * line and nothing else, flushed (fsync'd) per record so a killed tuner loses
 * nothing already measured. Schema in docs/LOG.md; every record carries its
 * schema version, and older versions still load.
 *
 * A record: schema, workload key (structural hash of the unscheduled
 * function) and definition (the canonical workload spec, or the DSL text),
 * target string, trace (JSON, with decisions), run seconds (one per repeat;
 * empty on error), build seconds, error (null or a message), verified (the
 * outputs matched the interpreter), unix time, tessel version.
 *
 * Loading reports a corrupt or unknown-schema line with its line number (in
 * the warnings) and skips it; it is never fatal. Records for one target are
 * never applied to another: lookups always take the target. */
#ifndef TESSEL_TUNER_DATABASE_H
#define TESSEL_TUNER_DATABASE_H

#include <stdio.h>

#include "base/ts.h"

/* The newest record schema this tessel reads and writes: 2 adds library
 * records (kind "library", docs/LOG.md). A trace record is still written as
 * schema 1 (TUN_LOG_SCHEMA_TRACE), which is all it needs, so a log without
 * library records stays readable by a tessel that reads only schema 1, and
 * such a tessel skips just the library records. */
#define TUN_LOG_SCHEMA 2
#define TUN_LOG_SCHEMA_TRACE 1
#define TUN_KIND_LIBRARY "library"
#define TUN_MAX_RUNS 64
#define TUN_MAX_THREADS 4096 /* the largest thread count a record may carry (--threads' bound) */

typedef struct tun_record {
  int schema;
  char workload_key[17];
  char *workload;   /* canonical spec ("matmul:m=...") or DSL source text */
  char *target;     /* canonical target string */
  char *trace;      /* trace JSON text */
  int nruns;
  double run_secs[TUN_MAX_RUNS];
  double build_secs;
  char *error;      /* NULL on success */
  bool verified;    /* outputs matched the reference interpreter */
  double time;      /* unix seconds when recorded */
  char *version;
  uint64_t trace_hash; /* structural hash of the scheduled function (dedup), 0 if unknown */
  char *graph_opts; /* the graph switches that made a model task (tg_pass_opts_str); NULL: defaults */
  int threads;      /* thread pool size it was measured with; 0: unknown (a record written before
                     * records carried it, or measured on a board that chose its own) */
  /* NULL: a trace record (the kernel is the trace replayed). TUN_KIND_LIBRARY:
   * a library call (tuner/library.h) whose parameters, a JSON object's text,
   * are in params; such a record has no trace and is written as schema 2. */
  char *kind;
  char *params;
  /* 0: a trial (one measurement taken while tuning). N > 0: a re-timing in
   * the task's N-th run-off (tuner/runoff.h): its few best candidates timed
   * back to back, interleaved, one run per round. Run-off records are no
   * trials (they count against no budget), are no duplicates of the trial
   * they re-time, and are preferred over trials when choosing the best:
   * the latest run-off's fastest wins (docs/LOG.md, "Run-offs"). */
  int runoff;
} tun_record;

/* A lookup's thread count that matches records of every count. */
#define TUN_ANY_THREADS (-1)

/* A record's time: the mean of run_secs (for a run-off record, their
 * median: one run per interleaved round), or 1e10 for error records / no
 * runs. */
double tun_record_mean(const tun_record *r);
double tun_record_median(const tun_record *r);
/* Deep copy / free of the strings inside a record. */
ts_status tun_record_copy(tun_record *dst, const tun_record *src);
void tun_record_fini(tun_record *r);

typedef struct tun_db tun_db;

/* Opens (creating if absent) the log at path for appending and loads its
 * records. Corrupt lines are skipped; *nwarn (optional) gets their count and
 * each is printed to warn_out (optional) as "LOG:LINE: skipped: why".
 * Appending is exclusive: the log is flock'ed until tun_db_close, and a log
 * another process holds is refused (TS_EPENDING, "log ... is in use"); the
 * same process may open it again. A log that is not a regular file (a
 * device, a pipe) is written to but not read. */
tun_db *tun_db_open(const char *path, FILE *warn_out, int *nwarn, ts_diag *d);
/* Loads a log read-only (for inspect/best/plot/eval). */
tun_db *tun_db_load(const char *path, FILE *warn_out, int *nwarn, ts_diag *d);
void tun_db_close(tun_db *db);

/* Appends (and fsyncs) a record; it is also kept in memory as it reads
 * back. A record loading would skip (docs/LOG.md) is refused (TS_EINVAL,
 * nothing written); one repeating the workload, target and trace of a
 * record in the log is a duplicate: nothing is written, TS_OK. */
ts_status tun_db_append(tun_db *db, const tun_record *r, ts_diag *d);
/* The latest run-off of workload+target at `threads` (as the _at lookups):
 * its id (0: none) and up to max of its records in *out. */
int tun_db_runoff_last(const tun_db *db, const char *workload_key, const char *target, int threads,
                       const tun_record **out, int max, int *n);
/* The id the next run-off of workload+target takes (1 + the largest). */
int tun_db_runoff_next(const tun_db *db, const char *workload_key, const char *target);
/* How many lines loading skipped as duplicates (counted once). */
long tun_db_duplicates(const tun_db *db);

/* All records, run-off records included (tun_db_get's range). The per
 * workload counts, tun_db_indices_for and has_trace see trials only. */
int tun_db_count(const tun_db *db);
const tun_record *tun_db_get(const tun_db *db, int i);
/* Records of one workload on one target (NULL key or target: any). */
int tun_db_count_for(const tun_db *db, const char *workload_key, const char *target);
/* The best verified, error-free record for workload+target, or NULL: of
 * the latest run-off when there is one (its lowest time), else the trial
 * with the lowest mean. */
const tun_record *tun_db_best(const tun_db *db, const char *workload_key, const char *target);
/* The verified, error-free records of workload+target, the latest
 * run-off's first (then older run-offs'), each fastest first, then the
 * trials fastest (lowest mean) first, as a heap array (ts_free; NULL with *n = 0 when there are
 * none or out of memory): the best, then what to fall back to when it does
 * not replay. */
const tun_record **tun_db_ranked(const tun_db *db, const char *workload_key, const char *target, int *n);
/* True if a record with this trace_hash exists for workload+target. */
bool tun_db_has_trace(const tun_db *db, const char *workload_key, const char *target, uint64_t trace_hash);

/* The same four lookups restricted to the records measured with `threads`
 * pool threads (0: the records of unknown count; TUN_ANY_THREADS: all, as
 * above). A tuner for N threads counts, resumes and deduplicates its own
 * count's records; a build for N threads replays the best of them. */
int tun_db_count_at(const tun_db *db, const char *workload_key, const char *target, int threads);
const tun_record *tun_db_best_at(const tun_db *db, const char *workload_key, const char *target, int threads);
const tun_record **tun_db_ranked_at(const tun_db *db, const char *workload_key, const char *target, int threads,
                                    int *n);
bool tun_db_has_trace_at(const tun_db *db, const char *workload_key, const char *target, uint64_t trace_hash,
                         int threads);
/* What a build for `threads` threads replays, best first (heap array,
 * ts_free): the usable records measured at that count; when there are
 * none, those of every count, with *fallback set (the caller says so). */
const tun_record **tun_db_ranked_for_build(const tun_db *db, const char *workload_key, const char *target,
                                           int threads, int *n, bool *fallback);

/* Listing helpers (for inspect/plot): the first record of each (workload
 * key, target) pair in log order — returns how many pairs there are and
 * fills up to max of them; and the indices (into tun_db_get) of one pair's
 * records in log order (NULL, *n = 0 if none; valid until the next append). */
int tun_db_groups(const tun_db *db, const tun_record **first, int max);
const int *tun_db_indices_for(const tun_db *db, const char *workload_key, const char *target, int *n);

/* True if record r is of workload w: its workload key, its definition text,
 * or (for a built-in spec) the same canonical spec; NULL w matches all. */
bool tun_record_matches(const tun_record *r, const char *w);
/* FLOPs of r's workload when it is a built-in spec, else 0. */
double tun_record_flops(const tun_record *r);
/* Writes an SVG of best-so-far GFLOP/s (1/seconds when a workload is not a
 * built-in spec) against trial index: one polyline per log (labels[k] in the
 * legend; a log plots the records matching workload, or without it those of
 * the workload and target of its first record). TS_EIO if writing fails. */
ts_status tun_plot_svg(tun_db *const *dbs, const char *const *labels, int ndb, const char *workload, FILE *out,
                       ts_diag *d);

/* Serialises a record as one JSON line (heap, ts_free; no newline), always
 * written as schema TUN_LOG_SCHEMA / parses one: schema 0 (no verified, no
 * trace_hash) loads with verified = false and trace_hash = 0; a newer schema
 * is TS_EUNSUPPORTED, anything malformed TS_EPARSE (the message says why). */
char *tun_record_to_json(const tun_record *r);
ts_status tun_record_from_json(const char *line, tun_record *out, ts_diag *d);

#endif
