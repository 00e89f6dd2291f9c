/* util.c — see util.h. */
#include "util.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/layout.h"
#include "ir/struct.h"
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

/* ---- per-test fixture ------------------------------------------------------ */

static ts_arena *fx_arena;
static ts_vec fx_states; /* sch_state *, opened with tu_open* */
static ts_vec fx_traced; /* sch_traced *, opened with tu_open_traced */

void tu_setup(void) {
  fx_arena = ts_arena_new();
  ck_assert_ptr_nonnull(fx_arena);
  ts_vec_init(&fx_states);
  ts_vec_init(&fx_traced);
}

void tu_teardown(void) {
  for (size_t i = 0; i < fx_states.len; i++) sch_free(fx_states.items[i]);
  for (size_t i = 0; i < fx_traced.len; i++) sch_traced_free(fx_traced.items[i]);
  ts_vec_fini(&fx_states);
  ts_vec_fini(&fx_traced);
  ts_arena_free(fx_arena);
  fx_arena = NULL;
}

ts_arena *tu_arena(void) {
  ck_assert_msg(fx_arena != NULL, "tu_arena outside the tu_setup fixture");
  return fx_arena;
}

static sch_state *track(sch_state *s) {
  ck_assert_msg(ts_vec_push(&fx_states, s) == TS_OK, "out of memory");
  return s;
}

sch_state *tu_open(const char *spec, ir_func **orig) { return track(tu_schedule(tu_arena(), spec, orig)); }

sch_state *tu_open_text(const char *text, ir_func **orig) {
  return track(tu_schedule_text(tu_arena(), text, orig));
}

sch_state *tu_open_loops(const char *spec, ir_func **orig, const char *block, sch_loop *l, int n) {
  sch_state *s = tu_open(spec, orig);
  ck_assert_int_eq(tu_loops(s, block, l, n), n);
  return s;
}

sch_traced *tu_open_traced(const char *spec, uint64_t seed, ir_func **orig) {
  ir_func *f = tu_workload(tu_arena(), spec);
  ts_diag d;
  ts_diag_clear(&d);
  sch_traced *t = sch_traced_new(f, seed, &d);
  ck_assert_msg(t != NULL, "sch_traced_new: %s", d.msg);
  sch_set_debug_verify(sch_traced_state(t), true);
  ck_assert_msg(ts_vec_push(&fx_traced, t) == TS_OK, "out of memory");
  *orig = f;
  return t;
}

TCase *tu_tcase(Suite *su, const char *name, void (*setup)(void), double timeout_s) {
  TCase *tc = tcase_create(name);
  tcase_add_checked_fixture(tc, setup ? setup : tu_setup, tu_teardown);
  if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
  suite_add_tcase(su, tc);
  return tc;
}

int tu_run(Suite *su) {
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}

/* ---- finding things --------------------------------------------------------- */

typedef struct find_ctx {
  const char *name;
  const ir_stmt *found;
} find_ctx;

static bool find_cb(void *ctx, const ir_stmt *st) {
  find_ctx *c = ctx;
  if (st->kind == IR_BLOCK_REALIZE && !strcmp(st->u.realize.block->name, c->name)) c->found = st;
  return c->found == NULL;
}

const ir_stmt *tu_find_realize(sch_state *s, const char *name) {
  find_ctx c = {name, NULL};
  ir_visitor v = {.stmt = find_cb, .ctx = &c};
  ir_visit_stmt(&v, sch_func(s)->body);
  return c.found;
}

const ir_block *tu_block(sch_state *s, const char *name) {
  const ir_stmt *r = tu_find_realize(s, name);
  ck_assert_msg(r != NULL, "no block '%s'", name);
  return r->u.realize.block;
}

sch_loop tu_loop(sch_state *s, const char *block, int idx) {
  sch_loop ls[32];
  int n = tu_loops(s, block, ls, 32);
  ck_assert_msg(idx >= 0 && idx < n, "block %s has %d loops, wanted #%d", block, n, idx);
  return ls[idx];
}

