/* util.c — see util.h. */
#include "util.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/workloads/workloads.h"

ir_func *tu_workload(ts_arena *a, const char *spec) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ts_status st = ir_workload_from_spec(a, spec, &f, &d);
  ck_assert_msg(st == TS_OK && f, "workload %s: %s", spec, d.msg);
  return f;
}

sch_state *tu_schedule(ts_arena *a, const char *spec, ir_func **orig) {
  ir_func *f = tu_workload(a, spec);
  ts_diag d;
  ts_diag_clear(&d);
  sch_state *s = sch_create(f, 1, &d);
  ck_assert_msg(s != NULL, "sch_create: %s", d.msg);
  sch_set_debug_verify(s, true);
  if (orig) *orig = f;
  return s;
}

bool tu_equivalent(const ir_func *orig, const ir_func *sched, uint64_t seed, char *why, size_t n) {
  ts_diag d;
  ts_diag_clear(&d);
  int np = orig->nparams;
  bool ok = false;
  ir_tensor *a = ts_calloc((size_t)np, sizeof *a), *b = ts_calloc((size_t)np, sizeof *b);
  if (!a || !b) goto out;
  if (ir_tensors_for_func(orig, NULL, a, &d) || ir_tensors_for_func(sched, NULL, b, &d)) {
    snprintf(why, n, "tensors: %s", d.msg);
    goto out;
  }
  for (int i = 0; i < orig->ninputs; i++) {
    ir_tensor_fill_random(&a[i], seed + (uint64_t)i);
    ir_tensor_fill_random(&b[i], seed + (uint64_t)i);
  }
  if (ir_interp_run(orig, a, &d)) {
    snprintf(why, n, "interpreting the original: %s", d.msg);
    goto out;
  }
  if (ir_interp_run(sched, b, &d)) {
    snprintf(why, n, "interpreting the scheduled function: %s", d.msg);
    goto out;
  }
  ok = true;
  for (int i = orig->ninputs; i < np; i++) {
    double err = 0;
    if (!ir_tensor_allclose(&b[i], &a[i], 1e-4, 1e-5, &err)) {
      snprintf(why, n, "output %s differs (max abs err %g)", orig->params[i]->name, err);
      ok = false;
      break;
    }
  }
out:
  for (int i = 0; i < np; i++) {
    if (a) ir_tensor_free(&a[i]);
    if (b) ir_tensor_free(&b[i]);
  }
  ts_free(a);
  ts_free(b);
  return ok;
}

void tu_assert_equivalent(const ir_func *orig, const ir_func *sched) {
  char why[2048] = "";
  for (uint64_t seed = 1; seed <= 2; seed++) {
    if (!tu_equivalent(orig, sched, seed, why, sizeof why)) {
      char *text = ir_func_to_string(sched);
      ck_abort_msg("scheduled function differs from the original: %s\n%s", why, text ? text : "");
    }
  }
}

void tu_ok(ts_status st, const ts_diag *d) {
  ck_assert_msg(st == TS_OK, "expected success, got %s: %s", ts_strerror(st), d->msg);
}

void tu_refused(ts_status st, const ts_diag *d, ...) {
  ck_assert_msg(st == TS_ESCHEDULE, "expected a refusal, got %s: %s", ts_strerror(st), d->msg);
  va_list ap;
  va_start(ap, d);
  for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
    ck_assert_msg(strstr(d->msg, s) != NULL, "refusal message '%s' lacks '%s'", d->msg, s);
  va_end(ap);
}

int tu_loops(sch_state *s, const char *block, sch_loop *out, int max) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_block b;
  tu_ok(sch_get_block(s, block, &b, &d), &d);
  sch_loop *l;
  int n;
  tu_ok(sch_get_loops(s, b, &l, &n, &d), &d);
  ck_assert_int_le(n, max);
  memcpy(out, l, sizeof *l * (size_t)n);
  return n;
}

sch_state *tu_schedule_text(ts_arena *a, const char *text, ir_func **orig) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ts_status st = ir_parse_func(a, text, strlen(text), "test.tsl", &f, &d);
  ck_assert_msg(st == TS_OK, "parse: %s", d.msg);
  sch_state *s = sch_create(f, 1, &d);
  ck_assert_msg(s != NULL, "sch_create: %s", d.msg);
  sch_set_debug_verify(s, true);
  *orig = f;
  return s;
}
