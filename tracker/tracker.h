/* tracker.h — the tracker: servers (boards) register under a key with their
 * address and info and heartbeat; clients (tuners) request a server by key
 * and priority, get a ticket, and wait in a per-key priority queue (higher
 * priority first, FIFO within one); the tracker grants exclusive sessions
 * and takes them back on release, on the client's disconnect, on the
 * session's timeout, or when the server stops heartbeating (evicted after
 * evict_ms of silence, not only when TCP closes). docs/TRACKER.md describes
 * states, queues, timeouts and messages; docs/RPC.md the envelope.
 *
 * Transport: rpc/protocol.h messages over nng REQ/REP; the tracker's socket
 * is a raw REP so a client's long poll can be held and answered the moment a
 * server is granted. Every pipe authenticates first (rpc/auth.h). Inbound
 * messages are bounded by TRK_MAX_MSG and validated field by field; bad ones
 * get an error reply, never a crash. */
#ifndef TESSEL_TRACKER_H
#define TESSEL_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "rpc/auth.h"
#include "rpc/protocol.h"

#define TRK_DEFAULT_PORT 9190
#define TRK_MAX_MSG (16 * 1024)          /* inbound message bound, checked by nng before allocation */
#define TRK_MAX_INFO 8192                /* bytes of a server's packed info object */
#define TRK_HEARTBEAT_MS 1000            /* servers heartbeat this often */
#define TRK_EVICT_MS 3000                /* ...and are evicted after this much silence */
#define TRK_SESSION_DEFAULT_MS 600000    /* a grant's lease unless the request says otherwise */
#define TRK_SESSION_MAX_MS 86400000
#define TRK_WAIT_MAX_MS 600000           /* longest single poll */

typedef struct trk_config {
  const char *url;        /* listen URL, e.g. "tcp://0.0.0.0:9190" or "ipc:///tmp/x" */
  const rpc_secret *secret; /* must outlive the tracker */
  int evict_ms;           /* 0: TRK_EVICT_MS */
  int heartbeat_ms;       /* told to servers; 0: TRK_HEARTBEAT_MS */
  int tick_ms;            /* timer granularity; 0: 50 */
  bool verbose;           /* log registrations, grants, evictions to stderr */
  /* bounds on unauthenticated connections (0: RPC_HANDSHAKE_MS,
   * RPC_PENDING_MAX, RPC_PENDING_PER_ADDR, RPC_SILENT_GRACE_MS of
   * rpc/auth.h) */
  int handshake_ms, pending_max, pending_per_addr, pending_grace_ms;
} trk_config;

typedef struct trk_tracker trk_tracker;

/* Raises RLIMIT_NOFILE to its hard limit (once per process), opens the
 * socket, listens on cfg->url and runs the tracker's loop in a thread. *out is the caller's (trk_tracker_stop frees it). Returns TS_EIO
 * with the reason in d when it cannot listen. */
ts_status trk_tracker_start(const trk_config *cfg, trk_tracker **out, ts_diag *d);
/* Stops the loop, drops every connection, closes the socket (waiting at
 * most RPC_CLOSE_WAIT_MS for nng: past that it says so on stderr and leaves
 * what nng may still call back into allocated), frees the rest. NULL is a
 * no-op. */
void trk_tracker_stop(trk_tracker *t);

/* Counters (tests, bench, the CLI's exit summary). */
typedef struct trk_stats {
  uint64_t msgs, bad_msgs;
  uint64_t grants, releases, revocations, disconnect_releases;
  uint64_t registrations, evictions;
  uint64_t refused;       /* requests refused for role or ownership, refused frames */
  uint32_t servers, busy, pending;
  bool nng_stuck;         /* nng's pipe reaper is stuck (rpc_authtab_stuck): restart the tracker */
} trk_stats;
void trk_tracker_stats(trk_tracker *t, trk_stats *out);
/* Connections that have not authenticated yet (tests, bench). */
size_t trk_tracker_pending(trk_tracker *t);

#endif
