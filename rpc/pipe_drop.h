/* pipe_drop.h — closing nng pipes and sockets so that nng 1.5.2's pipe reaper
 * cannot wedge (docs/RPC.md, "nng 1.5.2: closing a pipe while a message
 * arrives").
 *
 * In nng 1.5.2 (Debian 12's libnng1), closing a TCP pipe while a message is
 * arriving on it can leave the pipe's receive unfinished for good: the close
 * stops the transport's receive aio between the completion of a message's
 * 8-byte length and the re-arm for its body; the re-arm (nni_aio_begin on a
 * stopped aio) then fails without completing the protocol's receive, and
 * nng's one reaper thread waits for that receive in the protocol's pipe_stop
 * (xrep0_pipe_stop, req0's likewise) for ever. Every later pipe close and
 * nng_close in the process waits behind it. Releases after 1.5.2 fixed it
 * (nanomsg/nng#1636).
 *
 * rpc_pipe_drop closes a pipe another way: it disconnects the pipe's TCP
 * socket under nng (connect(AF_UNSPEC): the peer gets a reset, every read and
 * write fails), and nng closes the pipe itself from its receive-error path,
 * after the receive has finished, which does not race. The socket is found
 * among the process's descriptors by the pipe's two addresses. Other
 * transports (ipc, inproc) and pipes whose socket is not found are closed
 * with nng_pipe_close.
 *
 * rpc_socket_close closes a socket in a thread and gives up after a bound,
 * so that a reaper wedged all the same (by a pipe close nng makes itself)
 * cannot hang the caller; rpc_pipeset records a client socket's pipes so
 * that they can be dropped before it. */
#ifndef TESSEL_RPC_PIPE_DROP_H
#define TESSEL_RPC_PIPE_DROP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "base/ts.h"

#define RPC_CLOSE_WAIT_MS 2000   /* rpc_socket_close's bound */
#define RPC_DROP_WAIT_MS 1000    /* how long closers wait for dropped pipes to be released */
#define RPC_LISTEN_BACKLOG 4096  /* rpc_listener_backlog's backlog for the servers (nng: 128) */

/* Disconnects the TCP connections of the pipes ids[0..n) (one pass over the
 * descriptors); the ones not found (gone already, not TCP) are closed with
 * nng_pipe_close. Returns how many were disconnected. Never blocks on nng. */
size_t rpc_pipes_drop(const uint32_t *ids, size_t n);
/* The same for one pipe. */
void rpc_pipe_drop(nng_pipe p);

/* Closes listener l (when its id is > 0) and then sock, in a thread, and
 * waits at most wait_ms (<= 0: RPC_CLOSE_WAIT_MS). Returns true when nng
 * closed them; false when it gave up, having said so on stderr (prefixed
 * with who): nng still owns the socket and may still call its callbacks,
 * so whatever they use must stay allocated. */
bool rpc_socket_close(nng_socket sock, nng_listener l, int wait_ms, const char *who);

/* The live pipes of a client socket, from nng's pipe notifications. */
typedef struct rpc_pipeset {
  pthread_mutex_t mu;
  uint32_t ids[8];
  size_t n;
  uint64_t lost; /* pipes not recorded (more than 8 at once) */
} rpc_pipeset;

/* A new set watching sock (ADD_POST and REM_POST; nng allows one callback
 * per event, so the socket must have no other). NULL on TS_ENOMEM or when
 * nng refuses the notification (TS_EIO); d says which. */
rpc_pipeset *rpc_pipeset_watch(nng_socket sock, ts_diag *d);
/* Drops every pipe of the set, waits up to wait_ms for nng to release them,
 * then rpc_socket_close(sock, no listener, 0, who). Frees ps when the socket
 * closed (the set is nng's until then); returns what rpc_socket_close did.
 * ps NULL: only the close. */
bool rpc_pipeset_close(rpc_pipeset *ps, nng_socket sock, int wait_ms, const char *who);

/* nng 1.5.2 listens with a backlog of 128: a burst of connects (an attacker's
 * wave) fills the accept queue, the kernel drops the handshakes that arrive
 * then, and a good client's connect waits for its 1 s retransmit. This calls
 * listen() again on the started TCP listener l's socket (found among the
 * descriptors by its bound address; Linux then takes the new backlog, capped
 * by net.core.somaxconn). Returns the backlog asked for, or 0 when l is not a
 * started TCP listener or its socket was not found (nothing changed). */
int rpc_listener_backlog(nng_listener l, int backlog);

#endif
