// rc::Responder: where each request packet stands (next, duplicate, gap, ignored) for RC and
// UC, the message sequence rules, RNR restarts, the atomic result cache, and plain ACKs held
// back and coalesced while answers stay in PSN order.
#include <gtest/gtest.h>

#include <vector>

#include "rc/responder.h"

namespace wharf::rc {
namespace {

namespace host = proto::host;
using Arrival = Responder::Arrival;

TEST(ResponderTest, DuplicatesAndGapsAcrossTheWrap) {
  Responder r(0xfffffe);
  EXPECT_EQ(r.arrive(0xfffffe, host::kSendOnly, true), Arrival::kNext);
  r.begin_message(host::kSendOnly, 0xfffffe);
  r.end_message();
  r.accept(0xfffffe);
  EXPECT_EQ(r.epsn(), 0xffffffu);
  EXPECT_EQ(r.last_psn(), 0xfffffeu);
  EXPECT_EQ(r.arrive(0xfffffe, host::kSendOnly, true), Arrival::kDuplicate);
  EXPECT_EQ(r.arrive(0xff0000, host::kSendOnly, true), Arrival::kDuplicate);
  EXPECT_EQ(r.arrive(1, host::kSendOnly, true), Arrival::kGap);  // NAKed once
  EXPECT_EQ(r.arrive(2, host::kSendOnly, true), Arrival::kIgnore);
  EXPECT_EQ(r.arrive(0xffffff, host::kSendOnly, true), Arrival::kNext);
  r.accept(0xffffff);
  EXPECT_EQ(r.epsn(), 0u);
  EXPECT_EQ(r.arrive(2, host::kSendOnly, true), Arrival::kGap);  // a new gap is NAKed again
  EXPECT_EQ(r.msn(), 1u);
}

TEST(ResponderTest, UcTakesTheNextMessageStartAfterAGapAndDropsTheRestOfABrokenOne) {
  Responder r(10);
  EXPECT_EQ(r.arrive(10, host::kSendFirst, false), Arrival::kNext);
  r.begin_message(host::kSendFirst, 10);
  r.accept(10);
  // Packet 11 is lost: 12, the last of that message, is dropped...
  EXPECT_EQ(r.arrive(12, host::kSendLast, false), Arrival::kIgnore);
  EXPECT_FALSE(r.in_send());
  EXPECT_EQ(r.arrive(13, host::kSendMiddle, false), Arrival::kIgnore);
  // ...and the next message start is taken.
  EXPECT_EQ(r.arrive(20, host::kSendOnly, false), Arrival::kNext);
  // A message dropped by the responder (no receive) loses its remaining packets.
  r.drop_message(20);
  EXPECT_EQ(r.arrive(21, host::kWriteMiddle, false), Arrival::kIgnore);
  EXPECT_EQ(r.arrive(22, host::kWriteOnly, false), Arrival::kNext);
}

TEST(ResponderTest, SequenceRulesOfIbta9_8_3) {
  Responder r(0);
  EXPECT_TRUE(r.fits_sequence(host::kSendFirst));
  EXPECT_TRUE(r.fits_sequence(host::kReadRequest));
  EXPECT_FALSE(r.fits_sequence(host::kSendMiddle));
  EXPECT_FALSE(r.fits_sequence(host::kWriteLast));
  EXPECT_FALSE(r.fits_sequence(host::kAcknowledge));
  r.begin_message(host::kSendFirst, 0);
  EXPECT_TRUE(r.fits_sequence(host::kSendMiddle));
  EXPECT_TRUE(r.fits_sequence(host::kSendLastInvalidate));
  EXPECT_FALSE(r.fits_sequence(host::kWriteMiddle));
  EXPECT_FALSE(r.fits_sequence(host::kSendFirst));
  EXPECT_FALSE(r.fits_sequence(host::kFetchAdd));
  EXPECT_FALSE(r.fits_sequence(host::kAtomicWrite));
  r.abort_message();
  r.begin_message(host::kWriteFirst, 1);
  EXPECT_TRUE(r.in_write());
  EXPECT_TRUE(r.fits_sequence(host::kWriteLastImm));
  EXPECT_FALSE(r.fits_sequence(host::kSendLast));
}

TEST(ResponderTest, RefusingRestartsAtTheMessageStartAndIgnoresWhatFollows) {
  Responder r(5);
  ASSERT_EQ(r.arrive(5, host::kWriteFirst, true), Arrival::kNext);
  r.begin_message(host::kWriteFirst, 5);
  r.accept(5);
  ASSERT_EQ(r.arrive(6, host::kWriteLastImm, true), Arrival::kNext);
  r.refuse(r.message_psn());  // RNR at the end of a WRITE with immediate
  EXPECT_FALSE(r.in_message());
  EXPECT_EQ(r.epsn(), 5u);
  EXPECT_EQ(r.arrive(7, host::kSendOnly, true), Arrival::kIgnore);  // already NAKed
  EXPECT_EQ(r.arrive(5, host::kWriteFirst, true), Arrival::kNext);  // the retry
}

TEST(ResponderTest, TheAtomicCacheKeepsTheLastSixteenResults) {
  Responder r(0);
  for (uint32_t psn = 0; psn < 20; ++psn) r.remember_atomic(psn, 100 + psn);
  uint64_t orig = 0;
  EXPECT_FALSE(r.recall_atomic(3, &orig));
  ASSERT_TRUE(r.recall_atomic(4, &orig));
  EXPECT_EQ(orig, 104u);
  ASSERT_TRUE(r.recall_atomic(19, &orig));
  EXPECT_EQ(orig, 119u);
  EXPECT_FALSE(r.recall_atomic(20, &orig));
}

Response answer(Response::Kind kind, uint32_t psn, uint8_t syndrome) {
  Response r;
  r.kind = kind;
  r.psn = psn;
  r.syndrome = syndrome;
  return r;
}

TEST(ResponderTest, PlainAcksAreHeldAndCoalescedAndNeverOvertaken) {
  Responder r(0);
  EXPECT_FALSE(r.owe(answer(Response::kAck, 1, host::aeth_ack())));
  EXPECT_FALSE(r.owe(answer(Response::kAck, 2, host::aeth_ack())));
  EXPECT_TRUE(r.holding_ack());
  EXPECT_TRUE(r.owed.empty());
  ASSERT_TRUE(r.release_ack());  // one ACK for both: the later one
  ASSERT_EQ(r.owed.size(), 1u);
  EXPECT_EQ(r.owed.front().psn, 2u);
  EXPECT_FALSE(r.release_ack());
  r.owed.clear();

  // Anything else goes out behind the held ACK: an atomic ACK, a NAK, an RNR NAK.
  r.owe(answer(Response::kAck, 3, host::aeth_ack()));
  EXPECT_TRUE(r.owe(answer(Response::kAtomicAck, 4, host::aeth_ack())));
  r.owe(answer(Response::kAck, 5, host::aeth_ack()));
  EXPECT_TRUE(r.owe(answer(Response::kAck, 6, host::aeth_nak(host::kNakPsnSequence))));
  EXPECT_TRUE(r.owe(answer(Response::kAck, 6, host::aeth_rnr(3))));
  EXPECT_FALSE(r.holding_ack());
  std::vector<uint32_t> psns;
  for (const Response& a : r.owed) psns.push_back(a.psn);
  EXPECT_EQ(psns, (std::vector<uint32_t>{3, 4, 5, 6, 6}));
}

// ACKs are cumulative: a held ACK released while a plain ACK still waits for the link takes
// its place, so a link that stays full does not grow the queue by an ACK per pass.
TEST(ResponderTest, AReleasedAckReplacesAPlainAckStillWaitingAtTheEnd) {
  Responder r(0);
  for (uint32_t psn = 0; psn < 10; ++psn) {
    r.owe(Response{Response::kAck, psn, host::aeth_ack(), psn});
    ASSERT_TRUE(r.release_ack());
  }
  ASSERT_EQ(r.owed.size(), 1u);
  EXPECT_EQ(r.owed.front().psn, 9u);
  EXPECT_EQ(r.owed.front().msn, 9u);
  // A NAK is no ACK: it stays, and the next ACK goes after it.
  r.owe(Response{Response::kAck, 10, host::aeth_nak(host::kNakPsnSequence), 10});
  r.owe(Response{Response::kAck, 11, host::aeth_ack(), 11});
  r.release_ack();
  std::vector<uint32_t> psns;
  for (const Response& a : r.owed) psns.push_back(a.psn);
  EXPECT_EQ(psns, (std::vector<uint32_t>{9, 10, 11}));
}

// The answers owed are bounded: with two slots left a request may still be taken (its held
// ACK and its own answer fit), with fewer it may not.
TEST(ResponderTest, HasRoomOnlyWhileARequestsAnswersFit) {
  Responder r(0);
  for (uint32_t i = 0; i + 2 < Responder::kOwed; ++i) {
    ASSERT_TRUE(r.has_room());
    r.owe(Response{Response::kRead, i, host::aeth_ack(), i});
  }
  ASSERT_TRUE(r.has_room());
  r.owe(Response{Response::kAck, 100, host::aeth_ack(), 100});  // held
  EXPECT_TRUE(r.owe(Response{Response::kAtomicAck, 101, host::aeth_ack(), 101}));
  EXPECT_EQ(r.owed.size(), Responder::kOwed);
  EXPECT_FALSE(r.has_room());
  r.owed.pop_front();
  r.owed.pop_front();
  EXPECT_TRUE(r.has_room());
}

// Quiescent (between messages, nothing owed, held, NAKed or cached) is when an owner may keep
// epsn() and msn() alone: a responder made from them answers the same.
TEST(ResponderTest, OnlyAQuiescentResponderIsContinuedFromItsPsnAndMsn) {
  Responder r(5);
  EXPECT_TRUE(r.quiescent());
  r.begin_message(host::kSendFirst, 5);
  r.accept(5);
  EXPECT_FALSE(r.quiescent());  // inside a message
  r.end_message();
  r.accept(6);
  EXPECT_TRUE(r.quiescent());
  r.owe(Response{Response::kAck, 6, host::aeth_ack(), r.msn()});
  ASSERT_TRUE(r.holding_ack());
  EXPECT_FALSE(r.quiescent());  // an ACK held back
  r.release_ack();
  EXPECT_FALSE(r.quiescent());  // owed
  r.owed.pop_front();
  EXPECT_TRUE(r.quiescent());
  Responder continued(r.epsn(), r.msn());
  EXPECT_EQ(continued.msn(), 1u);
  EXPECT_EQ(continued.arrive(6, host::kSendOnly, true), Arrival::kDuplicate);
  EXPECT_EQ(continued.arrive(7, host::kSendOnly, true), Arrival::kNext);
  EXPECT_EQ(continued.arrive(9, host::kSendOnly, true), Arrival::kGap);
  EXPECT_FALSE(continued.quiescent());  // a NAK outstanding
  Responder atomics(0);
  atomics.remember_atomic(0, 1);
  EXPECT_FALSE(atomics.quiescent());  // its results must answer duplicates
}

}  // namespace
}  // namespace wharf::rc
