// rdma_cm connection setup rate (issue #4: >= 2,000 connections/s on one host), with TCP
// connection setup between the same two containers as its baseline. Used by bench/cm_rate.sh.
//
//   wharf-cm-rate -s [-n N] [-p PORT] [-t cm|tcp] [-T SECONDS]
//   wharf-cm-rate -c SERVER_IP -n N [-w WINDOW] [-p PORT] [-t cm|tcp] [-T SECONDS]
//
// cm server: one event channel, an id bound to 0.0.0.0:PORT listening (backlog 1024); every
// CONNECT_REQUEST gets a small RC QP (one PD and one CQ, allocated from the first request's
// device, shared by all) and is accepted; DISCONNECTED destroys the QP and the id. With -n N
// it exits once N connections have been torn down, else it runs until killed (or -T).
// tcp server: accepts and closes; with -n N it exits after N.
//
// cm client: keeps up to WINDOW connections being set up at once, each: rdma_create_id
// (RDMA_PS_TCP), resolve address, resolve route, create the QP, rdma_connect; at ESTABLISHED
// it is counted and disconnected, at its DISCONNECTED destroyed. Time runs from the first
// rdma_create_id to the N-th ESTABLISHED. tcp client: N connect()s (WINDOW outstanding,
// nonblocking; sequential and blocking for window 1), each closed once connected. One line:
//   cm_rate mode=cm|tcp connections=N window=W seconds=S rate=R
// Any rdma_cm error event ends the run with status 1; so does -T (default 60 s; 0: no limit).
// Links Debian's librdmacm and libibverbs; run it with Wharf's injected (wharf-run).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool server = false;
  std::string server_ip;
  long n = 0;
  int window = 1;
  uint16_t port = 20079;
  bool cm = true;
  unsigned limit = 60;
};

// Progress, for the time-limit message (lock-free atomics are async-signal-safe).
std::atomic<long> g_established{0};
std::atomic<long> g_torn_down{0};

void put_num(char** p, long v) {
  char tmp[24];
  int len = 0;
  if (v < 0) v = 0;
  do {
    tmp[len++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (len > 0) *(*p)++ = tmp[--len];
}

void on_alarm(int) {
  char msg[160];
  char* p = msg;
  auto put = [&p](const char* s) {
    while (*s) *p++ = *s++;
  };
  put("wharf-cm-rate: time limit reached (established ");
  put_num(&p, g_established.load());
  put(", torn down ");
  put_num(&p, g_torn_down.load());
  put(")\n");
  ssize_t ignored = write(STDERR_FILENO, msg, static_cast<size_t>(p - msg));
  (void)ignored;
  _exit(1);
}

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "wharf-cm-rate: %s: %s\n", what, strerror(errno));
  exit(1);
}

[[noreturn]] void die_msg(const std::string& msg) {
  fprintf(stderr, "wharf-cm-rate: %s\n", msg.c_str());
  exit(1);
}

[[noreturn]] void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s -s [-n N] [-p PORT] [-t cm|tcp] [-T SECONDS]\n"
          "       %s -c SERVER_IP -n N [-w WINDOW] [-p PORT] [-t cm|tcp] [-T SECONDS]\n",
          argv0, argv0);
  exit(2);
}

sockaddr_in address(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (ip == nullptr) {
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    die_msg(std::string("bad IPv4 address '") + ip + "'");
  }
  return a;
}

void report(const Options& o, Clock::time_point t0, Clock::time_point t1) {
  const double s = std::chrono::duration<double>(t1 - t0).count();
  printf("cm_rate mode=%s connections=%ld window=%d seconds=%.4f rate=%.1f\n", o.cm ? "cm" : "tcp",
         o.n, o.window, s, s > 0 ? static_cast<double>(o.n) / s : 0.0);
  fflush(stdout);
}

// ---- rdma_cm ----

