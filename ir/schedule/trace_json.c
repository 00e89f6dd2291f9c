/* trace_json.c — the JSON form of traces,
 * [[[kind, inputs, attrs, outputs], ...], [[index, decision], ...]]:
 * writing, and reading with every field checked against the registry's
 * signatures so a bad trace is refused naming the instruction and field
 * (docs/TRACE.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_int.h"

/* ---- JSON --------------------------------------------------------------------- */
/* Names RVs by a running count of definitions, in instruction order. */
static int *rv_names(const sch_trace *tr) {
  int *num = ts_malloc(sizeof *num * (size_t)(tr->nrv ? tr->nrv : 1));
  if (!num) return NULL;
  for (int i = 0; i < tr->nrv; i++) num[i] = -1;
  int k = 0;
  for (int i = 0; i < tr->n; i++)
    for (int j = 0; j < tr->insts[i].nout; j++) {
      int rv = tr->insts[i].out[j];
      if (rv >= 0 && rv < tr->nrv) num[rv] = k++;
    }
  return num;
}

static void rv_name(const sch_trace *tr, const int *num, int rv, char *buf, size_t n) {
  if (rv < 0 || rv >= tr->nrv || num[rv] < 0) snprintf(buf, n, "?%d", rv);
  else snprintf(buf, n, "%c%d", tr->rvk[rv], num[rv]);
}

static json_t *arg_json(const sch_trace *tr, const int *num, const sch_arg *a) {
  char buf[64];
  switch (a->kind) {
  case SCH_ARG_RV:
    rv_name(tr, num, a->rv, buf, sizeof buf);
    return json_string(buf);
  case SCH_ARG_NONE: return json_string("None");
  case SCH_ARG_INT: return json_integer(a->i);
  case SCH_ARG_FLOAT: return json_real(a->f);
  case SCH_ARG_STR: {
    size_t len = strlen(a->s);
    char *q = ts_malloc(len + 3);
    if (!q) return NULL;
    q[0] = '"';
    memcpy(q + 1, a->s, len);
    q[len + 1] = '"';
    q[len + 2] = '\0';
    json_t *j = json_string(q);
    ts_free(q);
    return j;
  }
  }
  return NULL;
}

static json_t *attr_json(const sch_attr *a) {
  switch (a->kind) {
  case SCH_ATTR_INT: return json_integer(a->i);
  case SCH_ATTR_BOOL: return json_boolean(a->i);
  case SCH_ATTR_FLOAT: return json_real(a->f);
  case SCH_ATTR_STR: return json_string(a->s);
  case SCH_ATTR_INTS: {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->n; i++) json_array_append_new(arr, json_integer(a->ints[i]));
    return arr;
  }
  case SCH_ATTR_FLOATS: {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->n; i++) json_array_append_new(arr, json_real(a->floats[i]));
    return arr;
  }
  }
  return NULL;
}

static json_t *trace_json(const sch_trace *tr) {
  int *num = rv_names(tr);
  json_t *insts = json_array(), *decs = json_array(), *top = json_array();
  if (!num || !insts || !decs || !top) goto fail;
  for (int i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
    json_t *in = json_array(), *at = json_array(), *out = json_array(), *row = json_array();
    if (!in || !at || !out || !row) {
      json_decref(in);
      json_decref(at);
      json_decref(out);
      json_decref(row);
      goto fail;
    }
    for (int j = 0; j < x->nin; j++) json_array_append_new(in, arg_json(tr, num, &x->in[j]));
    for (int j = 0; j < x->nattr; j++) json_array_append_new(at, attr_json(&x->attrs[j]));
    for (int j = 0; j < x->nout; j++) {
      char buf[64];
      rv_name(tr, num, x->out[j], buf, sizeof buf);
      json_array_append_new(out, json_string(buf));
    }
    json_array_append_new(row, json_string(info->name));
    json_array_append_new(row, in);
    json_array_append_new(row, at);
    json_array_append_new(row, out);
    json_array_append_new(insts, row);
    if (x->decision.n && info->decision) {
      json_t *dv;
      if (info->decision == 's') {
        dv = json_integer(x->decision.v[0]);
      } else {
        dv = json_array();
        for (int j = 0; dv && j < x->decision.n; j++) json_array_append_new(dv, json_integer(x->decision.v[j]));
      }
      json_t *pair = json_array();
      json_array_append_new(pair, json_integer(i));
      json_array_append_new(pair, dv);
      json_array_append_new(decs, pair);
    }
  }
  json_array_append_new(top, insts);
  json_array_append_new(top, decs);
  ts_free(num);
  return top;
fail:
  ts_free(num);
  json_decref(insts);
  json_decref(decs);
  json_decref(top);
  return NULL;
}

