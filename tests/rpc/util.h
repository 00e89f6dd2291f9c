/* util.h — helpers shared by the rpc tests: a secret file, a free-ish
 * loopback port, the server binary started as a child process. */
#ifndef TESSEL_TESTS_RPC_UTIL_H
#define TESSEL_TESTS_RPC_UTIL_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline void write_secret(char *path, size_t n, const char *content) {
  snprintf(path, n, "/tmp/tessel-rpc-test-secret-%d-XXXXXX", (int)getpid());
  int fd = mkstemp(path);
  if (fd < 0) abort();
  if (write(fd, content, strlen(content)) != (ssize_t)strlen(content)) abort();
  close(fd);
}

static inline int random_port(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec;
  return 20000 + (int)(seed % 12000u); /* below the ephemeral range (32768..) */
}

/* Starts exe --no-tracker on 127.0.0.1:port; returns the pid. */
static inline pid_t spawn_server(const char *exe, int port, const char *secret) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  pid_t pid = fork();
  if (pid == 0) {
    execl(exe, exe, "--no-tracker", "--host", "127.0.0.1", "--port", ps, "--secret-file", secret,
          (char *)NULL);
    _exit(127);
  }
  return pid;
}

static inline int stop_server(pid_t pid) {
  int status = 0;
  kill(pid, SIGTERM);
  for (int i = 0; i < 500; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

#endif
