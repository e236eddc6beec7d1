/* Edge cases of our rsockets in one container (tests/e2e/rsocket_test.sh): argument errors,
 * a refused connection (blocking and asynchronous, SO_ERROR), a non-blocking accept and
 * receive, end of stream after the peer's shutdown, rpoll over an rsocket and a pipe, the
 * name calls' buffer rules.
 * Prints "ok NAME" or "FAIL NAME: why" per check; exits 1 if any failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char* name, const char* why) {
  printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why);
  if (!ok) failures++;
  fflush(stdout);
}

static struct sockaddr_in addr_of(const char* ip, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

int main(int argc, char** argv) {
  const char* ip = argc > 1 ? argv[1] : "127.0.0.1";
  int r = rsocket(AF_UNIX, SOCK_STREAM, 0);
  check(r == -1 && errno == EAFNOSUPPORT, "unix_eafnosupport", "rsocket(AF_UNIX) did not fail");
  r = rsocket(AF_INET, SOCK_RAW, 0);
  check(r == -1 && errno == EPROTONOSUPPORT, "raw_eprotonosupport", "SOCK_RAW did not fail");
  check(rclose(123456) == -1 && errno == EBADF, "close_ebadf", "rclose of nothing");

  /* Nobody listens: a blocking connect is refused; an asynchronous one reports it. */
  struct sockaddr_in none = addr_of(ip, 7900);
  int c = rsocket(AF_INET, SOCK_STREAM, 0);
  r = rconnect(c, (struct sockaddr*)&none, sizeof none);
  check(r == -1 && errno == ECONNREFUSED, "connect_refused", strerror(errno));
  rclose(c);
  c = rsocket(AF_INET, SOCK_STREAM, 0);
  rfcntl(c, F_SETFL, O_NONBLOCK);
  r = rconnect(c, (struct sockaddr*)&none, sizeof none);
  struct pollfd p = {.fd = c, .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof err;
  /* As a TCP socket's: refused at once, or EINPROGRESS and then SO_ERROR. */
  const int at_once = r == -1 && errno == ECONNREFUSED;
  check(at_once || (r == -1 && errno == EINPROGRESS && rpoll(&p, 1, 5000) == 1 &&
                    rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
                    err == ECONNREFUSED),
        "async_connect_so_error", "neither ECONNREFUSED nor EINPROGRESS and SO_ERROR");
  rclose(c);

  /* A listener: accept without a request is EAGAIN when non-blocking. */
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in la = addr_of(ip, 7901);
  int one = 1;
  rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (rbind(l, (struct sockaddr*)&la, sizeof la) != 0 || rlisten(l, 4) != 0) {
    perror("listener");
    return 1;
  }
  rfcntl(l, F_SETFL, O_NONBLOCK);
  r = raccept(l, NULL, NULL);
  check(r == -1 && errno == EAGAIN, "accept_eagain", "non-blocking accept did not say EAGAIN");
  rfcntl(l, F_SETFL, 0);

  /* Connect asynchronously, accept, then both ends are connected. */
  c = rsocket(AF_INET, SOCK_STREAM, 0);
  rfcntl(c, F_SETFL, O_NONBLOCK);
  r = rconnect(c, (struct sockaddr*)&la, sizeof la);
  const int connect_errno = errno;
  struct sockaddr_in peer;
  socklen_t plen = sizeof peer;
  int s = raccept(l, (struct sockaddr*)&peer, &plen);
  p.fd = c;
  p.events = POLLOUT;
  err = -1;
  len = sizeof err;
  check(r == -1 && connect_errno == EINPROGRESS && s >= 0 && rpoll(&p, 1, 5000) == 1 &&
            rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0,
        "async_connect_accept", "the connection did not come up");
  check(plen == sizeof peer && peer.sin_family == AF_INET, "accept_peer_addr", "no peer address");

  char buf[64];
  r = rrecv(c, buf, sizeof buf, 0);
  check(r == -1 && errno == EAGAIN, "recv_eagain", "non-blocking receive without data");

  /* Data, then the peer's shutdown: the bytes, then end of stream. rpoll mixes a pipe. */
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  r = (int)rsend(s, "hello", 5, 0);
  rshutdown(s, SHUT_WR);
  struct pollfd two[2] = {{.fd = pipefd[0], .events = POLLIN}, {.fd = c, .events = POLLIN}};
  int n = rpoll(two, 2, 5000);
  check(r == 5 && n == 1 && two[1].revents & POLLIN && two[0].revents == 0, "rpoll_mixed",
        "rpoll over a pipe and an rsocket");
  if (write(pipefd[1], "x", 1) != 1) return 1;
  n = rpoll(two, 2, 0);
  check(n == 2 && (two[0].revents & POLLIN), "rpoll_pipe_ready", "the pipe was not reported");
  rfcntl(c, F_SETFL, 0);
  r = (int)rrecv(c, buf, sizeof buf, 0);
  int eof = (int)rrecv(c, buf, sizeof buf, 0);
  check(r == 5 && memcmp(buf, "hello", 5) == 0 && eof == 0, "shutdown_eof",
        "data then end of stream");
  struct sockaddr_in name;
  socklen_t nlen = sizeof name;
  check(rgetsockname(c, (struct sockaddr*)&name, &nlen) == 0 && name.sin_port != 0 &&
            rgetpeername(c, (struct sockaddr*)&name, &nlen) == 0 && name.sin_port == htons(7901),
        "names", "rgetsockname/rgetpeername");
  /* As getsockname(2): no buffer and a zero length learns the size (librspreload's fallback to
   * TCP asks so); no buffer for a nonzero length is EFAULT. */
  socklen_t size_only = 0;
  nlen = sizeof name;
  check(rgetsockname(c, NULL, &size_only) == 0 && size_only == sizeof name &&
            rgetpeername(c, NULL, &nlen) == -1 && errno == EFAULT,
        "name_size_only", "a null name buffer");
  rclose(c);
  rclose(s);
  rclose(l);
  return failures == 0 ? 0 : 1;
}