char *sch_trace_to_json(const sch_trace *tr) {
  json_t *j = trace_json(tr);
  if (!j) return NULL;
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (!s) return NULL;
  char *r = ts_strdup(s);
  free(s);
  return r;
}

static const char *json_type_name(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a bool";
  case JSON_NULL: return "null";
  }
  return "?";
}

typedef struct parse_ctx {
  sch_trace *tr;
  json_t *names; /* name -> RV id */
  ts_diag *d;
  int nrv;
} parse_ctx;

static ts_status perr(parse_ctx *p, int i, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ts_status perr(parse_ctx *p, int i, const char *kind, const char *fmt, ...) {
  char msg[1500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (i < 0) return ts_diag_set(p->d, TS_EPARSE, "trace JSON: %s", msg);
  if (kind) return ts_diag_set(p->d, TS_EPARSE, "trace JSON: instruction %d (%s): %s", i, kind, msg);
  return ts_diag_set(p->d, TS_EPARSE, "trace JSON: instruction %d: %s", i, msg);
}

static ts_status parse_arg(parse_ctx *p, int i, const char *kname, int j, json_t *v, sch_arg *out,
                           ts_arena *a) {
  if (json_is_integer(v)) {
    *out = sch_arg_int(json_integer_value(v));
    return TS_OK;
  }
  if (json_is_real(v)) {
    *out = sch_arg_float(json_real_value(v));
    return TS_OK;
  }
  if (!json_is_string(v))
    return perr(p, i, kname, "input %d is %s; expected a variable name, \"None\", a number or a quoted string", j,
                json_type_name(v));
  const char *s = json_string_value(v);
  size_t len = strlen(s);
  if (!strcmp(s, "None")) {
    *out = sch_arg_none();
    return TS_OK;
  }
  if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
    const char *lit = ts_arena_strndup(a, s + 1, len - 2);
    if (!lit) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    *out = sch_arg_str(lit);
    return TS_OK;
  }
  json_t *id = json_object_get(p->names, s);
  if (!id) return perr(p, i, kname, "input %d: variable '%s' is not defined by an earlier instruction", j, s);
  *out = sch_arg_rv((int)json_integer_value(id));
  return TS_OK;
}

static ts_status parse_attr(parse_ctx *p, int i, const char *kname, int j, char c, json_t *v, sch_attr *out,
                            ts_arena *a) {
  memset(out, 0, sizeof *out);
  switch (c) {
  case 'i':
    if (!json_is_integer(v)) break;
    out->kind = SCH_ATTR_INT;
    out->i = json_integer_value(v);
    return TS_OK;
  case 'b':
    if (!json_is_boolean(v)) break;
    out->kind = SCH_ATTR_BOOL;
    out->i = json_is_true(v);
    return TS_OK;
  case 'f':
    if (!json_is_number(v)) break;
    out->kind = SCH_ATTR_FLOAT;
    out->f = json_number_value(v);
    return TS_OK;
  case 's':
    if (!json_is_string(v)) break;
    out->kind = SCH_ATTR_STR;
    if (!(out->s = ts_arena_strdup(a, json_string_value(v)))) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    return TS_OK;
  case 'I':
  case 'F': {
    if (!json_is_array(v)) break;
    int n = (int)json_array_size(v);
    out->kind = c == 'I' ? SCH_ATTR_INTS : SCH_ATTR_FLOATS;
    out->n = n;
    if (c == 'I') out->ints = TS_ANEWN(a, int64_t, n ? n : 1);
    else out->floats = TS_ANEWN(a, double, n ? n : 1);
    if (!out->ints && !out->floats) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
      json_t *e = json_array_get(v, (size_t)k);
      if (c == 'I' ? !json_is_integer(e) : !json_is_number(e))
        return perr(p, i, kname, "attr %d: element %d is %s, expected %s", j, k, json_type_name(e),
                    c == 'I' ? "an integer" : "a number");
      if (c == 'I') out->ints[k] = json_integer_value(e);
      else out->floats[k] = json_number_value(e);
    }
    return TS_OK;
  }
  }
  return perr(p, i, kname, "attr %d is %s, expected %s", j, json_type_name(v), trc_sig_name(c));
}

