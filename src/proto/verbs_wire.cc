#include "proto/verbs_wire.h"

#include <cstring>

namespace wharf::proto {

AhAttr to_wire(const ibv_ah_attr& a) {
  AhAttr w;
  w.dlid = a.dlid;
  w.sl = a.sl;
  w.src_path_bits = a.src_path_bits;
  w.static_rate = a.static_rate;
  w.is_global = a.is_global;
  w.port_num = a.port_num;
  w.sgid_index = a.grh.sgid_index;
  w.hop_limit = a.grh.hop_limit;
  w.traffic_class = a.grh.traffic_class;
  w.flow_label = a.grh.flow_label;
  std::memcpy(w.dgid.data(), a.grh.dgid.raw, 16);
  return w;
}

ibv_ah_attr from_wire(const AhAttr& w) {
  ibv_ah_attr a{};
  a.dlid = w.dlid;
  a.sl = w.sl;
  a.src_path_bits = w.src_path_bits;
  a.static_rate = w.static_rate;
  a.is_global = w.is_global;
  a.port_num = w.port_num;
  a.grh.sgid_index = w.sgid_index;
  a.grh.hop_limit = w.hop_limit;
  a.grh.traffic_class = w.traffic_class;
  a.grh.flow_label = w.flow_label;
  std::memcpy(a.grh.dgid.raw, w.dgid.data(), 16);
  return a;
}

QpAttr to_wire(const ibv_qp_attr& a) {
  QpAttr w;
  w.qp_state = static_cast<uint8_t>(a.qp_state);
  w.cur_qp_state = static_cast<uint8_t>(a.cur_qp_state);
  w.path_mtu = static_cast<uint8_t>(a.path_mtu);
  w.path_mig_state = static_cast<uint8_t>(a.path_mig_state);
  w.qkey = a.qkey;
  w.rq_psn = a.rq_psn;
  w.sq_psn = a.sq_psn;
  w.dest_qp_num = a.dest_qp_num;
  w.qp_access_flags = static_cast<uint32_t>(a.qp_access_flags);
  w.pkey_index = a.pkey_index;
  w.alt_pkey_index = a.alt_pkey_index;
  w.en_sqd_async_notify = a.en_sqd_async_notify;
  w.sq_draining = a.sq_draining;
  w.max_rd_atomic = a.max_rd_atomic;
  w.max_dest_rd_atomic = a.max_dest_rd_atomic;
  w.min_rnr_timer = a.min_rnr_timer;
  w.port_num = a.port_num;
  w.timeout = a.timeout;
  w.retry_cnt = a.retry_cnt;
  w.rnr_retry = a.rnr_retry;
  w.alt_port_num = a.alt_port_num;
  w.alt_timeout = a.alt_timeout;
  w.rate_limit = a.rate_limit;
  w.ah_attr = to_wire(a.ah_attr);
  w.alt_ah_attr = to_wire(a.alt_ah_attr);
  return w;
}

void from_wire(const QpAttr& w, ibv_qp_attr* a) {
  std::memset(a, 0, sizeof(*a));
  a->qp_state = static_cast<ibv_qp_state>(w.qp_state);
  a->cur_qp_state = static_cast<ibv_qp_state>(w.cur_qp_state);
  a->path_mtu = static_cast<ibv_mtu>(w.path_mtu);
  a->path_mig_state = static_cast<ibv_mig_state>(w.path_mig_state);
  a->qkey = w.qkey;
  a->rq_psn = w.rq_psn;
  a->sq_psn = w.sq_psn;
  a->dest_qp_num = w.dest_qp_num;
  a->qp_access_flags = w.qp_access_flags;
  a->pkey_index = w.pkey_index;
  a->alt_pkey_index = w.alt_pkey_index;
  a->en_sqd_async_notify = w.en_sqd_async_notify;
  a->sq_draining = w.sq_draining;
  a->max_rd_atomic = w.max_rd_atomic;
  a->max_dest_rd_atomic = w.max_dest_rd_atomic;
  a->min_rnr_timer = w.min_rnr_timer;
  a->port_num = w.port_num;
  a->timeout = w.timeout;
  a->retry_cnt = w.retry_cnt;
  a->rnr_retry = w.rnr_retry;
  a->alt_port_num = w.alt_port_num;
  a->alt_timeout = w.alt_timeout;
  a->rate_limit = w.rate_limit;
  a->ah_attr = from_wire(w.ah_attr);
  a->alt_ah_attr = from_wire(w.alt_ah_attr);
}

}  // namespace wharf::proto
