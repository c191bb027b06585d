#include "objectstore/internal/stream_copy.h"

#include <vector>

#include <gtest/gtest.h>

namespace airt::objectstore::internal {
namespace {

TEST(StreamCopy, CopiesEveryByteForAnySizeAndAlignment) {
  std::vector<uint8_t> src(kStreamCopyThreshold * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t size : {size_t{0}, size_t{1}, size_t{63}, kStreamCopyThreshold - 1,
                      kStreamCopyThreshold, kStreamCopyThreshold + 77, 2 * kStreamCopyThreshold}) {
    for (size_t dst_offset : {0, 1, 8, 15}) {
      for (size_t src_offset : {0, 3}) {
        std::vector<uint8_t> dst(size + 64, 0xee);
        StreamCopy(dst.data() + dst_offset, src.data() + src_offset, size);
        for (size_t i = 0; i < size; ++i) {
          ASSERT_EQ(dst[dst_offset + i], src[src_offset + i])
              << "size " << size << " dst+" << dst_offset << " src+" << src_offset << " at " << i;
        }
        for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(dst[i], 0xee);
        for (size_t i = dst_offset + size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee);
      }
    }
  }
}

}  // namespace
}  // namespace airt::objectstore::internal