int tu_nloops(sch_state *s, const char *block) {
  sch_loop ls[32];
  return tu_loops(s, block, ls, 32);
}

bool tu_reads(const ir_block *b, const char *buf) {
  for (int i = 0; i < b->nreads; i++)
    if (!strcmp(b->reads[i].buf->name, buf)) return true;
  return false;
}

bool tu_writes(const ir_block *b, const char *buf) {
  for (int i = 0; i < b->nwrites; i++)
    if (!strcmp(b->writes[i].buf->name, buf)) return true;
  return false;
}

/* ---- assertions ------------------------------------------------------------- */

char *tu_text(sch_state *s) {
  char *t = ir_func_to_string(sch_func(s));
  ck_assert_ptr_nonnull(t);
  return t;
}

void tu_assert_has(sch_state *s, const char *needle) {
  char *t = tu_text(s);
  ck_assert_msg(strstr(t, needle) != NULL, "printed IR lacks '%s':\n%s", needle, t);
  ts_free(t);
}

void tu_assert_lacks(sch_state *s, const char *needle) {
  char *t = tu_text(s);
  ck_assert_msg(strstr(t, needle) == NULL, "printed IR has '%s':\n%s", needle, t);
  ts_free(t);
}

/* Appends name to a space-separated list in buf (n bytes), failing the test
 * rather than truncating. */
static void join(char *buf, size_t n, const char *name) {
  size_t len = strlen(buf);
  int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", name);
  ck_assert_msg(w >= 0 && (size_t)w < n - len, "name list too long: %s ...", buf);
}

void tu_assert_loops(sch_state *s, const char *block, const char *want) {
  sch_loop l[32];
  int n = tu_loops(s, block, l, 32);
  char got[512] = "";
  for (int i = 0; i < n; i++) join(got, sizeof got, l[i].var->name);
  ck_assert_msg(!strcmp(got, want), "loops of '%s': '%s', want '%s'", block, got, want);
}

void tu_assert_children(sch_state *s, const char *want) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_block *kids;
  int n;
  const ir_block *root = sch_func(s)->body->u.realize.block;
  tu_ok(sch_get_child_blocks(s, (sch_block){root->name}, &kids, &n, &d), &d);
  char got[512] = "";
  for (int i = 0; i < n; i++) join(got, sizeof got, kids[i].name);
  ck_assert_msg(!strcmp(got, want), "root's blocks: '%s', want '%s'", got, want);
}

void tu_assert_roundtrip(sch_traced *t, const ir_func *orig, uint64_t seed) {
  /* a TransformLayout changes the signature: the scheduled function equals
   * the original re-laid the same way (docs/LAYOUT.md) */
  ts_arena ra;
  ts_arena_init(&ra);
  const ir_func *ref = sch_layout_reference(&ra, orig, sch_traced_trace(t), NULL);
  tu_assert_equivalent(ref ? ref : orig, sch_traced_func(t));
  ts_arena_fini(&ra);
  ts_diag d;
  ts_diag_clear(&d);
  char *json = sch_trace_to_json(sch_traced_trace(t));
  ck_assert_ptr_nonnull(json);
  sch_trace *tr = sch_trace_from_json(json, &d);
  ck_assert_msg(tr != NULL, "parse %s: %s", json, d.msg);
  sch_traced *r = sch_trace_replay(tr, orig, seed, &d);
  ck_assert_msg(r != NULL, "replay %s: %s", json, d.msg);
  char why[1024];
  ck_assert_msg(ir_struct_equal_func_explain(sch_traced_func(t), sch_traced_func(r), why, sizeof why),
                "replayed function differs: %s\n%s", why, json);
  char *json2 = sch_trace_to_json(sch_traced_trace(r));
  ck_assert_ptr_nonnull(json2);
  ck_assert_str_eq(json, json2);
  ts_free(json2);
  sch_traced_free(r);
  sch_trace_free(tr);
  ts_free(json);
}
