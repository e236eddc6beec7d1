// stream_copy copies exactly what memcpy does, whatever the alignment and length.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/stream_copy.h"

namespace wharf {
namespace {

TEST(StreamCopyTest, CopiesWhatMemcpyCopiesAtEveryAlignmentAndLength) {
  std::vector<uint8_t> src(4096), dst(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t so = 0; so < 17; ++so) {
    for (size_t d_off = 0; d_off < 17; ++d_off) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{63}, size_t{64},
                       size_t{65}, size_t{200}, size_t{1000}, size_t{4000}}) {
        std::memset(dst.data(), 0xee, dst.size());
        stream_copy(dst.data() + d_off, src.data() + so, n);
        ASSERT_EQ(std::memcmp(dst.data() + d_off, src.data() + so, n), 0) << so << " " << d_off;
        for (size_t i = 0; i < d_off; ++i) ASSERT_EQ(dst[i], 0xee);               // nothing before
        for (size_t i = d_off + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);  // nor after
      }
    }
  }
}

}  // namespace
}  // namespace wharf
