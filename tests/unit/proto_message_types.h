// Every message struct of proto/messages.h and proto/cm_messages.h, with its encoded size worked
// out by hand from the field list. Shared by the codec unit test and the codec fuzz target; when a
// message is added to messages.h, add it here (both pick it up).
#pragma once

#include <cstddef>

#include "proto/cm_messages.h"
#include "proto/messages.h"

namespace wharf::proto::test_support {

template <class... T>
struct TypeList {};

// Spec<T>::kSize: bytes on the wire; Spec<T>::kName: for diagnostics.
template <class T>
struct Spec;

#define WHARF_MESSAGE_SPEC(T, size)          \
  template <>                                \
  struct Spec<T> {                           \
    static constexpr size_t kSize = size;    \
    static constexpr const char* kName = #T; \
  }

WHARF_MESSAGE_SPEC(Header, 16);                // 4 + 2 + 2 + 4 + 4
WHARF_MESSAGE_SPEC(Empty, 0);                  //
WHARF_MESSAGE_SPEC(HelloReq, 8);               // 4 + 2 + 1 + 1
WHARF_MESSAGE_SPEC(HelloRep, 64);              // 8 + 4 + 2 + 1 + 1 + 16 + 32
WHARF_MESSAGE_SPEC(Handle, 4);                 // 4
WHARF_MESSAGE_SPEC(RegMrReq, 56);              // 4 + 4 + 6 * 8
WHARF_MESSAGE_SPEC(RegMrRep, 24);              // 4 * 4 + 8
WHARF_MESSAGE_SPEC(CreateCqReq, 8);            // 2 * 4
WHARF_MESSAGE_SPEC(CreateCqRep, 8);            // 2 * 4
WHARF_MESSAGE_SPEC(ResizeCqReq, 8);            // 2 * 4
WHARF_MESSAGE_SPEC(AhAttr, 30);                // 2 + 8 * 1 + 4 + 16
WHARF_MESSAGE_SPEC(CreateAhReq, 34);           // 4 + AhAttr
WHARF_MESSAGE_SPEC(QpCaps, 20);                // 5 * 4
WHARF_MESSAGE_SPEC(CreateQpReq, 42);           // 4 * 4 + 2 * 1 + QpCaps + 4
WHARF_MESSAGE_SPEC(CreateQpRep, 56);           // 6 * 4 + QpCaps + posted_mark + 8
WHARF_MESSAGE_SPEC(RestoreNextReq, 16);        // 2 * 4 + 8
WHARF_MESSAGE_SPEC(QpAttr, 104);               // 4 * 1 + 5 * 4 + 2 * 2 + 12 * 1 + 4 + 2 * AhAttr
WHARF_MESSAGE_SPEC(ModifyQpReq, 112);          // 2 * 4 + QpAttr
WHARF_MESSAGE_SPEC(ModifyQpRateLimitReq, 16);  // 3 * 4 + 2 * 2
WHARF_MESSAGE_SPEC(ReregMrReq, 60);            // 4 + RegMrReq
WHARF_MESSAGE_SPEC(AllocMwReq, 8);             // 2 * 4
WHARF_MESSAGE_SPEC(AllocMwRep, 8);             // 2 * 4
WHARF_MESSAGE_SPEC(McastReq, 22);              // 4 + 16 + 2
WHARF_MESSAGE_SPEC(OpenXrcdReq, 4);            // 4
WHARF_MESSAGE_SPEC(OpenQpReq, 8);              // 2 * 4
WHARF_MESSAGE_SPEC(FlowMatch, 120);      // 4 * 6 + 4 * 2 + 1 + 4 * 16 + 6 * 1 + 2 * 4 + 1 + 4 * 2
WHARF_MESSAGE_SPEC(CreateFlowReq, 130);  // 2 * 4 + 2 + FlowMatch
WHARF_MESSAGE_SPEC(ModifyWqReq, 8);      // 2 * 4
WHARF_MESSAGE_SPEC(SetQpRssReq, 312);    // 2 * 4 + 64 * 4 + 8 + 40
WHARF_MESSAGE_SPEC(QueryQpRep, 125);     // QpAttr + QpCaps + 1
WHARF_MESSAGE_SPEC(ModifyCqReq, 12);     // 2 * 4 + 2 * 2
WHARF_MESSAGE_SPEC(CreateSrqReq, 36);    // 9 * 4
WHARF_MESSAGE_SPEC(SrqOp, 68);           // 8 + 4 * 4 + 3 * 8 + 4 + 8 + 2 * 4
WHARF_MESSAGE_SPEC(PostSrqOpsReq, 552);  // 2 * 4 + 8 * SrqOp
WHARF_MESSAGE_SPEC(PostSrqOpsRep, 40);   // 2 * 4 + 8 * 4
WHARF_MESSAGE_SPEC(CreateSrqRep, 24);    // 6 * 4
WHARF_MESSAGE_SPEC(ModifySrqReq, 16);    // 4 * 4
WHARF_MESSAGE_SPEC(QuerySrqRep, 12);     // 3 * 4
WHARF_MESSAGE_SPEC(RegisterContainerReq, 102);   // 32 + 4 + 32 + 32 + 2
WHARF_MESSAGE_SPEC(RegisterContainerRep, 2);     // 2
WHARF_MESSAGE_SPEC(UnregisterContainerReq, 32);  // 32
WHARF_MESSAGE_SPEC(HoldContainerReq, 326);       // 128 + 3 * 64 + 4 + 2
WHARF_MESSAGE_SPEC(SandboxRef, 128);             // 128
WHARF_MESSAGE_SPEC(HeldContainerRep, 206);       // 3 * 64 + 4 + 2 + 8
WHARF_MESSAGE_SPEC(RouterInfoRep, 41);           // 32 + 8 + 1
WHARF_MESSAGE_SPEC(DumpResourcesRep, 8);         // 8
WHARF_MESSAGE_SPEC(DirectPeerRep, 44);           // 10 * 4 + 2 + 1 + 1
WHARF_MESSAGE_SPEC(ExpressRep, 8);               // 2 * 4
WHARF_MESSAGE_SPEC(PeerMrReq, 8);                // 2 * 4
WHARF_MESSAGE_SPEC(PeerMrRep, 28);               // 3 * 8 + 4
WHARF_MESSAGE_SPEC(AsyncEventMsg, 8);            // 2 * 4 (kAsyncEventSize)
WHARF_MESSAGE_SPEC(CqEventMsg, 4);               // 4 (kCqEventSize)
WHARF_MESSAGE_SPEC(CmAddr, 20);                  // 2 + 2 + 16
WHARF_MESSAGE_SPEC(CmConnParam, 216);            // 3 * 4 + 8 * 1 + 196
WHARF_MESSAGE_SPEC(CmOpenReq, 4);                // 2 + 1 + 1
WHARF_MESSAGE_SPEC(CmOpenRep, 24);               // 4 + 2 + 1 + 1 + 16
WHARF_MESSAGE_SPEC(CmResumeRep, 4);              // 4
WHARF_MESSAGE_SPEC(CmCreateIdReq, 8);            // 4 + 2 + 1 + 1
WHARF_MESSAGE_SPEC(CmMigrateIdReq, 8);           // 2 * 4
WHARF_MESSAGE_SPEC(CmBindReq, 24);               // 4 + CmAddr
WHARF_MESSAGE_SPEC(CmAddrRep, 20);               // CmAddr
WHARF_MESSAGE_SPEC(CmResolveAddrReq, 48);        // 2 * 4 + 2 * CmAddr
WHARF_MESSAGE_SPEC(CmListenReq, 8);              // 2 * 4
WHARF_MESSAGE_SPEC(QpStep, 108);                 // 4 + QpAttr
WHARF_MESSAGE_SPEC(CmQpSteps, 332);              // 2 * 4 + 3 * QpStep
WHARF_MESSAGE_SPEC(CmConnectReq, 552);           // 4 + CmConnParam + CmQpSteps
WHARF_MESSAGE_SPEC(CmStepReq, 336);              // 4 + CmQpSteps
WHARF_MESSAGE_SPEC(CmRejectReq, 156);            // 4 + 1 + 3 + 148
WHARF_MESSAGE_SPEC(CmSetOptionReq, 12);          // 3 * 4
WHARF_MESSAGE_SPEC(CmEventMsg, 296);             // 4 * 4 + 4 + 4 + 16 + 2 * CmAddr + CmConnParam
WHARF_MESSAGE_SPEC(CmMad, 356);  // 4 + 3 * 4 + 4 + 16 + 2 * 32 + 2 * CmAddr + CmConnParam

#undef WHARF_MESSAGE_SPEC

using AllMessages =
    TypeList<Header, Empty, HelloReq, HelloRep, Handle, RegMrReq, RegMrRep, CreateCqReq,
             CreateCqRep, ResizeCqReq, ModifyCqReq, AhAttr, CreateAhReq, QpCaps, CreateQpReq,
             CreateQpRep, QpAttr, ModifyQpReq, ModifyQpRateLimitReq, ReregMrReq, AllocMwReq,
             AllocMwRep, McastReq, OpenXrcdReq, OpenQpReq, FlowMatch, CreateFlowReq, ModifyWqReq,
             SetQpRssReq, QueryQpRep, CreateSrqReq, CreateSrqRep, SrqOp, PostSrqOpsReq,
             PostSrqOpsRep, ModifySrqReq, QuerySrqRep, RegisterContainerReq, RegisterContainerRep,
             UnregisterContainerReq, HoldContainerReq, SandboxRef, HeldContainerRep, RestoreNextReq,
             RouterInfoRep, DumpResourcesRep, DirectPeerRep, ExpressRep, PeerMrReq, PeerMrRep,
             AsyncEventMsg, CqEventMsg, CmAddr, CmConnParam, CmOpenReq, CmOpenRep, CmResumeRep,
             CmCreateIdReq, CmMigrateIdReq, CmBindReq, CmAddrRep, CmResolveAddrReq, CmListenReq,
             QpStep, CmQpSteps, CmConnectReq, CmStepReq, CmRejectReq, CmSetOptionReq, CmEventMsg,
             CmMad>;

// Calls f.template operator()<T>() for every T in the list, in order.
template <class F, class... T>
void for_each_type(TypeList<T...>, F&& f) {
  (f.template operator()<T>(), ...);
}

}  // namespace wharf::proto::test_support
