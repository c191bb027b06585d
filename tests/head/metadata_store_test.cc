#include "head/metadata_store.h"

#include <gtest/gtest.h>

#include "tests/head/head_doubles.h"

namespace airt::head {
namespace {

using Keys = std::vector<std::string>;

Keys KeysOf(const std::vector<Row>& rows) {
  Keys keys;
  for (const Row& row : rows) keys.push_back(row.key);
  return keys;
}

class MetadataStoreTest : public ::testing::Test {
 protected:
  Status Write(MetadataStore& store, WriteBatch batch) {
    return store.Write(std::move(batch)).wait(commit_.scope());
  }

  InMemoryMetadataStore inner_;
  testing::FaultInjectingMetadataStore faulty_{inner_};
  testing::Committer commit_{inner_};  // for its event loop
};

TEST_F(MetadataStoreTest, GetReturnsNothingWhenKeyMissing) {
  auto value = inner_.Get("absent");
  ASSERT_TRUE(value.ok());
  EXPECT_FALSE(value->has_value());
}

TEST_F(MetadataStoreTest, ABatchAppliesItsMutationsInOrder) {
  WriteBatch batch;
  batch.Put("k", "one");
  batch.Put("gone", "x");
  batch.Put("k", std::string("two\0bytes", 9));
  batch.Delete("gone");
  batch.Delete("never there");
  ASSERT_TRUE(Write(inner_, std::move(batch)).ok());
  EXPECT_EQ(**inner_.Get("k"), std::string("two\0bytes", 9));
  EXPECT_FALSE(inner_.Get("gone")->has_value());
  EXPECT_EQ(inner_.size(), 1u);
}

TEST_F(MetadataStoreTest, ScanListsOnlyThePrefixInByteOrder) {
  WriteBatch batch;
  for (const char* k : {"kv:b", "kv:a", "kv", "kw:a", "job:1", "kv:\xff"}) batch.Put(k, k);
  ASSERT_TRUE(Write(inner_, std::move(batch)).ok());
  EXPECT_EQ(KeysOf(*inner_.Scan("kv:")), (Keys{"kv:a", "kv:b", "kv:\xff"}));
  EXPECT_EQ(inner_.Scan("kv:a")->at(0).value, "kv:a");
  EXPECT_EQ(KeysOf(*inner_.Scan("nothing")), Keys{});
  EXPECT_EQ(inner_.Scan("")->size(), 6u);
}

TEST_F(MetadataStoreTest, FailedWritesLeaveTheInnerStoreUnchanged) {
  WriteBatch before;
  before.Put("k", "before");
  ASSERT_TRUE(Write(faulty_, std::move(before)).ok());
  faulty_.FailNextWrites(2, Unavailable("injected: redis went away"));
  for (int i = 0; i < 2; ++i) {
    WriteBatch batch;
    batch.Put("k", "after");
    batch.Put("new", "row");
    EXPECT_EQ(Write(faulty_, std::move(batch)).code(), Code::kUnavailable);
  }
  EXPECT_EQ(**inner_.Get("k"), "before");
  EXPECT_FALSE(inner_.Get("new")->has_value());
  WriteBatch third;
  third.Delete("k");
  EXPECT_TRUE(Write(faulty_, std::move(third)).ok()) << "only the next two fail";
  faulty_.FailAll(Unavailable("injected"));
  EXPECT_EQ(faulty_.Scan("").status().code(), Code::kUnavailable);
}

TEST_F(MetadataStoreTest, HeldWritesApplyInOrderWhenReleased) {
  faulty_.HoldWrites();
  WriteBatch first, second;
  first.Put("k", "first");
  second.Put("k", "second");
  kj::Promise<Status> a = faulty_.Write(std::move(first));
  kj::Promise<Status> b = faulty_.Write(std::move(second));
  EXPECT_FALSE(b.poll(commit_.scope()));
  EXPECT_FALSE(inner_.Get("k")->has_value()) << "nothing is applied while held";
  faulty_.ReleaseWrites();
  EXPECT_TRUE(b.wait(commit_.scope()).ok());
  EXPECT_TRUE(a.wait(commit_.scope()).ok());
  EXPECT_EQ(**inner_.Get("k"), "second");
}

}  // namespace
}  // namespace airt::head