static ts_status parse_inst(parse_ctx *p, int i, json_t *row) {
  ts_arena *a = &p->tr->arena;
  if (!json_is_array(row) || json_array_size(row) != 4)
    return perr(p, i, NULL, "expected [kind, inputs, attrs, outputs], got %s%s", json_type_name(row),
                json_is_array(row) ? " of the wrong length" : "");
  json_t *jk = json_array_get(row, 0), *jin = json_array_get(row, 1), *jat = json_array_get(row, 2),
         *jout = json_array_get(row, 3);
  if (!json_is_string(jk)) return perr(p, i, NULL, "the kind is %s, expected a string", json_type_name(jk));
  sch_inst_kind kind;
  if (!sch_inst_kind_lookup(json_string_value(jk), &kind))
    return perr(p, i, NULL, "unknown instruction kind '%s'", json_string_value(jk));
  const sch_inst_kind_info *info = sch_inst_kind_get(kind);
  const char *kn = info->name;
  if (!json_is_array(jin)) return perr(p, i, kn, "inputs are %s, expected an array", json_type_name(jin));
  if (!json_is_array(jat)) return perr(p, i, kn, "attrs are %s, expected an array", json_type_name(jat));
  if (!json_is_array(jout)) return perr(p, i, kn, "outputs are %s, expected an array", json_type_name(jout));
  int nin = (int)json_array_size(jin), nattr = (int)json_array_size(jat), nout = (int)json_array_size(jout);
  sch_arg *in = TS_ANEWN(a, sch_arg, nin ? nin : 1);
  sch_attr *at = TS_ANEWN(a, sch_attr, nattr ? nattr : 1);
  int *out = TS_ANEWN(a, int, nout ? nout : 1);
  if (!in || !at || !out) return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  ts_status st;
  for (int j = 0; j < nin; j++)
    if ((st = parse_arg(p, i, kn, j, json_array_get(jin, (size_t)j), &in[j], a))) return st;
  int nmin, na = trc_attr_count(info, &nmin);
  if (nattr < nmin || nattr > na) {
    if (nmin == na) return perr(p, i, kn, "takes %d attr%s, got %d", na, na == 1 ? "" : "s", nattr);
    return perr(p, i, kn, "takes %d to %d attrs, got %d", nmin, na, nattr);
  }
  for (int j = 0; j < nattr; j++)
    if ((st = parse_attr(p, i, kn, j, trc_attr_sig(info, j), json_array_get(jat, (size_t)j), &at[j], a))) return st;
  /* signature (arity and RV kinds) */
  ts_diag sd;
  ts_diag_clear(&sd);
  if (trc_check_sig(info, nin, in, p->tr->rvk, p->tr->nrv, nattr, at, TS_EPARSE, "x", &sd))
    return perr(p, i, kn, "%s", sd.msg + 3);
  int want = trc_fixed_nout(info, nin, at);
  if (want >= 0 && nout != want)
    return perr(p, i, kn, "names %d output%s, but gives %d", nout, nout == 1 ? "" : "s", want);
  if (kind == SCH_I_SAMPLE_PERFECT_TILE && (at[0].i < 1 || at[0].i > 64))
    return perr(p, i, kn, "n = %lld tiles (want 1..64)", (long long)at[0].i);
  for (int j = 0; j < nout; j++) {
    json_t *o = json_array_get(jout, (size_t)j);
    if (!json_is_string(o)) return perr(p, i, kn, "output %d is %s, expected a name", j, json_type_name(o));
    const char *s = json_string_value(o);
    if (!*s || !strcmp(s, "None") || s[0] == '"')
      return perr(p, i, kn, "output %d: '%s' cannot name a variable", j, s);
    if (json_object_get(p->names, s)) return perr(p, i, kn, "output %d: variable '%s' is defined twice", j, s);
    out[j] = p->nrv++;
    if (json_object_set_new(p->names, s, json_integer(out[j])))
      return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  }
  if (trc_append(p->tr, kind, nin, in, nattr, at, nout, out, NULL))
    return ts_diag_set(p->d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

static ts_status parse_decision(parse_ctx *p, int k, json_t *pair, bool *seen) {
  if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_integer(json_array_get(pair, 0)))
    return perr(p, -1, NULL, "decision %d: expected [instruction index, decision]", k);
  json_int_t i = json_integer_value(json_array_get(pair, 0));
  json_t *v = json_array_get(pair, 1);
  if (i < 0 || i >= p->tr->n)
    return perr(p, -1, NULL, "decision %d: instruction %lld does not exist (the trace has %d)", k, (long long)i,
                p->tr->n);
  sch_inst *x = &p->tr->insts[i];
  const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
  if (!info->decision) return perr(p, (int)i, info->name, "takes no decision, but decision %d names it", k);
  if (seen[i]) return perr(p, (int)i, info->name, "has two decisions");
  seen[i] = true;
  int64_t buf[64];
  int n = 0;
  if (info->decision == 's') {
    if (!json_is_integer(v))
      return perr(p, (int)i, info->name, "the decision is %s, expected an integer index", json_type_name(v));
    buf[n++] = json_integer_value(v);
  } else {
    if (!json_is_array(v))
      return perr(p, (int)i, info->name, "the decision is %s, expected a list of integers", json_type_name(v));
    if ((int64_t)json_array_size(v) != x->attrs[0].i)
      return perr(p, (int)i, info->name, "the decision has %d tiles, but the instruction draws %lld",
                  (int)json_array_size(v), (long long)x->attrs[0].i);
    for (size_t j = 0; j < json_array_size(v); j++) {
      json_t *e = json_array_get(v, j);
      if (!json_is_integer(e))
        return perr(p, (int)i, info->name, "decision element %d is %s, expected an integer", (int)j,
                    json_type_name(e));
      buf[n++] = json_integer_value(e);
    }
  }
  sch_decision dec = {n, buf};
  ts_diag sd;
  ts_diag_clear(&sd);
  if (sch_trace_set_decision(p->tr, (int)i, &dec, &sd)) return ts_diag_set(p->d, sd.code, "%s", sd.msg);
  return TS_OK;
}

sch_trace *sch_trace_from_json(const char *text, ts_diag *d) {
  if (!text) {
    ts_diag_set(d, TS_EPARSE, "trace JSON: no text");
    return NULL;
  }
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  if (!j) {
    ts_diag_set(d, TS_EPARSE, "trace JSON: line %d column %d: %s", err.line, err.column, err.text);
    return NULL;
  }
  parse_ctx p = {.tr = sch_trace_new(), .names = json_object(), .d = d};
  bool *seen = NULL;
  ts_status st = TS_OK;
  if (!p.tr || !p.names) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  if (!json_is_array(j) || json_array_size(j) != 2 || !json_is_array(json_array_get(j, 0)) ||
      !json_is_array(json_array_get(j, 1))) {
    st = perr(&p, -1, NULL, "expected [[instructions...], [decisions...]], got %s%s", json_type_name(j),
              json_is_array(j) ? " of another shape" : "");
    goto out;
  }
  json_t *insts = json_array_get(j, 0), *decs = json_array_get(j, 1);
  for (size_t i = 0; i < json_array_size(insts) && !st; i++)
    st = parse_inst(&p, (int)i, json_array_get(insts, i));
  if (st) goto out;
  seen = ts_calloc(json_array_size(insts) + 1, sizeof *seen);
  if (!seen) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t k = 0; k < json_array_size(decs) && !st; k++)
    st = parse_decision(&p, (int)k, json_array_get(decs, k), seen);
out:
  ts_free(seen);
  json_decref(p.names);
  json_decref(j);
  if (st) {
    sch_trace_free(p.tr);
    return NULL;
  }
  return p.tr;
}

