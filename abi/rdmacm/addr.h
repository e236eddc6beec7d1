// Addresses and routes of an id: sockaddr <-> proto::CmAddr, the id's rdma_addr and path record,
// and the address handle attributes built from them.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include "abi/rdmacm/id.h"
#include "proto/cm_messages.h"

namespace wharf::rdmacm {

// AF_INET / AF_INET6 only: 0, EAFNOSUPPORT (AF_IB and others) or EINVAL (NULL).
int to_cm_addr(const sockaddr* sa, proto::CmAddr* out);
// Writes a sockaddr_in or sockaddr_in6 (or AF_UNSPEC for kCmAfNone) into *ss.
void to_sockaddr(const proto::CmAddr& a, sockaddr_storage* ss);

// route.addr.src_addr and the source GID / pkey of route.addr.addr.ibaddr.
void set_src(Id* id, const proto::CmAddr& a);
// route.addr.dst_addr and the destination GID.
void set_dst(Id* id, const proto::CmAddr& a, const proto::Gid& remote_gid);

// Gives the id the process's device: id->verbs, port 1, and the per-device PD when the id has
// none. Returns 0 or -1 with errno.
int attach_device(Id* id);

// One path record (route.path_rec, num_paths 1) between the container's port and the peer's.
// Returns 0 or -1 with errno.
int set_path(Id* id);
// route.path_rec from RDMA_OPTION_IB_PATH records. Returns 0 or -1 with errno.
int set_path_from_records(Id* id, const ibv_path_data* paths, size_t count);

// Address handle attributes for the path of `id` (RTR of connected QPs).
void path_ah_attr(const ibv_sa_path_rec& path, ibv_ah_attr* ah);
// Address handle attributes of a UD peer (param.ud.ah_attr), from the event's LID and GID.
void ud_ah_attr(uint16_t remote_lid, const proto::Gid& remote_gid, ibv_ah_attr* ah);
// Address handle attributes of a multicast group (MULTICAST_JOIN's param.ud.ah_attr): always
// with a GRH naming the MGID, and on InfiniBand the group's MLID.
void mcast_ah_attr(uint16_t mlid, const proto::Gid& mgid, ibv_ah_attr* ah);

}  // namespace wharf::rdmacm
