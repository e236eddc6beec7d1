// XRC domains: found again by file within one container only, kept while handles or objects
// hold them (router/xrc_domain.h).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include "router/xrc_domain.h"

namespace wharf::router {
namespace {

TEST(XrcDomainsTest, AFileNamesOneDomainPerContainer) {
  XrcDomains d;
  Container c1, c2;
  int err = 0;
  XrcDomain* a = d.open(&c1, true, 5, 77, O_CREAT, &err);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(d.open(&c1, true, 5, 77, 0, &err), a);  // opened again: the same domain
  EXPECT_EQ(a->opens, 2);
  XrcDomain* other = d.open(&c2, true, 5, 77, O_CREAT, &err);  // another container's own
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, a);
  EXPECT_EQ(d.open(&c1, true, 5, 77, O_CREAT | O_EXCL, &err), nullptr);
  EXPECT_EQ(err, EEXIST);
  EXPECT_EQ(d.open(&c1, true, 5, 78, 0, &err), nullptr);
  EXPECT_EQ(err, ENOENT);
  // Without a file every open is a new domain.
  XrcDomain* p1 = d.open(&c1, false, 0, 0, O_CREAT, &err);
  XrcDomain* p2 = d.open(&c1, false, 0, 0, O_CREAT, &err);
  EXPECT_NE(p1, p2);
  EXPECT_EQ(d.size(), 4u);
}

TEST(XrcDomainsTest, ADomainLastsWhileHandlesOrObjectsHoldIt) {
  XrcDomains d;
  Container c;
  int err = 0;
  XrcDomain* a = d.open(&c, true, 1, 2, O_CREAT, &err);
  ASSERT_NE(a, nullptr);
  a->users++;                    // a target QP
  EXPECT_EQ(d.close(a), EBUSY);  // its last handle while the QP lives
  EXPECT_EQ(d.size(), 1u);
  d.drop_open(a);  // its session ended (after its objects, but this QP is another's)
  EXPECT_EQ(d.size(), 1u);
  d.release(a);  // the QP goes: so does the domain
  EXPECT_EQ(d.size(), 0u);
  // Found by file again only while it exists.
  EXPECT_EQ(d.open(&c, true, 1, 2, 0, &err), nullptr);
  EXPECT_EQ(err, ENOENT);
}

}  // namespace
}  // namespace wharf::router
