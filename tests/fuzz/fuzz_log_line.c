/* fuzz_log_line.c — one line of the tuning log on arbitrary bytes:
 * tun_record_from_json either refuses it with a message or gives a record
 * that is valid (docs/LOG.md: positive finite times, an array trace or null
 * on an error record, a non-empty target) and that writes back to a line
 * which loads again to the same record. Nothing may crash.
 *
 * The default suite replays tests/fuzz/corpus/log_line (gcc); libFuzzer
 * builds and campaigns: docs/FUZZING.md. */
#include "fuzz_main.h"

#include <math.h>

#include "base/ts.h"
#include "tuner/database.h"

static void check(bool ok, const char *what, const char *line) {
  if (ok) return;
  fprintf(stderr, "fuzz_log_line: %s\n%s\n", what, line);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *line = malloc(size + 1);
  if (!line) return 0;
  memcpy(line, data, size);
  line[size] = '\0';
  tun_record r;
  ts_diag d;
  ts_diag_clear(&d);
  if (tun_record_from_json(line, &r, &d) != TS_OK) {
    check(d.msg[0] != 0, "refused without a message", line);
    free(line);
    return 0;
  }
  check(r.target && r.target[0] && r.workload && r.workload[0], "empty target or workload loaded", line);
  check(r.trace ? r.trace[0] == '[' : r.error != NULL, "a trace that is not an array loaded", line);
  check(r.nruns >= 0 && r.nruns <= TUN_MAX_RUNS, "run count out of range", line);
  for (int i = 0; i < r.nruns; i++) check(isfinite(r.run_secs[i]) && r.run_secs[i] > 0, "a bad time loaded", line);
  char *again = tun_record_to_json(&r);
  if (again) {
    tun_record b;
    ts_diag_clear(&d);
    check(tun_record_from_json(again, &b, &d) == TS_OK, "the written record does not load again", again);
    check(b.nruns == r.nruns && !strcmp(b.target, r.target) && !strcmp(b.workload, r.workload) &&
              !strcmp(b.workload_key, r.workload_key) && b.trace_hash == r.trace_hash &&
              (!b.trace == !r.trace) && (!b.trace || !strcmp(b.trace, r.trace)),
          "the written record reads back different", again);
    for (int i = 0; i < r.nruns; i++) check(b.run_secs[i] == r.run_secs[i], "a time changed", again);
    tun_record_fini(&b);
    ts_free(again);
  }
  tun_record_fini(&r);
  free(line);
  return 0;
}
