// examples/multinode: what the driver and the workers both see.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "airt/api.h"

// Where a task ran: the machine, and the airt-node that started its worker (its pid, the parent
// of the worker process). Two nodes on one machine differ by pid.
struct Place {
  std::string host;
  int node_pid = 0;
  MSGPACK_DEFINE(host, node_pid);

  std::string Describe() const { return host + ", node pid " + std::to_string(node_pid); }
  bool operator==(const Place& other) const {
    return host == other.host && node_pid == other.node_pid;
  }
};

// What CheckBlock found, and where it ran.
struct BlockCheck {
  Place place;
  int64_t first_bad_byte = -1;  // -1: every byte as made
  MSGPACK_DEFINE(place, first_bad_byte);
};

// Byte `i` of the block of `seed`: it depends on its position, so a lost, repeated or misplaced
// chunk shows.
inline uint8_t BlockByte(uint64_t i, uint64_t seed) {
  uint64_t x = i * 0x9e3779b97f4a7c15ull + seed;
  return static_cast<uint8_t>((x ^ (x >> 31)) >> 24);
}

inline std::vector<uint8_t> BlockBytes(int64_t size, int64_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(size));
  for (size_t i = 0; i < out.size(); ++i) out[i] = BlockByte(i, static_cast<uint64_t>(seed));
  return out;
}

// The offset of the first byte of `block` that differs from BlockBytes(size, seed), or -1.
inline int64_t FirstBadByte(const std::vector<uint8_t>& block, int64_t size, int64_t seed) {
  for (size_t i = 0; i < block.size() && i < static_cast<size_t>(size); ++i) {
    if (block[i] != BlockByte(i, static_cast<uint64_t>(seed))) return static_cast<int64_t>(i);
  }
  if (block.size() != static_cast<size_t>(size)) {
    return static_cast<int64_t>(std::min(block.size(), static_cast<size_t>(size)));
  }
  return -1;
}

// The remote functions (examples/multinode_functions.cc).
Place WhereAmI();
std::vector<uint8_t> MakeBlock(int64_t size, int64_t seed);
BlockCheck CheckBlock(std::vector<uint8_t> block, int64_t size, int64_t seed);
