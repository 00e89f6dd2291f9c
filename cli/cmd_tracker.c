/* cmd_tracker.c — `tessel tracker` (run the tracker until SIGINT/SIGTERM)
 * and `tessel query` (keys with free/busy/pending counts and each server's
 * key, address, state and info, like TVM's query_rpc_tracker; --json per
 * docs/TRACKER.md). */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracker/tracker.h"
#include "tracker/tracker_client.h"
#include "cli/cli.h"

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

int tun_cmd_tracker(int argc, char **argv) {
  const char *host = "127.0.0.1", *secret_file = NULL; /* loopback unless --host */
  int port = TRK_DEFAULT_PORT;
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tessel tracker [--host H] [--port P] [--secret-file F] [--verbose]\n"
             "Runs the tracker (default 127.0.0.1:%d, loopback only: --host 0.0.0.0 for every\n"
             "interface) until interrupted. The secret comes from --secret-file or\n"
             "TESSEL_RPC_SECRET_FILE (mode 600, at least 16 bytes: umask 077; head -c 32\n"
             "/dev/urandom > ~/.tessel-secret). See docs/TRACKER.md.\n",
             TRK_DEFAULT_PORT);
      return 0;
    } else if (!strcmp(argv[i], "--host") && i + 1 < argc) {
      host = argv[++i];
    } else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
      if (!tun_cli_int("tracker", "--port", argv[++i], 1, 65535, &port)) return 2; /* clients must know it: not 0 */
    } else if (!strcmp(argv[i], "--secret-file") && i + 1 < argc) {
      secret_file = argv[++i];
    } else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
      verbose = true;
    } else {
      fprintf(stderr, "tessel tracker: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  rpc_secret sec;
  if (tun_cli_secret("tracker", secret_file, &sec)) return 2;
  ts_diag err = {0};
  char url[300];
  snprintf(url, sizeof url, "tcp://%s:%d", host, port);
  trk_config cfg = {.url = url, .secret = &sec, .verbose = verbose};
  trk_tracker *t;
  if (trk_tracker_start(&cfg, &t, &err) != TS_OK) {
    fprintf(stderr, "tessel tracker: %s\n", err.msg);
    return 1;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  fprintf(stderr, "tessel tracker: listening on %s\n", url);
  while (!stop_flag) usleep(100000);
  trk_stats st;
  trk_tracker_stats(t, &st);
  trk_tracker_stop(t);
  rpc_secret_wipe(&sec);
  fprintf(stderr, "tessel tracker: stopped (%llu registrations, %llu grants, %llu evictions)\n",
          (unsigned long long)st.registrations, (unsigned long long)st.grants, (unsigned long long)st.evictions);
  return 0;
}

/* msgpack object -> JSON (info objects are small maps of scalars). */
static json_t *to_json(const msgpack_object *o, int depth) {
  if (depth > 8) return json_null();
  switch (o->type) {
  case MSGPACK_OBJECT_BOOLEAN: return json_boolean(o->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return json_integer((json_int_t)o->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer((json_int_t)o->via.i64);
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64: return json_real(o->via.f64);
  case MSGPACK_OBJECT_STR: return json_stringn(o->via.str.ptr, o->via.str.size);
  case MSGPACK_OBJECT_ARRAY: {
    json_t *a = json_array();
    for (uint32_t i = 0; i < o->via.array.size; i++) json_array_append_new(a, to_json(&o->via.array.ptr[i], depth + 1));
    return a;
  }
  case MSGPACK_OBJECT_MAP: {
    json_t *m = json_object();
    for (uint32_t i = 0; i < o->via.map.size; i++) {
      const msgpack_object_kv *kv = &o->via.map.ptr[i];
      if (kv->key.type != MSGPACK_OBJECT_STR) continue;
      char k[256];
      size_t n = kv->key.via.str.size < sizeof k - 1 ? kv->key.via.str.size : sizeof k - 1;
      memcpy(k, kv->key.via.str.ptr, n);
      k[n] = 0;
      json_object_set_new(m, k, to_json(&kv->val, depth + 1));
    }
    return m;
  }
  default: return json_null();
  }
}

int tun_cmd_query(int argc, char **argv) {
  const char *tracker = NULL, *secret_file = NULL;
  bool as_json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tessel query --tracker H:P [--json] [--secret-file F]\n"
             "Prints each key's free/busy/pending counts and each server's key, address,\n"
             "state and info. --json: {servers: [{key, address, state, info}], keys: {KEY: {free, busy, pending}}}\n");
      return 0;
    } else if (!strcmp(argv[i], "--tracker") && i + 1 < argc) {
      tracker = argv[++i];
    } else if (!strcmp(argv[i], "--secret-file") && i + 1 < argc) {
      secret_file = argv[++i];
    } else if (!strcmp(argv[i], "--json")) {
      as_json = true;
    } else {
      fprintf(stderr, "tessel query: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (!tracker) {
    fprintf(stderr, "tessel query: --tracker H:P is required\n");
    return 2;
  }
  rpc_secret sec;
  if (tun_cli_secret("query", secret_file, &sec)) return 2;
  ts_diag err = {0};
  trk_conn *c;
  ts_status st = trk_conn_open(tracker, &sec, "query", 5000, &c, &err);
  rpc_secret_wipe(&sec);
  if (st != TS_OK) {
    fprintf(stderr, "tessel query: %s\n", err.msg);
    return 1;
  }
  rpc_msg m;
  st = trk_query(c, &m, &err);
  trk_conn_close(c);
  if (st != TS_OK) {
    fprintf(stderr, "tessel query: %s\n", err.msg);
    return 1;
  }
  const msgpack_object *servers = NULL, *keys = NULL;
  uint32_t ns = 0;
  if (rpc_get_array(&m, NULL, "servers", 1u << 20, &servers, &ns) || rpc_get_map(&m, NULL, "keys", &keys)) {
    fprintf(stderr, "tessel query: malformed reply: %s\n", m.err);
    rpc_msg_fini(&m);
    return 1;
  }
  json_t *root = json_object(), *jsv = json_array(), *jk = to_json(keys, 0);
  for (uint32_t i = 0; i < ns; i++) {
    json_t *s = json_object();
    char key[RPC_MAX_KEY + 1] = "", addr[RPC_MAX_ADDR + 1] = "", state[16] = "";
    rpc_get_str(&m, &servers[i], "key", key, sizeof key);
    rpc_get_str(&m, &servers[i], "address", addr, sizeof addr);
    rpc_get_str(&m, &servers[i], "state", state, sizeof state);
    const msgpack_object *info = rpc_find(&servers[i], "info");
    json_object_set_new(s, "key", json_string(key));
    json_object_set_new(s, "address", json_string(addr));
    json_object_set_new(s, "state", json_string(state));
    json_object_set_new(s, "info", info ? to_json(info, 0) : json_null());
    json_array_append_new(jsv, s);
  }
  rpc_msg_fini(&m);
  json_object_set_new(root, "servers", jsv);
  json_object_set_new(root, "keys", jk);
  if (as_json) {
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    printf("%s\n", txt ? txt : "{}");
    free(txt);
  } else {
    printf("Tracker address: %s\n\nQueue status\n%-24s %6s %6s %8s\n", tracker, "key", "free", "busy", "pending");
    const char *k;
    json_t *v;
    json_object_foreach(jk, k, v) {
      printf("%-24s %6lld %6lld %8lld\n", k, (long long)json_integer_value(json_object_get(v, "free")),
             (long long)json_integer_value(json_object_get(v, "busy")),
             (long long)json_integer_value(json_object_get(v, "pending")));
    }
    printf("\nServers\n%-16s %-28s %-6s %s\n", "key", "address", "state", "info");
    size_t i;
    json_array_foreach(jsv, i, v) {
      char *inf = json_dumps(json_object_get(v, "info"), JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
      printf("%-16s %-28s %-6s %s\n", json_string_value(json_object_get(v, "key")),
             json_string_value(json_object_get(v, "address")), json_string_value(json_object_get(v, "state")),
             inf ? inf : "null");
      free(inf);
    }
  }
  json_decref(root);
  return 0;
}