// The PD and CQ every QP of this process shares, allocated from the first id's device.
struct Shared {
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
};

void create_qp(Shared* sh, rdma_cm_id* id) {
  if (id->verbs == nullptr) die_msg("rdma_cm id has no device");
  if (sh->verbs == nullptr) {
    sh->verbs = id->verbs;
    sh->pd = ibv_alloc_pd(id->verbs);
    if (sh->pd == nullptr) die("ibv_alloc_pd");
    sh->cq = ibv_create_cq(id->verbs, 256, nullptr, nullptr, 0);
    if (sh->cq == nullptr) die("ibv_create_cq");
  } else if (sh->verbs != id->verbs) {
    die_msg("rdma_cm ids on different devices");
  }
  ibv_qp_init_attr attr{};
  attr.send_cq = sh->cq;
  attr.recv_cq = sh->cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 1;
  attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, sh->pd, &attr) != 0) die("rdma_create_qp");
}

void destroy_shared(Shared* sh) {
  if (sh->cq != nullptr) ibv_destroy_cq(sh->cq);
  if (sh->pd != nullptr) ibv_dealloc_pd(sh->pd);
}

rdma_conn_param conn_param() {
  rdma_conn_param p{};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

[[noreturn]] void cm_event_error(const rdma_cm_event* ev) {
  fprintf(stderr, "wharf-cm-rate: rdma_cm event %s (status %d) after %ld established\n",
          rdma_event_str(ev->event), ev->status, g_established.load());
  exit(1);
}

// The events both sides handle alike: DISCONNECTED tears the connection down (its QP and
// id), TIMEWAIT_EXIT is acked, and any other ends the run.
void teardown_event(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  switch (ev->event) {
    case RDMA_CM_EVENT_DISCONNECTED:
      rdma_ack_cm_event(ev);
      rdma_destroy_qp(id);
      if (rdma_destroy_id(id) != 0) die("rdma_destroy_id");
      ++g_torn_down;
      break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: rdma_ack_cm_event(ev); break;
    default: cm_event_error(ev);
  }
}

rdma_cm_event* next_event(rdma_event_channel* ch) {
  rdma_cm_event* ev = nullptr;
  for (;;) {
    if (rdma_get_cm_event(ch, &ev) == 0) return ev;
    if (errno != EINTR) die("rdma_get_cm_event");
  }
}

int cm_server(const Options& o) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) die("rdma_create_event_channel");
  rdma_cm_id* listen_id = nullptr;
  if (rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
  sockaddr_in a = address(nullptr, o.port);
  if (rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(&a)) != 0) die("rdma_bind_addr");
  if (rdma_listen(listen_id, 1024) != 0) die("rdma_listen");
  Shared sh;
  while (o.n == 0 || g_torn_down.load() < o.n) {
    rdma_cm_event* ev = next_event(ch);
    rdma_cm_id* id = ev->id;
    switch (ev->event) {
      case RDMA_CM_EVENT_CONNECT_REQUEST: {
        rdma_ack_cm_event(ev);
        create_qp(&sh, id);
        rdma_conn_param p = conn_param();
        if (rdma_accept(id, &p) != 0) die("rdma_accept");
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        rdma_ack_cm_event(ev);
        ++g_established;
        break;
      default: teardown_event(ev);
    }
  }
  rdma_destroy_id(listen_id);
  destroy_shared(&sh);
  rdma_destroy_event_channel(ch);
  return 0;
}

