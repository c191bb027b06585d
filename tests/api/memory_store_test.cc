#include "api/core_worker/memory_store.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace airt::core_worker {
namespace {

ObjectId Id(uint32_t n) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), n); }

ObjectEntry Inline(std::string bytes) {
  return ObjectEntry{std::make_shared<const std::string>(std::move(bytes)), std::nullopt,
                     std::nullopt};
}

ObjectEntry Stored(const ObjectId& id, std::string transfer_address) {
  return ObjectEntry{nullptr, ObjectLocation{id, std::move(transfer_address), 10, "node:1"},
                     std::nullopt};
}

TEST(MemoryStore, TryGetReturnsEveryEntryWhenAllAreHere) {
  MemoryStore memory;
  ObjectId a = Id(1), b = Id(2);
  memory.PutNew(a, Inline("a"));
  memory.PutNew(b, Stored(b, "host:2"));
  std::vector<ObjectId> ids = {b, a};
  std::optional<std::vector<ObjectEntry>> got = memory.TryGet(ids);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 2u);
  ASSERT_TRUE((*got)[0].location.has_value());
  EXPECT_EQ((*got)[0].location->transfer_address, "host:2");
  ASSERT_NE((*got)[1].value, nullptr);
  EXPECT_EQ(*(*got)[1].value, "a");
}

TEST(MemoryStore, LocatedAtListsTheEntriesOnANodeAndPeekReadsOne) {
  MemoryStore memory;
  ObjectId a = Id(1), b = Id(2), c = Id(3);
  memory.PutNew(a, Stored(a, "host:2"));  // on node:1
  memory.PutNew(b, Inline("b"));
  ObjectEntry elsewhere = Stored(c, "host:3");
  elsewhere.location->node_address = "node:2";
  memory.PutNew(c, elsewhere);
  EXPECT_EQ(memory.LocatedAt("node:1"), std::vector<ObjectId>{a});
  EXPECT_EQ(memory.LocatedAt("node:2"), std::vector<ObjectId>{c});
  EXPECT_TRUE(memory.LocatedAt("node:9").empty());
  ASSERT_TRUE(memory.Peek(b).has_value());
  EXPECT_EQ(*memory.Peek(b)->value, "b");
  memory.Erase(b);
  EXPECT_FALSE(memory.Peek(b).has_value());
}

TEST(MemoryStore, RelocateMovesAnEntryOffTheNodeItNamesOnly) {
  MemoryStore memory;
  ObjectId a = Id(1), b = Id(2), missing = Id(3);
  memory.PutNew(a, Stored(a, "host:2"));  // on node:1
  memory.PutNew(b, Inline("b"));
  ObjectLocation to{a, "host:7", 10, "node:7"};
  EXPECT_FALSE(memory.Relocate(a, "node:5", to));  // not there: unchanged
  EXPECT_EQ(memory.Peek(a)->location->node_address, "node:1");
  EXPECT_TRUE(memory.Relocate(a, "node:1", to));
  EXPECT_EQ(memory.Peek(a)->location->node_address, "node:7");
  EXPECT_EQ(memory.Peek(a)->location->transfer_address, "host:7");
  EXPECT_EQ(memory.LocatedAt("node:7"), std::vector<ObjectId>{a});
  EXPECT_TRUE(memory.LocatedAt("node:1").empty());
  EXPECT_FALSE(memory.Relocate(b, "node:1", to));        // inline: no location to move
  EXPECT_FALSE(memory.Relocate(missing, "node:1", to));  // unknown
  EXPECT_FALSE(memory.Peek(missing).has_value());
}

TEST(MemoryStore, TryGetReturnsNoneWhenAnyIsMissing) {
  MemoryStore memory;
  ObjectId a = Id(1), missing = Id(2);
  memory.PutNew(a, Inline("a"));
  std::vector<ObjectId> ids = {a, missing};
  EXPECT_FALSE(memory.TryGet(ids).has_value());
}

TEST(MemoryStore, ReadyListsTheStoredLocationsOfReadyObjectsOnly) {
  MemoryStore memory;
  ObjectId inline_id = Id(1), stored = Id(2), here = Id(3), missing = Id(4);
  memory.PutNew(inline_id, Inline("x"));
  memory.PutNew(stored, Stored(stored, "host:2"));
  memory.PutNew(here, Stored(here, ""));  // no transfer address: nothing to pull it from
  std::vector<ObjectId> ids = {inline_id, missing, stored, here};
  std::vector<ObjectLocation> locations;
  std::vector<bool> ready = memory.Ready(ids, &locations);
  EXPECT_EQ(ready, (std::vector<bool>{true, false, true, true}));
  ASSERT_EQ(locations.size(), 1u);
  EXPECT_EQ(locations[0].id, stored);
  EXPECT_EQ(memory.Ready(ids), ready) << "the same answer without locations";
}

}  // namespace
}  // namespace airt::core_worker
