// ibv_create_flow / ibv_destroy_flow: steering rules of RAW_PACKET QPs (router/flow_steering.cc).
// The specs after ibv_flow_attr are read here, as rdma-core's providers read them, into one
// proto::FlowMatch the router applies; what the router cannot match on (tunnels, MPLS, ESP,
// inner headers, actions, counters, DONT_TRAP and EGRESS rules, default rules) is EOPNOTSUPP.
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstring>
#include <new>

#include "abi/verbs/provider.h"
#include "proto/messages.h"

namespace wharf::abi {
namespace {

template <size_t N>
void put_bytes(std::array<uint8_t, N>& out, const void* in, size_t n) {
  std::memcpy(out.data(), in, n);
}

// Reads one spec into m; a second spec of a layer already given is EINVAL.
int read_spec(const ibv_flow_spec* s, proto::FlowMatch* m) {
  const uint32_t type = s->hdr.type;
  if ((type & IBV_FLOW_SPEC_INNER) != 0) return EOPNOTSUPP;
  switch (type) {
    case IBV_FLOW_SPEC_ETH: {
      if (s->hdr.size != sizeof(ibv_flow_spec_eth)) return EINVAL;
      const ibv_flow_eth_filter& v = s->eth.val;
      const ibv_flow_eth_filter& k = s->eth.mask;
      put_bytes(m->dst_mac, v.dst_mac, 6);
      put_bytes(m->dst_mac_mask, k.dst_mac, 6);
      put_bytes(m->src_mac, v.src_mac, 6);
      put_bytes(m->src_mac_mask, k.src_mac, 6);
      m->ether_type = ntohs(v.ether_type);
      m->ether_type_mask = ntohs(k.ether_type);
      m->vlan_tag = ntohs(v.vlan_tag);
      m->vlan_tag_mask = ntohs(k.vlan_tag);
      return 0;
    }
    case IBV_FLOW_SPEC_IPV4:
    case IBV_FLOW_SPEC_IPV4_EXT: {
      const bool ext = type == IBV_FLOW_SPEC_IPV4_EXT;
      if (s->hdr.size != (ext ? sizeof(ibv_flow_spec_ipv4_ext) : sizeof(ibv_flow_spec_ipv4)))
        return EINVAL;
      if (m->ip_version != 0) return EINVAL;
      m->ip_version = 4;
      // The addresses lead both filters.
      const ibv_flow_ipv4_ext_filter& v = s->ipv4_ext.val;
      const ibv_flow_ipv4_ext_filter& k = s->ipv4_ext.mask;
      put_bytes(m->src_ip, &v.src_ip, 4);
      put_bytes(m->src_ip_mask, &k.src_ip, 4);
      put_bytes(m->dst_ip, &v.dst_ip, 4);
      put_bytes(m->dst_ip_mask, &k.dst_ip, 4);
      if (!ext) return 0;
      if (k.flags != 0) return EOPNOTSUPP;  // fragment flags
      m->ip_proto = v.proto, m->ip_proto_mask = k.proto;
      m->tclass = v.tos, m->tclass_mask = k.tos;
      m->hop_limit = v.ttl, m->hop_limit_mask = k.ttl;
      return 0;
    }
    case IBV_FLOW_SPEC_IPV6: {
      if (s->hdr.size != sizeof(ibv_flow_spec_ipv6)) return EINVAL;
      if (m->ip_version != 0) return EINVAL;
      m->ip_version = 6;
      const ibv_flow_ipv6_filter& v = s->ipv6.val;
      const ibv_flow_ipv6_filter& k = s->ipv6.mask;
      put_bytes(m->src_ip, v.src_ip, 16);
      put_bytes(m->src_ip_mask, k.src_ip, 16);
      put_bytes(m->dst_ip, v.dst_ip, 16);
      put_bytes(m->dst_ip_mask, k.dst_ip, 16);
      m->flow_label = ntohl(v.flow_label), m->flow_label_mask = ntohl(k.flow_label);
      m->ip_proto = v.next_hdr, m->ip_proto_mask = k.next_hdr;
      m->tclass = v.traffic_class, m->tclass_mask = k.traffic_class;
      m->hop_limit = v.hop_limit, m->hop_limit_mask = k.hop_limit;
      return 0;
    }
    case IBV_FLOW_SPEC_TCP:
    case IBV_FLOW_SPEC_UDP: {
      if (s->hdr.size != sizeof(ibv_flow_spec_tcp_udp)) return EINVAL;
      if (m->l4_proto != 0) return EINVAL;
      m->l4_proto = type == IBV_FLOW_SPEC_TCP ? IPPROTO_TCP : IPPROTO_UDP;
      m->src_port = ntohs(s->tcp_udp.val.src_port);
      m->src_port_mask = ntohs(s->tcp_udp.mask.src_port);
      m->dst_port = ntohs(s->tcp_udp.val.dst_port);
      m->dst_port_mask = ntohs(s->tcp_udp.mask.dst_port);
      return 0;
    }
    default: return EOPNOTSUPP;
  }
}

int flow_request(ibv_qp* qp, const ibv_flow_attr* attr, proto::CreateFlowReq* req) {
  if (attr->comp_mask != 0 || attr->port != 1) return EINVAL;
  if (attr->flags != 0) return EOPNOTSUPP;  // DONT_TRAP, EGRESS
  if (attr->type != IBV_FLOW_ATTR_NORMAL && attr->type != IBV_FLOW_ATTR_SNIFFER)
    return EOPNOTSUPP;  // the default rules of a port: nothing here is not steered
  if (attr->type == IBV_FLOW_ATTR_SNIFFER && attr->num_of_specs != 0) return EINVAL;
  req->qp = to_qp(qp)->handle;
  req->type = attr->type;
  req->priority = attr->priority;
  // Specs follow each other at their sizes, so one may sit at an address its union type
  // is not aligned for: each is copied out before it is read.
  const auto* p = reinterpret_cast<const uint8_t*>(attr + 1);
  for (uint8_t i = 0; i < attr->num_of_specs; ++i) {
    ibv_flow_spec s{};
    std::memcpy(&s.hdr, p, sizeof(s.hdr));
    if (s.hdr.size < sizeof(s.hdr) || s.hdr.size > sizeof(s)) return EINVAL;
    std::memcpy(&s, p, s.hdr.size);
    if (int err = read_spec(&s, &req->match); err != 0) return err;
    p += s.hdr.size;
  }
  return 0;
}

}  // namespace

ibv_flow* create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  if (qp == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  proto::CreateFlowReq req;
  if (int err = flow_request(qp, attr, &req); err != 0) {
    errno = err;
    return nullptr;
  }
  auto* flow = new (std::nothrow) ibv_flow{};
  if (flow == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  proto::Handle rep;
  if (int err = to_ctx(qp->context)->client.call(proto::Op::kCreateFlow, req, nullptr, 0, &rep);
      err != 0) {
    delete flow;
    errno = err;
    return nullptr;
  }
  flow->context = qp->context;
  flow->handle = rep.handle;
  return flow;
}

int destroy_flow(ibv_flow* flow) {
  proto::Empty rep;
  int err =
      to_ctx(flow->context)
          ->client.call(proto::Op::kDestroyFlow, proto::Handle{flow->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  delete flow;
  return 0;
}

}  // namespace wharf::abi