int cm_client(const Options& o) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) die("rdma_create_event_channel");
  sockaddr_in dst = address(o.server_ip.c_str(), o.port);
  Shared sh;
  long started = 0;
  auto start_one = [&] {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) die("rdma_create_id");
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0)
      die("rdma_resolve_addr");
    ++started;
  };
  const Clock::time_point t0 = Clock::now();
  Clock::time_point t1 = t0;
  while (started < o.n && started - g_established.load() < o.window) start_one();
  while (g_torn_down.load() < o.n) {
    rdma_cm_event* ev = next_event(ch);
    rdma_cm_id* id = ev->id;
    switch (ev->event) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        rdma_ack_cm_event(ev);
        if (rdma_resolve_route(id, 2000) != 0) die("rdma_resolve_route");
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        rdma_ack_cm_event(ev);
        create_qp(&sh, id);
        rdma_conn_param p = conn_param();
        if (rdma_connect(id, &p) != 0) die("rdma_connect");
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        rdma_ack_cm_event(ev);
        if (++g_established == o.n) t1 = Clock::now();
        if (rdma_disconnect(id) != 0) die("rdma_disconnect");
        while (started < o.n && started - g_established.load() < o.window) start_one();
        break;
      default: teardown_event(ev);
    }
  }
  destroy_shared(&sh);
  rdma_destroy_event_channel(ch);
  report(o, t0, t1);
  return 0;
}

// ---- TCP ----

int tcp_server(const Options& o) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = address(nullptr, o.port);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) die("bind");
  if (listen(ls, 1024) != 0) die("listen");
  while (o.n == 0 || g_torn_down.load() < o.n) {
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      die("accept");
    }
    close(fd);
    ++g_established;
    ++g_torn_down;
  }
  close(ls);
  return 0;
}

int tcp_client(const Options& o) {
  const sockaddr_in dst = address(o.server_ip.c_str(), o.port);
  const auto* sa = reinterpret_cast<const sockaddr*>(&dst);
  const Clock::time_point t0 = Clock::now();
  if (o.window <= 1) {
    for (long i = 0; i < o.n; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) die("socket");
      while (connect(fd, sa, sizeof(dst)) != 0) {
        if (errno != EINTR) die("connect");
      }
      close(fd);
      ++g_established;
    }
    report(o, t0, Clock::now());
    return 0;
  }
  std::vector<pollfd> pending;  // connects in progress
  long started = 0;
  while (g_established.load() < o.n) {
    while (started < o.n && static_cast<int>(pending.size()) < o.window) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (fd < 0) die("socket");
      ++started;
      if (connect(fd, sa, sizeof(dst)) == 0) {  // done at once
        close(fd);
        ++g_established;
        continue;
      }
      if (errno != EINPROGRESS) die("connect");
      pending.push_back({fd, POLLOUT, 0});
    }
    if (pending.empty()) continue;
    if (poll(pending.data(), pending.size(), -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].revents == 0) {
        ++i;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(pending[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) die("getsockopt");
      if (err != 0) {
        errno = err;
        die("connect");
      }
      close(pending[i].fd);
      ++g_established;
      pending[i] = pending.back();
      pending.pop_back();
    }
  }
  report(o, t0, Clock::now());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool client = false;
  int c;
  while ((c = getopt(argc, argv, "sc:n:w:p:t:T:")) != -1) {
    switch (c) {
      case 's': o.server = true; break;
      case 'c':
        client = true;
        o.server_ip = optarg;
        break;
      case 'n': o.n = atol(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      case 'p': o.port = static_cast<uint16_t>(atoi(optarg)); break;
      case 't':
        if (strcmp(optarg, "cm") == 0) {
          o.cm = true;
        } else if (strcmp(optarg, "tcp") == 0) {
          o.cm = false;
        } else {
          usage(argv[0]);
        }
        break;
      case 'T': o.limit = static_cast<unsigned>(atoi(optarg)); break;
      default: usage(argv[0]);
    }
  }
  if (optind != argc || o.server == client || o.n < 0 || o.window < 1 || o.port == 0)
    usage(argv[0]);
  if (client && o.n < 1) usage(argv[0]);
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (o.limit > 0) alarm(o.limit);
  if (o.server) return o.cm ? cm_server(o) : tcp_server(o);
  return o.cm ? cm_client(o) : tcp_client(o);
}
