#include "head/metadata_store.h"

#include <gtest/gtest.h>

#include "tests/head/head_doubles.h"

namespace airt::head {
namespace {

using Keys = std::vector<std::string>;

TEST(InMemoryMetadataStore, GetReturnsNothingWhenKeyMissing) {
  InMemoryMetadataStore store;
  auto value = store.Get("absent");
  ASSERT_TRUE(value.ok());
  EXPECT_FALSE(value->has_value());
}

TEST(InMemoryMetadataStore, PutReplacesEarlierValue) {
  InMemoryMetadataStore store;
  ASSERT_TRUE(store.Put("k", "one").ok());
  ASSERT_TRUE(store.Put("k", std::string("two\0bytes", 9)).ok());
  EXPECT_EQ(**store.Get("k"), std::string("two\0bytes", 9));
  EXPECT_EQ(store.size(), 1u);
}

TEST(InMemoryMetadataStore, DeleteReportsWhetherKeyWasThere) {
  InMemoryMetadataStore store;
  ASSERT_TRUE(store.Put("k", "v").ok());
  EXPECT_TRUE(*store.Delete("k"));
  EXPECT_FALSE(*store.Delete("k"));
  EXPECT_FALSE(store.Get("k")->has_value());
}

TEST(InMemoryMetadataStore, KeysListsOnlyThePrefixInByteOrder) {
  InMemoryMetadataStore store;
  for (const char* k : {"kv:b", "kv:a", "kv", "kw:a", "job:1", "kv:\xff"}) {
    ASSERT_TRUE(store.Put(k, "").ok());
  }
  EXPECT_EQ(*store.Keys("kv:"), (Keys{"kv:a", "kv:b", "kv:\xff"}));
  EXPECT_EQ(*store.Keys("nothing"), Keys{});
  EXPECT_EQ(store.Keys("")->size(), 6u);
}

TEST(FaultInjectingMetadataStore, FailedCallsLeaveInnerStoreUnchanged) {
  InMemoryMetadataStore inner;
  testing::FaultInjectingMetadataStore store(inner);
  ASSERT_TRUE(store.Put("k", "before").ok());
  store.FailAll(Unavailable("injected: redis went away"));
  EXPECT_EQ(store.Put("k", "after").code(), Code::kUnavailable);
  EXPECT_EQ(store.Delete("k").status().code(), Code::kUnavailable);
  EXPECT_EQ(store.Get("k").status().code(), Code::kUnavailable);
  EXPECT_EQ(store.Keys("").status().code(), Code::kUnavailable);
  store.FailAll(Status::Ok());
  EXPECT_EQ(**store.Get("k"), "before");
}

}  // namespace
}  // namespace airt::head
