/* cm_probe: edge cases of rdma_cm inside one container, through the librdmacm API only (Debian's
 * librdmacm, ours injected). Prints one line per check, "ok NAME" or "FAIL NAME: why", and exits
 * 0 when every check passed.
 *   cm_probe [ADDR]   ADDR: an address of this container (default 127.0.0.1); the checks listen
 *                     and connect on it, and resolve 198.19.255.254, which no container has
 *                     (the router answers: nothing goes on any network). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char* name, const char* why) {
  if (ok) {
    printf("ok %s\n", name);
  } else {
    printf("FAIL %s: %s\n", name, why);
    failures++;
  }
  fflush(stdout);
}

/* The next event of `ch` within `ms`, or NULL. */
static struct rdma_cm_event* next_event(struct rdma_event_channel* ch, int ms) {
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  if (poll(&p, 1, ms) != 1) return NULL;
  struct rdma_cm_event* ev = NULL;
  if (rdma_get_cm_event(ch, &ev) != 0) return NULL;
  return ev;
}

/* Waits for `type` on `ch`; returns the unacked event or NULL (printing what came instead). */
static struct rdma_cm_event* expect(struct rdma_event_channel* ch, enum rdma_cm_event_type type) {
  struct rdma_cm_event* ev = next_event(ch, 5000);
  if (ev == NULL) {
    fprintf(stderr, "cm_probe: no event, wanted %s\n", rdma_event_str(type));
    return NULL;
  }
  if (ev->event != type) {
    fprintf(stderr, "cm_probe: got %s status %d, wanted %s\n", rdma_event_str(ev->event),
            ev->status, rdma_event_str(type));
    rdma_ack_cm_event(ev);
    return NULL;
  }
  return ev;
}

static int expect_ack(struct rdma_event_channel* ch, enum rdma_cm_event_type type) {
  struct rdma_cm_event* ev = expect(ch, type);
  if (ev == NULL) return -1;
  rdma_ack_cm_event(ev);
  return 0;
}

static struct sockaddr_storage addr_of(const char* host, uint16_t port) {
  struct sockaddr_storage ss;
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *ai = NULL;
  memset(&ss, 0, sizeof(ss));
  if (getaddrinfo(host, NULL, &hints, &ai) == 0) {
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
  }
  if (ss.ss_family == AF_INET) ((struct sockaddr_in*)&ss)->sin_port = htons(port);
  if (ss.ss_family == AF_INET6) ((struct sockaddr_in6*)&ss)->sin6_port = htons(port);
  return ss;
}

static int create_qp(struct rdma_cm_id* id) {
  struct ibv_qp_init_attr attr = {
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  return rdma_create_qp(id, NULL, &attr);
}

/* An active id on `ch` with its route resolved to host:port. */
static struct rdma_cm_id* route_to(struct rdma_event_channel* ch, const char* host, uint16_t port) {
  struct rdma_cm_id* id = NULL;
  struct sockaddr_storage dst = addr_of(host, port);
  if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) return NULL;
  if (rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) != 0 ||
      expect_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED) != 0 || rdma_resolve_route(id, 2000) != 0 ||
      expect_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED) != 0) {
    rdma_destroy_id(id);
    return NULL;
  }
  return id;
}

struct sync_server {
  struct rdma_cm_id* listen;
  int result;
};

static void* sync_server_main(void* arg) {
  struct sync_server* s = arg;
  struct rdma_cm_id* id = NULL;
  s->result = -1;
  if (rdma_get_request(s->listen, &id) != 0) return NULL;
  if (rdma_accept(id, NULL) == 0) {
    /* Wait for the client's disconnect: the DISCONNECTED event on the id's own channel. */
    struct rdma_cm_event* ev = NULL;
    if (rdma_get_cm_event(id->channel, &ev) == 0) {
      s->result = ev->event == RDMA_CM_EVENT_DISCONNECTED ? 0 : -1;
      rdma_ack_cm_event(ev);
    }
  }
  rdma_destroy_ep(id);
  return NULL;
}

