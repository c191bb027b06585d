// The internal KV and the job table over an in-memory and a fault-injecting MetadataStore.
#include <gtest/gtest.h>

#include "head/internal/job_table.h"
#include "head/internal/kv_table.h"
#include "tests/head/head_doubles.h"

namespace airt::head::internal {
namespace {

using Keys = std::vector<std::string>;

class KvTableTest : public ::testing::Test {
 protected:
  InMemoryMetadataStore backing_;
  testing::FaultInjectingMetadataStore store_{backing_};
  testing::Committer commit_{store_};
  KvTable kv_{store_};
};

TEST_F(KvTableTest, PutReportsAddedOnlyForANewKey) {
  EXPECT_TRUE(*commit_(kv_.Put("fn", "f1", "v1", /*overwrite=*/false)));
  EXPECT_FALSE(*commit_(kv_.Put("fn", "f1", "v2", /*overwrite=*/true)));
  EXPECT_EQ(*kv_.Get("fn", "f1"), "v2");
}

TEST_F(KvTableTest, PutKeepsTheValueWhenNotOverwriting) {
  ASSERT_TRUE(commit_(kv_.Put("actors", "a", "first", false)).ok());
  EXPECT_FALSE(*commit_(kv_.Put("actors", "a", "second", false)));
  EXPECT_EQ(*kv_.Get("actors", "a"), "first");
}

TEST_F(KvTableTest, GetReturnsNothingWhenKeyMissing) {
  EXPECT_FALSE(kv_.Get("actors", "nobody").has_value());
}

TEST_F(KvTableTest, NamespacesNeverCollide) {
  ASSERT_TRUE(*commit_(kv_.Put("a", "bc", "1", false)));
  ASSERT_TRUE(*commit_(kv_.Put("ab", "c", "2", false)));
  ASSERT_TRUE(*commit_(kv_.Put("", "abc", "3", false)));
  EXPECT_EQ(*kv_.Get("a", "bc"), "1");
  EXPECT_EQ(*kv_.Get("ab", "c"), "2");
  EXPECT_EQ(*kv_.Get("", "abc"), "3");
  EXPECT_EQ(kv_.Keys("a", ""), Keys{"bc"});
  EXPECT_EQ(kv_.Keys("", ""), Keys{"abc"});
}

TEST_F(KvTableTest, KeysListsThePrefixWithinTheNamespaceInOrder) {
  for (const char* k : {"nccl/group1/rank1", "nccl/group1/rank0", "nccl/group2/rank0", "other"}) {
    ASSERT_TRUE(commit_(kv_.Put("collective", k, std::string(128, 'x'), false)).ok());
  }
  ASSERT_TRUE(commit_(kv_.Put("elsewhere", "nccl/group1/rank9", "", false)).ok());
  EXPECT_EQ(kv_.Keys("collective", "nccl/group1/"),
            (Keys{"nccl/group1/rank0", "nccl/group1/rank1"}));
  EXPECT_EQ(kv_.Keys("collective", "").size(), 4u);
  EXPECT_EQ(kv_.Keys("collective", "zzz"), Keys{});
}

TEST_F(KvTableTest, DeleteReportsWhetherTheKeyWasThere) {
  ASSERT_TRUE(commit_(kv_.Put("ns", "k", "v", false)).ok());
  EXPECT_TRUE(*commit_(kv_.Delete("ns", "k")));
  EXPECT_FALSE(*commit_(kv_.Delete("ns", "k")));
  EXPECT_FALSE(kv_.Get("ns", "k").has_value());
}

TEST_F(KvTableTest, DeletePrefixRemovesOnlyThePrefixOfItsNamespaceAndSurvivesReload) {
  for (const char* k : {"g/a/0", "g/a/1", "g/ab", "g/b/0"}) {
    ASSERT_TRUE(commit_(kv_.Put("collective", k, "v", false)).ok());
  }
  ASSERT_TRUE(commit_(kv_.Put("other", "g/a/0", "v", false)).ok());
  EXPECT_EQ(*commit_(kv_.DeletePrefix("collective", "g/a/")), 2u);
  EXPECT_EQ(kv_.Keys("collective", ""), (Keys{"g/ab", "g/b/0"}));
  EXPECT_EQ(kv_.Keys("other", ""), Keys{"g/a/0"});
  EXPECT_EQ(*commit_(kv_.DeletePrefix("collective", "g/a/")), 0u);
  KvTable restarted(store_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.Keys("collective", ""), (Keys{"g/ab", "g/b/0"}));
}

TEST_F(KvTableTest, FailedDeletePrefixKeepsEveryKey) {
  ASSERT_TRUE(commit_(kv_.Put("c", "p/1", "v", false)).ok());
  ASSERT_TRUE(commit_(kv_.Put("c", "p/2", "v", false)).ok());
  store_.FailNextWrites(1, Unavailable("injected"));
  EXPECT_EQ(commit_(kv_.DeletePrefix("c", "p/")).status().code(), Code::kUnavailable);
  EXPECT_EQ(kv_.Keys("c", ""), (Keys{"p/1", "p/2"}));
}

TEST_F(KvTableTest, FailedPutNamesTheKeyAndKeepsTheEarlierValue) {
  ASSERT_TRUE(commit_(kv_.Put("actors", "a", "first", false)).ok());
  store_.write_error = Unavailable("injected: redis went away");
  auto put = commit_(kv_.Put("actors", "a", "second", true));
  EXPECT_EQ(put.status().code(), Code::kUnavailable);
  EXPECT_EQ(put.status().message(),
            "putting key 'a' in namespace 'actors': injected: redis went away");
  store_.write_error = Status::Ok();
  EXPECT_EQ(*kv_.Get("actors", "a"), "first");
}

TEST_F(KvTableTest, FailedWritesChangeNothingAndLoseNothing) {
  ASSERT_TRUE(commit_(kv_.Put("n", "kept", "v", false)).ok());
  store_.FailNextWrites(2, Unavailable("injected"));
  EXPECT_EQ(commit_(kv_.Put("n", "k", "v", true)).status().code(), Code::kUnavailable);
  EXPECT_EQ(commit_(kv_.Delete("n", "kept")).status().code(), Code::kUnavailable);
  EXPECT_FALSE(kv_.Get("n", "k").has_value());
  EXPECT_EQ(*kv_.Get("n", "kept"), "v");
  KvTable restarted(store_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.Keys("n", ""), Keys{"kept"}) << "the store holds what memory does";
}

TEST_F(KvTableTest, LoadReturnsTheStoreErrorAndRestoresEveryKey) {
  ASSERT_TRUE(commit_(kv_.Put("a", "1", std::string("\0bin", 4), false)).ok());
  ASSERT_TRUE(commit_(kv_.Put("b", "2", "two", false)).ok());
  store_.scan_error = Unavailable("injected");
  KvTable unreachable(store_);
  EXPECT_EQ(unreachable.Load().code(), Code::kUnavailable);
  store_.scan_error = Status::Ok();
  KvTable restarted(store_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(*restarted.Get("a", "1"), std::string("\0bin", 4));
  EXPECT_EQ(*restarted.Get("b", "2"), "two");
}

class JobTableTest : public ::testing::Test {
 protected:
  InMemoryMetadataStore backing_;
  testing::FaultInjectingMetadataStore store_{backing_};
  testing::Committer commit_{store_};
  testing::ManualClock clock_;
  JobTable jobs_{store_, clock_};
};

TEST_F(JobTableTest, RegisterHandsOutIncreasingIdsAsRayDoes) {
  auto first = commit_(jobs_.Register(100, "10.0.0.1"));
  auto second = commit_(jobs_.Register(101, "10.0.0.2"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->Hex(), "01000000");
  EXPECT_EQ(second->Hex(), "02000000");
  EXPECT_EQ(JobIdValue(*second), 2u);
  auto list = jobs_.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, *first);
  EXPECT_EQ(list[0].driver_pid, 100);
  EXPECT_EQ(list[0].driver_address, "10.0.0.1");
  EXPECT_EQ(list[0].start_ms, static_cast<uint64_t>(clock_.WallMs()));
  EXPECT_EQ(list[0].end_ms, 0u);
  EXPECT_TRUE(list[0].alive);
}

TEST_F(JobTableTest, FinishRecordsTheEndTimeOnce) {
  JobId id = *commit_(jobs_.Register(100, "10.0.0.1"));
  clock_.AdvanceMs(5000);
  ASSERT_TRUE(commit_(jobs_.Finish(id)).ok());
  uint64_t end = static_cast<uint64_t>(clock_.WallMs());
  clock_.AdvanceMs(5000);
  ASSERT_TRUE(commit_(jobs_.Finish(id)).ok()) << "finishing twice is harmless";
  auto job = jobs_.List().at(0);
  EXPECT_FALSE(job.alive);
  EXPECT_EQ(job.end_ms, end);
  EXPECT_EQ(job.end_ms - job.start_ms, 5000u);
}

TEST_F(JobTableTest, FinishReturnsNotFoundForAnUnknownJob) {
  Status s = commit_(jobs_.Finish(JobIdOf(7)));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "job 07000000 is not registered");
}

TEST_F(JobTableTest, LoadRestoresJobsAndContinuesIdsAfterTheHighest) {
  JobId a = *commit_(jobs_.Register(1, "a"));
  JobId b = *commit_(jobs_.Register(2, "b"));
  ASSERT_TRUE(commit_(jobs_.Finish(a)).ok());
  JobTable restarted(store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.List(), jobs_.List());
  JobId c = *commit_(restarted.Register(3, "c"));
  EXPECT_EQ(JobIdValue(c), JobIdValue(b) + 1);
}

TEST_F(JobTableTest, FailedRegisterListsNoJobAndNeverReusesTheId) {
  store_.write_error = Unavailable("injected: redis went away");
  auto failed = commit_(jobs_.Register(1, "a"));
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  EXPECT_TRUE(jobs_.List().empty());
  store_.write_error = Status::Ok();
  EXPECT_EQ(JobIdValue(*commit_(jobs_.Register(1, "a"))), 2u);
}

TEST_F(JobTableTest, FailedFinishLeavesTheJobRunning) {
  JobId id = *commit_(jobs_.Register(1, "a"));
  store_.write_error = Unavailable("injected");
  EXPECT_EQ(commit_(jobs_.Finish(id)).code(), Code::kUnavailable);
  EXPECT_TRUE(jobs_.List().at(0).alive);
  EXPECT_EQ(jobs_.FinishedSince(0).seq, 0u);
}

TEST_F(JobTableTest, FinishesAreNumberedAndFinishedSinceAnswersTheNewOnes) {
  JobId a = *commit_(jobs_.Register(1, "a")), b = *commit_(jobs_.Register(2, "b")),
        c = *commit_(jobs_.Register(3, "c"));
  EXPECT_EQ(jobs_.FinishedSince(0).seq, 0u);
  EXPECT_TRUE(jobs_.FinishedSince(0).jobs.empty());
  ASSERT_TRUE(commit_(jobs_.Finish(b)).ok());
  ASSERT_TRUE(commit_(jobs_.Finish(b)).ok()) << "a second finish gets no number";
  ASSERT_TRUE(commit_(jobs_.Finish(a)).ok());
  FinishedJobs all = jobs_.FinishedSince(0);
  EXPECT_EQ(all.seq, 2u);
  EXPECT_EQ(all.jobs, (std::vector<JobId>{b, a}));
  ASSERT_TRUE(commit_(jobs_.Finish(c)).ok());
  FinishedJobs news = jobs_.FinishedSince(2);
  EXPECT_EQ(news.seq, 3u);
  EXPECT_EQ(news.jobs, std::vector<JobId>{c});
  EXPECT_TRUE(jobs_.FinishedSince(3).jobs.empty());
  // A number from before a head restart, beyond ours: the whole window.
  EXPECT_EQ(jobs_.FinishedSince(99).jobs, (std::vector<JobId>{b, a, c}));
  EXPECT_FALSE(jobs_.Find(c)->alive);
  EXPECT_FALSE(jobs_.Find(JobIdOf(9)).has_value());
}

TEST_F(JobTableTest, FinishedSinceAnswersAtMostTheLastWindow) {
  std::vector<JobId> ids;
  for (size_t i = 0; i < JobTable::kFinishedWindow + 5; ++i) {
    ids.push_back(*commit_(jobs_.Register(1, "a")));
    ASSERT_TRUE(commit_(jobs_.Finish(ids.back())).ok());
  }
  FinishedJobs all = jobs_.FinishedSince(0);
  EXPECT_EQ(all.seq, JobTable::kFinishedWindow + 5);
  ASSERT_EQ(all.jobs.size(), JobTable::kFinishedWindow);
  EXPECT_EQ(all.jobs.front(), ids[5]);
  EXPECT_EQ(all.jobs.back(), ids.back());
  EXPECT_EQ(jobs_.FinishedSince(all.seq - 2).jobs.size(), 2u);
}

TEST_F(JobTableTest, LoadNumbersTheFinishedJobsByTheirEndTimes) {
  JobId a = *commit_(jobs_.Register(1, "a")), b = *commit_(jobs_.Register(2, "b"));
  ASSERT_TRUE(commit_(jobs_.Register(3, "c")).ok());
  ASSERT_TRUE(commit_(jobs_.Finish(b)).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(commit_(jobs_.Finish(a)).ok());
  JobTable restarted(store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  FinishedJobs finished = restarted.FinishedSince(0);
  EXPECT_EQ(finished.seq, 2u) << "as the head before the restart counted";
  EXPECT_EQ(finished.jobs, (std::vector<JobId>{b, a}));
}

}  // namespace
}  // namespace airt::head::internal
