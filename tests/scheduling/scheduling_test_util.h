// Small builders for the scheduling tests: shapes and sets from their printed form, node ids
// from one byte, nodes of a cluster view.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling::testing {

// Fails the test (and returns an empty set) when `text` does not parse.
inline ResourceSet Set(std::string_view text) {
  Result<ResourceSet> set = ResourceSet::Parse(text);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ResourceSet();
}

inline ResourceShape Shape(std::string_view text) {
  Result<ResourceShape> shape = ResourceShape::Parse(text);
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  return shape.ok() ? *shape : ResourceShape();
}

// Every byte `b`: ids order as their bytes, and print as "bbbbbbbb" (b = 0x1a: "1a1a1a1a").
inline NodeId IdOf(uint8_t b) {
  std::array<uint8_t, NodeId::kSize> bytes;
  bytes.fill(b);
  return NodeId::FromRaw(bytes.data());
}

inline NodeResources Node(std::string_view totals, Labels labels = {}) {
  Result<NodeResources> node = NodeResources::Create(Set(totals), {}, std::move(labels));
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  return std::move(node).value();
}

inline NodeView View(uint8_t id, std::string_view total, std::string_view available,
                     Labels labels = {}, bool alive = true) {
  return NodeView{IdOf(id), alive, Set(total), Set(available), std::move(labels)};
}

inline TimePoint At(int seconds) { return TimePoint() + std::chrono::seconds(seconds); }

}  // namespace airt::worker::scheduling::testing