/* ---- text form ------------------------------------------------------------------ */
char *sch_trace_to_text(const sch_trace *tr) {
  int *num = rv_names(tr);
  if (!num) return NULL;
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  char buf[64];
  for (int i = 0; i < tr->n; i++) {
    const sch_inst *x = &tr->insts[i];
    const sch_inst_kind_info *info = sch_inst_kind_get(x->kind);
    for (int j = 0; j < x->nout; j++) {
      rv_name(tr, num, x->out[j], buf, sizeof buf);
      ts_strbuf_printf(&sb, "%s%s", j ? ", " : "", buf);
    }
    ts_strbuf_printf(&sb, "%s%s(", x->nout ? " = " : "", info->name);
    for (int j = 0; j < x->nin; j++) {
      const sch_arg *a = &x->in[j];
      if (j) ts_strbuf_append(&sb, ", ");
      switch (a->kind) {
      case SCH_ARG_RV:
        rv_name(tr, num, a->rv, buf, sizeof buf);
        ts_strbuf_append(&sb, buf);
        break;
      case SCH_ARG_NONE: ts_strbuf_append(&sb, "None"); break;
      case SCH_ARG_INT: ts_strbuf_printf(&sb, "%lld", (long long)a->i); break;
      case SCH_ARG_FLOAT: ts_strbuf_printf(&sb, "%g", a->f); break;
      case SCH_ARG_STR: ts_strbuf_printf(&sb, "\"%s\"", a->s); break;
      }
    }
    for (int j = 0; j < x->nattr; j++) {
      const sch_attr *a = &x->attrs[j];
      ts_strbuf_append(&sb, j ? ", " : "; ");
      switch (a->kind) {
      case SCH_ATTR_INT: ts_strbuf_printf(&sb, "%lld", (long long)a->i); break;
      case SCH_ATTR_BOOL: ts_strbuf_append(&sb, a->i ? "true" : "false"); break;
      case SCH_ATTR_FLOAT: ts_strbuf_printf(&sb, "%g", a->f); break;
      case SCH_ATTR_STR: ts_strbuf_printf(&sb, "\"%s\"", a->s); break;
      case SCH_ATTR_INTS:
      case SCH_ATTR_FLOATS:
        ts_strbuf_append(&sb, "[");
        for (int k = 0; k < a->n; k++) {
          if (a->kind == SCH_ATTR_INTS) ts_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)a->ints[k]);
          else ts_strbuf_printf(&sb, "%s%g", k ? ", " : "", a->floats[k]);
        }
        ts_strbuf_append(&sb, "]");
        break;
      }
    }
    ts_strbuf_append(&sb, ")");
    if (x->decision.n) {
      ts_strbuf_append(&sb, " [");
      for (int k = 0; k < x->decision.n; k++) ts_strbuf_printf(&sb, "%s%lld", k ? ", " : "", (long long)x->decision.v[k]);
      ts_strbuf_append(&sb, "]");
    }
    ts_strbuf_append(&sb, "\n");
  }
  ts_free(num);
  if (sb.oom) {
    ts_strbuf_fini(&sb);
    return NULL;
  }
  if (!sb.data) return ts_strdup("");
  return ts_strbuf_take(&sb);
}