/* The QP attributes rdma_cm gives both ends of a connection are the kernel's on a default
 * fabric: the port's MTU on InfiniBand, what fits a 1500-byte Ethernet MTU on RoCE (1024); a
 * local ACK timeout of the path's packet life time + 1 (OpenSM's 18 on InfiniBand, the cma's
 * 16 on RoCE); ib_cm's min_rnr_timer 0; the connection's retry counts (7, 7 by default). */
static void check_default_qp_attrs(struct rdma_cm_id* client, struct rdma_cm_id* server) {
  struct ibv_port_attr port;
  if (ibv_query_port(client->verbs, 1, &port) != 0) {
    check(0, "default_qp_attrs", "ibv_query_port failed");
    return;
  }
  const int eth = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  const enum ibv_mtu mtu = eth ? IBV_MTU_1024 : port.active_mtu;
  const uint8_t timeout = eth ? 17 : 19;
  struct rdma_cm_id* ids[2] = {client, server};
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    struct ibv_qp_attr a;
    int mask = 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    ok &= rdma_init_qp_attr(ids[i], &a, &mask) == 0 && a.path_mtu == mtu && a.min_rnr_timer == 0 &&
          a.ah_attr.port_num == 1 && (mask & IBV_QP_MIN_RNR_TIMER) != 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    ok &= rdma_init_qp_attr(ids[i], &a, &mask) == 0 && a.timeout == timeout &&
          a.retry_cnt == 7 && a.rnr_retry == 7 && (mask & IBV_QP_TIMEOUT) != 0;
    memset(&a, 0, sizeof(a));
    struct ibv_qp_init_attr init;
    ok &= ibv_query_qp(ids[i]->qp, &a, IBV_QP_PATH_MTU | IBV_QP_TIMEOUT, &init) == 0 &&
          a.path_mtu == mtu && a.timeout == timeout;
  }
  check(ok, "default_qp_attrs", "path MTU, ACK timeout, retry counts or RNR timer differ");
}

static void check_sync_endpoints(const char* host) {
  struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST,
                                .ai_port_space = RDMA_PS_TCP};
  struct rdma_addrinfo *res = NULL, *cres = NULL;
  struct ibv_qp_init_attr attr = {
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .sq_sig_all = 1};
  struct rdma_cm_id *listen = NULL, *client = NULL;
  char port[16];
  int ok = 0;
  if (rdma_getaddrinfo(host, "0", &hints, &res) != 0 ||
      rdma_create_ep(&listen, res, NULL, &attr) != 0 || rdma_listen(listen, 4) != 0) {
    check(0, "sync_endpoints", "passive rdma_create_ep/rdma_listen failed");
    goto out;
  }
  snprintf(port, sizeof(port), "%u", ntohs(rdma_get_src_port(listen)));
  struct sync_server srv = {.listen = listen, .result = -1};
  pthread_t t;
  pthread_create(&t, NULL, sync_server_main, &srv);
  hints.ai_flags = RAI_NUMERICHOST;
  if (rdma_getaddrinfo(host, port, &hints, &cres) == 0 &&
      rdma_create_ep(&client, cres, NULL, &attr) == 0 && rdma_connect(client, NULL) == 0 &&
      rdma_disconnect(client) == 0) {
    ok = 1;
  }
  pthread_join(t, NULL);
  check(ok && srv.result == 0, "sync_endpoints", "connect/accept/disconnect did not complete");
out:
  if (client != NULL) rdma_destroy_ep(client);
  if (listen != NULL) rdma_destroy_ep(listen);
  rdma_freeaddrinfo(res);
  rdma_freeaddrinfo(cres);
}

