#include "objectstore/internal/stream_copy.h"

#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace airt::objectstore::internal {

void StreamCopy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__x86_64__)
  if (n >= kStreamCopyThreshold) {
    // Bring the destination to 16-byte alignment, stream 64 bytes at a time, copy the tail.
    size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    auto* d = reinterpret_cast<__m128i*>(dst);
    auto* s = reinterpret_cast<const __m128i*>(src);
    size_t blocks = n / 64;
    for (size_t i = 0; i < blocks; ++i, d += 4, s += 4) {
      __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
      __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    _mm_sfence();  // the streamed bytes are visible before the Seal that follows
    std::memcpy(dst + blocks * 64, src + blocks * 64, n - blocks * 64);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace airt::objectstore::internal
