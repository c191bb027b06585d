// Deterministic object contents shared by the e2e tests and airt_store_client_tool, so that one
// process can write an object and another can check it byte for byte without a copy of it.
//
// The bytes of (size, seed) are the little-endian 64-bit words Word(seed, 0), Word(seed, 1), ...
// cut to `size`. The checksum folds the same words, so a reader can report it and the test can
// compute it without touching the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "common/ids.h"

namespace airt::e2e {

inline uint64_t PatternWord(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Writes the pattern of (out.size(), seed) into `out`.
inline void FillPattern(std::span<uint8_t> out, uint64_t seed) {
  const size_t words = out.size() / 8;
  uint8_t* p = out.data();
  for (size_t k = 0; k < words; ++k) {
    uint64_t w = PatternWord(seed, k);
    std::memcpy(p + 8 * k, &w, 8);  // little-endian hosts only (x86-64, aarch64)
  }
  if (size_t tail = out.size() % 8; tail != 0) {
    uint64_t w = PatternWord(seed, words);
    std::memcpy(p + 8 * words, &w, tail);
  }
}

// The offset of the first byte of `data` that differs from the pattern, or nullopt when all match.
inline std::optional<size_t> FirstMismatch(std::span<const uint8_t> data, uint64_t seed) {
  const size_t words = data.size() / 8;
  const uint8_t* p = data.data();
  for (size_t k = 0; k < words; ++k) {
    uint64_t w = PatternWord(seed, k), got;
    std::memcpy(&got, p + 8 * k, 8);
    if (got != w) {
      for (size_t b = 0; b < 8; ++b) {
        if (((got ^ w) >> (8 * b)) & 0xff) return 8 * k + b;
      }
    }
  }
  if (size_t tail = data.size() % 8; tail != 0) {
    uint64_t w = PatternWord(seed, words);
    uint8_t expect[8];
    std::memcpy(expect, &w, 8);
    for (size_t b = 0; b < tail; ++b) {
      if (p[8 * words + b] != expect[b]) return 8 * words + b;
    }
  }
  return std::nullopt;
}

// One word per 4 KiB page checked: cheap, catches a wrong or unwritten page.
inline std::optional<size_t> FirstMismatchSampled(std::span<const uint8_t> data, uint64_t seed) {
  constexpr size_t kStride = 4096 / 8;
  const size_t words = data.size() / 8;
  for (size_t k = 0; k < words; k += kStride) {
    uint64_t w = PatternWord(seed, k), got;
    std::memcpy(&got, data.data() + 8 * k, 8);
    if (got != w) return 8 * k;
  }
  return std::nullopt;
}

// A checksum of any bytes (FNV-1a over 64-bit words, then the tail bytes).
inline uint64_t Checksum(std::span<const uint8_t> data) {
  uint64_t h = 1469598103934665603ull;
  const size_t words = data.size() / 8;
  for (size_t k = 0; k < words; ++k) {
    uint64_t w;
    std::memcpy(&w, data.data() + 8 * k, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (size_t b = 8 * words; b < data.size(); ++b) h = (h ^ data[b]) * 1099511628211ull;
  return h;
}

// Checksum() of the pattern of (size, seed), computed without materialising it.
inline uint64_t PatternChecksum(uint64_t size, uint64_t seed) {
  uint64_t h = 1469598103934665603ull;
  const uint64_t words = size / 8;
  for (uint64_t k = 0; k < words; ++k) h = (h ^ PatternWord(seed, k)) * 1099511628211ull;
  if (uint64_t tail = size % 8; tail != 0) {
    uint64_t w = PatternWord(seed, words);
    for (uint64_t b = 0; b < tail; ++b) h = (h ^ ((w >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

// The i-th object of a batch named by `base` (put-many / verify-many): its id, size and seed.
inline ObjectId BatchId(const ObjectId& base, uint32_t i) {
  return ObjectId::ForPut(base.Task(), i + 1);
}
// With `vary`, sizes differ from object to object (and are not multiples of 8 or 64).
inline uint64_t BatchSize(uint64_t size, uint32_t i, bool vary) {
  return vary ? size / 2 + (uint64_t{i} * 7919) % (size + 1) : size;
}
inline uint64_t BatchSeed(uint64_t seed, uint32_t i) { return seed * 1000003 + i; }

}  // namespace airt::e2e
