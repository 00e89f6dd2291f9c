/* fork_pipe.h — the plumbing shared by the fork-isolated runs (measure.c's
 * tsrt_measure_forked, model.c's tsrt_model_run_forked, cuda_rt.c's) and
 * the output collection of the CPU and GPU measurements: a child forked
 * with a pipe back to the parent, whole-buffer writes in the child, reads
 * bounded by a deadline in the parent, and reaping the child. Internal to
 * the runtime (static inline: nothing here joins the artifact-facing
 * tsrt_* symbols; POSIX only, for the cross-built runner too). */
#ifndef TESSEL_RUNTIME_FORK_PIPE_H
#define TESSEL_RUNTIME_FORK_PIPE_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

/* pipe() then fork() (stdio flushed first so the child does not repeat
 * buffered output). Both pipe ends are close-on-exec: a process that another
 * thread of the parent forks and execs meanwhile (a compiler, a server) must
 * not hold the write end, or the parent would see no EOF when our child dies
 * and would wait out the whole deadline. Returns the child's pid in the parent and 0 in the
 * child; fds[0] is the read end, fds[1] the write end (each side closes the
 * one it does not use). On failure returns -1, closes what it opened, sets
 * *status to TS_ESYSTEM and writes "pipe: REASON" or "fork: REASON" into err
 * (a result's status and error). */
static inline pid_t tsrt_fork_pipe(int fds[2], ts_status *status, char *err, size_t errn) {
  *status = TS_ESYSTEM;
  if (pipe(fds) != 0) {
    snprintf(err, errn, "pipe: %s", strerror(errno));
    return -1;
  }
  for (int i = 0; i < 2; i++)
    if (fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
      snprintf(err, errn, "pipe: cannot set close-on-exec: %s", strerror(errno));
      close(fds[0]);
      close(fds[1]);
      return -1;
    }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errn, "fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid >= 0) *status = TS_OK;
  return pid;
}

/* tsrt_fork_pipe for a measurement (a failure said in res): the child
 * keeps only the write end fds[1], the parent only the read end fds[0]. */
static inline pid_t tsrt_fork_measure(int fds[2], tsrt_measure_result *res) {
  pid_t pid = tsrt_fork_pipe(fds, &res->status, res->error, sizeof res->error);
  if (pid >= 0) close(fds[pid == 0 ? 0 : 1]);
  return pid;
}

/* After a run: the output checksums (res->noutputs, res->checksums) of the
 * params [ninputs, nparams) in bufs, and, when want, their bytes
 * concatenated in res->outputs. TS_ENOMEM (res->error says so) when the
 * copy cannot be allocated. measure.c; the CPU and GPU measurements share it. */
ts_status tsrt_collect_outputs(tsrt_measure_result *res, void *const *bufs, const size_t *bytes, int ninputs,
                               int nparams, bool want);

/* The libraries that library kernels call (tuner/library.h) get n threads:
 * OPENBLAS_NUM_THREADS and OMP_NUM_THREADS, which OpenBLAS and an OpenMP
 * runtime read when they load with the artifact; and, when an OpenMP runtime
 * is loaded already (tessel links libgomp through xgboost, so libgomp read
 * OMP_NUM_THREADS when tessel started: oneDNN would take a thread per core
 * and, under load, wait on the descheduled ones for tens of ms per call), its
 * omp_set_num_threads for the calling thread, the one that runs the kernels
 * the executor or the measurement launches itself. */
static inline void tsrt_library_threads(int n) {
  if (n <= 0) return;
  char buf[16];
  snprintf(buf, sizeof buf, "%d", n);
  setenv("OPENBLAS_NUM_THREADS", buf, 1);
  setenv("OMP_NUM_THREADS", buf, 1);
  void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  if (set) set(n);
}

/* In the child: TESSEL_NUM_THREADS=n for the thread pool when n > 0, and the
 * same count for the libraries library kernels call. */