int main(int argc, char** argv) {
  const char* host = argc > 1 ? argv[1] : "127.0.0.1";
  struct rdma_event_channel* sc = rdma_create_event_channel();
  struct rdma_event_channel* cc = rdma_create_event_channel();
  if (sc == NULL || cc == NULL) {
    fprintf(stderr, "cm_probe: rdma_create_event_channel: %s\n", strerror(errno));
    return 1;
  }

  /* A listener on an ephemeral port; a second bind to that port fails. */
  struct rdma_cm_id *listen = NULL, *dup = NULL;
  struct sockaddr_storage any = addr_of(host, 0);
  if (rdma_create_id(sc, &listen, NULL, RDMA_PS_TCP) != 0 ||
      rdma_bind_addr(listen, (struct sockaddr*)&any) != 0 || rdma_listen(listen, 8) != 0) {
    fprintf(stderr, "cm_probe: listener: %s\n", strerror(errno));
    return 1;
  }
  uint16_t port = ntohs(rdma_get_src_port(listen));
  /* As the kernel's cma: a wildcard or loopback bind gives the id no device; an address of
   * the container does. */
  {
    struct rdma_cm_id* b = NULL;
    struct sockaddr_storage wild = addr_of("0.0.0.0", 0), lo = addr_of("127.0.0.1", 0);
    int ok = rdma_create_id(sc, &b, NULL, RDMA_PS_TCP) == 0 &&
             rdma_bind_addr(b, (struct sockaddr*)&wild) == 0 && b->verbs == NULL;
    if (b != NULL) rdma_destroy_id(b);
    b = NULL;
    ok &= rdma_create_id(sc, &b, NULL, RDMA_PS_TCP) == 0 &&
          rdma_bind_addr(b, (struct sockaddr*)&lo) == 0 && b->verbs == NULL;
    if (b != NULL) rdma_destroy_id(b);
    if (strncmp(host, "127.", 4) != 0) {
      struct sockaddr_storage mine = addr_of(host, 0);
      b = NULL;
      ok &= rdma_create_id(sc, &b, NULL, RDMA_PS_TCP) == 0 &&
            rdma_bind_addr(b, (struct sockaddr*)&mine) == 0 && b->verbs != NULL;
      if (b != NULL) rdma_destroy_id(b);
    }
    check(ok, "bind_device_as_kernel", "a wildcard/loopback bind got a device, or an address none");
  }
  struct sockaddr_storage same = addr_of(host, port);
  int r = -1;
  if (rdma_create_id(sc, &dup, NULL, RDMA_PS_TCP) == 0) {
    r = rdma_bind_addr(dup, (struct sockaddr*)&same);
    check(r == -1 && errno == EADDRINUSE, "bind_twice_eaddrinuse", "second bind did not fail");
    rdma_destroy_id(dup);
  }

  /* Resolve: an ephemeral source port; then private data over the REQ limit. */
  struct rdma_cm_id* c1 = route_to(cc, host, port);
  if (c1 == NULL || create_qp(c1) != 0) {
    fprintf(stderr, "cm_probe: client setup: %s\n", strerror(errno));
    return 1;
  }
  check(rdma_get_src_port(c1) != 0, "src_port_after_resolve", "port 0");
  char big[57];
  memset(big, 'x', sizeof(big));
  struct rdma_conn_param cp = {.private_data = big,
                               .private_data_len = sizeof(big),
                               .responder_resources = 1,
                               .initiator_depth = 1,
                               .retry_count = 7,
                               .rnr_retry_count = 7};
  r = rdma_connect(c1, &cp);
  check(r == -1 && errno == EINVAL, "private_data_too_long_einval", "connect accepted 57 bytes");

  /* Connect, reject with private data: REJECTED carries it. */
  cp.private_data = "hello";
  cp.private_data_len = 6;
  struct rdma_cm_event* ev = NULL;
  if (rdma_connect(c1, &cp) == 0 && (ev = expect(sc, RDMA_CM_EVENT_CONNECT_REQUEST)) != NULL) {
    int got = ev->param.conn.private_data_len >= 6 &&
              memcmp(ev->param.conn.private_data, "hello", 6) == 0;
    check(got, "connect_request_private_data", "request's private data differs");
    struct rdma_cm_id* req = ev->id;
    rdma_ack_cm_event(ev);
    rdma_reject(req, "nope", 5);
    rdma_destroy_id(req);
    ev = expect(cc, RDMA_CM_EVENT_REJECTED);
    check(ev != NULL && ev->param.conn.private_data_len >= 5 &&
              memcmp(ev->param.conn.private_data, "nope", 5) == 0,
          "reject_private_data", "no REJECTED with the reject's data");
    if (ev != NULL) rdma_ack_cm_event(ev);
  } else {
    check(0, "reject_private_data", "no CONNECT_REQUEST");
  }
  rdma_destroy_qp(c1);
  rdma_destroy_id(c1);

  /* Non-blocking channel: EAGAIN, then poll() wakes with the event. */
  int flags = fcntl(cc->fd, F_GETFL);
  fcntl(cc->fd, F_SETFL, flags | O_NONBLOCK);
  struct rdma_cm_id* c2 = NULL;
  rdma_create_id(cc, &c2, NULL, RDMA_PS_TCP);
  r = rdma_get_cm_event(cc, &ev);
  check(r == -1 && errno == EAGAIN, "nonblocking_eagain", "no EAGAIN on an empty channel");
  struct sockaddr_storage dst = addr_of(host, port);
  rdma_resolve_addr(c2, NULL, (struct sockaddr*)&dst, 2000);
  struct pollfd pfd = {.fd = cc->fd, .events = POLLIN};
  r = poll(&pfd, 1, 5000);
  check(r == 1 && rdma_get_cm_event(cc, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED,
        "nonblocking_poll_wakes", "poll/get_cm_event did not report ADDR_RESOLVED");
  if (r == 1) rdma_ack_cm_event(ev);
  fcntl(cc->fd, F_SETFL, flags);

  /* Accept, establish; migrate the client id; disconnect: DISCONNECTED once on each side. */
  struct rdma_cm_id* s2 = NULL;
  int established = 0;
  if (rdma_resolve_route(c2, 2000) == 0 && expect_ack(cc, RDMA_CM_EVENT_ROUTE_RESOLVED) == 0 &&
      create_qp(c2) == 0 && rdma_connect(c2, NULL) == 0 &&
      (ev = expect(sc, RDMA_CM_EVENT_CONNECT_REQUEST)) != NULL) {
    s2 = ev->id;
    rdma_ack_cm_event(ev);
    if (create_qp(s2) == 0 && rdma_accept(s2, NULL) == 0 &&
        expect_ack(cc, RDMA_CM_EVENT_ESTABLISHED) == 0 &&
        expect_ack(sc, RDMA_CM_EVENT_ESTABLISHED) == 0) {
      established = 1;
    }
  }
  check(established, "accept_establish", "no ESTABLISHED on both sides");
  if (established) check_default_qp_attrs(c2, s2);
  struct rdma_event_channel* mc = rdma_create_event_channel();
  check(mc != NULL && rdma_migrate_id(c2, mc) == 0 && c2->channel == mc, "migrate_id",
        "rdma_migrate_id failed");
  if (established) {
    rdma_disconnect(c2);
    int c_once = expect_ack(mc, RDMA_CM_EVENT_DISCONNECTED) == 0;
    int s_once = expect_ack(sc, RDMA_CM_EVENT_DISCONNECTED) == 0;
    struct rdma_cm_event* extra_c = next_event(mc, 300);
    struct rdma_cm_event* extra_s = next_event(sc, 300);
    check(c_once && s_once && extra_c == NULL && extra_s == NULL, "disconnect_once",
          "DISCONNECTED missing or repeated");
    if (extra_c != NULL) rdma_ack_cm_event(extra_c);
    if (extra_s != NULL) rdma_ack_cm_event(extra_s);
  }
  if (s2 != NULL) {
    rdma_destroy_qp(s2);
    rdma_destroy_id(s2);
  }
  rdma_destroy_qp(c2);
  rdma_destroy_id(c2);

  /* An address nobody has. */
  struct rdma_cm_id* c3 = NULL;
  struct sockaddr_storage nobody = addr_of("198.19.255.254", 4791);
  rdma_create_id(cc, &c3, NULL, RDMA_PS_TCP);
  r = rdma_resolve_addr(c3, NULL, (struct sockaddr*)&nobody, 2000);
  ev = r == 0 ? next_event(cc, 5000) : NULL;
  check(ev != NULL && ev->event == RDMA_CM_EVENT_ADDR_ERROR, "resolve_unknown_addr_error",
        "no ADDR_ERROR");
  if (ev != NULL) rdma_ack_cm_event(ev);
  rdma_destroy_id(c3);

  check_sync_endpoints(host);

  rdma_destroy_id(listen);
  if (mc != NULL) rdma_destroy_event_channel(mc);
  rdma_destroy_event_channel(cc);
  rdma_destroy_event_channel(sc);
  return failures == 0 ? 0 : 1;
}
