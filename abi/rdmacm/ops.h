// Internal operations shared by the files of librdmacm (each defined in the file named).
// All follow rdma-core's convention: 0, or -1 with errno set (pointer returns: nullptr + errno).
#pragma once

#include <rdma/rdma_cma.h>

#include "abi/rdmacm/id.h"
#include "proto/cm_messages.h"
#include "proto/router_client.h"

namespace wharf::rdmacm {

// channel.cc: a channel's socket pair and its router registration.
Channel* channel_create();
void channel_destroy(Channel* ch);
// False once the application destroyed the channel: a thread still blocked in its
// rdma_get_cm_event then sees the router close its end, which is not the router going away.
bool channel_live(const Channel* ch);
// Gives every live channel, under its handle, to a new router process (CmRestoreChannel).
// 0 or the first errno.
int restore_channels(proto::RouterClient* fresh);
// Closes every live channel's router end: no router came back, and a thread blocked in
// rdma_get_cm_event then sees the end of its channel (ENODEV), as before routers restarted.
void release_channels();

// id.cc: rdma_create_id with an explicit QP type (rdma-core's rdma_create_id2).
int id_create(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps,
              ibv_qp_type qp_type);
// A library id for router id `handle` (registered), reporting to `channel`; `sync` when
// the channel is the id's own. id_free releases what the library holds for it (not the router's
// id), including an own channel.
Id* id_alloc(rdma_event_channel* channel, bool sync, void* context, rdma_port_space ps,
             ibv_qp_type qp_type, uint32_t handle);
void id_free(Id* id);
// The id's private channel (a synchronous id) or `channel` becomes its channel; waits for the
// events handed out for it to be acked, as rdma-core's rdma_migrate_id.
int id_migrate(Id* id, rdma_event_channel* channel);

// events.cc: on a synchronous id, acks the previous event and waits for the next; its status
// becomes the result (rdma-core's ucma_complete). Asynchronous ids: 0.
int complete(Id* id);

// multicast.cc: a MULTICAST_JOIN for one of id's groups: records the group's MGID and MLID,
// gives the context the application joined with, and attaches the id's QP (unless it joined
// send-only). 0 or the attach's errno.
int on_multicast_join(Id* id, const proto::CmEventMsg& m, void** context);

// qp.cc: QP transitions driven by the connection (rdma-core's ucma_modify_qp_*). They travel
// with the connection step's request (proto::CmQpSteps): the add_* append the id's QP's
// transitions to `steps` (nothing without a QP; RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH keep
// rdma_init_qp_attr's values), qp_steps_done brings the library's view of the QP up to date
// once the request came back (`ok`: all applied; else the QP's state is read back, errno
// kept). modify_qp_err moves the QP to ERR at once.
int add_rtr_steps(Id* id, uint8_t responder_resources, proto::CmQpSteps* steps);
int add_rts_step(Id* id, uint8_t initiator_depth, proto::CmQpSteps* steps);
void add_err_step(Id* id, proto::CmQpSteps* steps);
void qp_steps_done(Id* id, const proto::CmQpSteps& steps, bool ok);
int modify_qp_err(Id* id);
// rdma-core's ucma_create_cqs / ucma_destroy_cqs: CQs (each with its completion channel) the
// id owns, for the sizes that are nonzero.
int create_cqs(Id* id, uint32_t send_size, uint32_t recv_size);
void destroy_cqs(Id* id);

// connect.cc: the active side after CONNECT_RESPONSE: QP to RTS, then the RTU (kCmEstablish).
int process_conn_resp(Id* id);

// Random 24-bit starting PSN.
uint32_t random_psn();

}  // namespace wharf::rdmacm