static inline void tsrt_child_threads(int n) {
  if (n > 0) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", n);
    setenv("TESSEL_NUM_THREADS", buf, 1);
    tsrt_library_threads(n);
  }
}

/* Moves all n bytes between fd and p (retrying on EINTR): writes them, or
 * reads them before the deadline (tsrt_now() seconds). 0 ok, -1 EOF or
 * error, -2 timeout (reading). */
static inline int tsrt_move_all(int fd, char *p, size_t n, bool writing, double deadline) {
  while (n) {
    if (!writing) {
      double left = deadline - tsrt_now();
      if (left <= 0) return -2;
      struct pollfd pfd = {fd, POLLIN, 0};
      int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) return -2;
      if (pr < 0) return -1;
    }
    ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Writes all n bytes. 0 ok, -1 error. */
static inline int tsrt_write_all(int fd, const void *p, size_t n) { return tsrt_move_all(fd, (char *)p, n, true, 0); }

/* Reads n bytes before the deadline: 0 ok, -1 EOF or error, -2 timeout. */
static inline int tsrt_read_all(int fd, void *p, size_t n, double deadline) {
  return tsrt_move_all(fd, p, n, false, deadline);
}

/* In a measuring child: sends r, then its output bytes, up the pipe and
 * exits. */
static inline void tsrt_child_send_result(int fd, tsrt_measure_result *r) {
  void *outs = r->outputs;
  r->outputs = NULL;
  if (tsrt_write_all(fd, r, sizeof *r) == 0 && outs) tsrt_write_all(fd, outs, r->outputs_bytes);
  _exit(0);
}

/* In the parent: reads the child's result and output bytes into res before
 * the deadline (tsrt_read_all's return; the outputs dropped when they do not
 * come whole). */
static inline int tsrt_read_result(int fd, tsrt_measure_result *res, double deadline) {
  int rd = tsrt_read_all(fd, res, sizeof *res, deadline);
  res->outputs = NULL;
  if (rd == 0 && res->outputs_bytes) {
    res->outputs = ts_malloc(res->outputs_bytes);
    if (!res->outputs || tsrt_read_all(fd, res->outputs, res->outputs_bytes, deadline) != 0) {
      ts_free(res->outputs);
      res->outputs = NULL;
      res->outputs_bytes = 0;
    }
  }
  return rd;
}

/* Replaces res by a failed result: status and the printf-style reason. */
__attribute__((format(printf, 3, 4))) static inline void tsrt_result_fail(tsrt_measure_result *res, ts_status st,
                                                                          const char *fmt, ...) {
  tsrt_result_fini(res);
  memset(res, 0, sizeof *res);
  res->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->error, sizeof res->error, fmt, ap);
  va_end(ap);
}

/* waitpid(pid) until it is reaped (retrying on EINTR); the wait status. */
static inline int tsrt_reap(pid_t pid) {
  int wst = 0;
  while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
  }
  return wst;
}

/* waitpid(pid) with a deadline (tsrt_now() seconds): polls until the child
 * is reaped; past the deadline it is sent SIGKILL and reaped, and *killed is
 * set (the wait status then says SIGKILL, which the caller must not report
 * as the child's own crash). Returns the wait status. */
static inline int tsrt_reap_by(pid_t pid, double deadline, int *killed) {
  *killed = 0;
  long nap_us = 200;
  for (;;) {
    int wst = 0;
    pid_t r = waitpid(pid, &wst, WNOHANG);
    if (r == pid) return wst;
    if (r < 0 && errno != EINTR) return 0; /* not our child (ECHILD): nothing to reap */
    if (tsrt_now() >= deadline) {
      kill(pid, SIGKILL);
      *killed = 1;
      return tsrt_reap(pid);
    }
    struct timespec ts = {0, nap_us * 1000};
    nanosleep(&ts, NULL);
    if (nap_us < 10000) nap_us *= 2;
  }
}

#endif
