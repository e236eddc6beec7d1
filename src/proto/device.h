// The capabilities of the emulated device `wharf0`, shared by the verbs library (which
// answers ibv_query_device/port) and the router (which enforces them).
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace wharf::device {

constexpr const char* kName = "wharf0";
constexpr uint32_t kVendorId = 0x1d75;  // not a PCI vendor of an RNIC: identifies software
constexpr uint32_t kVendorPartId = 0x0001;
constexpr uint32_t kHwVer = 1;
constexpr uint64_t kMaxMrSize = 1ull << 40;
constexpr uint32_t kMaxMsgSize = 1u << 30;  // 1 GiB, ibv_port_attr.max_msg_sz
constexpr uint32_t kMaxQp = 1u << 16;
static_assert(kMaxQp <= shm::kPostedMarks, "every QP of a session has a posted mark");
constexpr uint32_t kMaxQpWr = shm::kMaxQueueDepth;
constexpr uint32_t kMaxSge = shm::kMaxSendSge;
constexpr uint32_t kMaxCq = 1u << 16;
constexpr uint32_t kMaxCqe = shm::kMaxCqDepth;
constexpr uint32_t kMaxMr = 1u << 20;
constexpr uint32_t kMaxPd = 1u << 16;
constexpr uint32_t kMaxMw = 1u << 16;  // memory windows per context
constexpr uint32_t kMaxAh = 1u << 16;
constexpr uint32_t kMaxSrq = 1u << 16;
constexpr uint32_t kMaxXrcd = 1u << 8;  // XRC domain handles per context
constexpr uint32_t kMaxSrqWr = shm::kMaxQueueDepth;
constexpr uint32_t kMaxSrqSge = shm::kMaxRecvSge;
constexpr uint32_t kMaxQpRdAtom = 16;
// Tag matching (ibv_tm_caps): tagged buffers per TM-SRQ, operations per ibv_post_srq_ops
// batch, scatter entries per tagged buffer, and the largest rendezvous request.
constexpr uint32_t kTmMaxNumTags = 1024;
constexpr uint32_t kTmMaxOps = 1024;
constexpr uint32_t kTmMaxSge = 1;
constexpr uint32_t kTmMaxRndvHdrSize = 64;
// CQ event moderation (ibv_device_attr_ex.cq_mod_caps), the limits ConnectX reports.
constexpr uint16_t kMaxCqModerationCount = 0xffff;
constexpr uint16_t kMaxCqModerationPeriodUs = 0xfff;
constexpr uint64_t kMaxDmSize = 256 * 1024;  // device memory (ibv_alloc_dm): memfds of the host
constexpr uint32_t kMaxInline = shm::kMaxInline;
constexpr uint32_t kUdMaxPayload = 4096;  // UD message limit = path MTU
// A RAW_PACKET QP's send is one Ethernet frame: its header, at most a 9000-byte jumbo payload
// and one VLAN tag.
constexpr uint32_t kMinRawFrame = 14;
constexpr uint32_t kMaxRawFrame = 9000 + 14 + 4;
// The port's GID table has kGidTableLen entries, of which the first kGidsInUse hold the
// container's GID and the rest are empty, as on an RNIC (an empty entry reads as the zero GID
// in sysfs and ibv_query_gid, ENODATA in ibv_query_gid_ex, and no address vector may name it).
constexpr uint32_t kGidTableLen = 16;
constexpr uint32_t kGidsInUse = 1;
constexpr uint32_t kPkeyTableLen = 1;
constexpr uint16_t kDefaultPkey = 0xffff;
// Port 1 as ibv_query_port and the container's /sys/class/infiniband tree show it.
constexpr uint8_t kActiveWidth = 2;   // 4x
constexpr uint8_t kActiveSpeed = 32;  // EDR: nominal, a software link has no fixed speed
constexpr uint8_t kPhysStateLinkUp = 5;
constexpr uint32_t kPortCapFlags = 1u << 16;  // IBV_PORT_CM_SUP
constexpr uint8_t kSubnetTimeout = 18;
constexpr const char* kFwVer = "wharf-0.1";
constexpr uint32_t kQkeyViolation = 0x80000000;  // WR qkey with this bit set: use the QP's qkey

}  // namespace wharf::device
