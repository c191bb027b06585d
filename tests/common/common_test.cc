#include <unordered_set>

#include <gtest/gtest.h>

#include "common/flags.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status.h"
#include "tests/testing/test_support.h"

namespace airt {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  AIRT_ASSIGN_OR_RETURN(int h, Half(x));
  AIRT_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  AIRT_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(Status, OkHasNoMessageAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(Status, ToStringNamesCodeAndMessage) {
  Status s = NotFound("object 00ab is not here");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "kNotFound: object 00ab is not here");
  EXPECT_EQ(s.WithContext("reading").message(), "reading: object 00ab is not here");
}

TEST(Status, ErrnoStatusMapsToActionableCodes) {
  EXPECT_EQ(ErrnoStatus("write", ENOSPC).code(), Code::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus("open", ENOENT).code(), Code::kNotFound);
  EXPECT_EQ(ErrnoStatus("send", EPIPE).code(), Code::kUnavailable);
  EXPECT_NE(ErrnoStatus("send", EPIPE).message().find("send: "), std::string::npos);
}

TEST(Result, PropagatesFirstErrorThroughMacros) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), Code::kInvalidArgument);
}

TEST(Result, BuiltFromOkStatusIsInternalError) {
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

TEST(Ids, SizesMatchRay) {
  EXPECT_EQ(JobId::kSize, 4u);
  EXPECT_EQ(ActorId::kSize, 16u);
  EXPECT_EQ(TaskId::kSize, 24u);
  EXPECT_EQ(ObjectId::kSize, 28u);
  EXPECT_EQ(NodeId::kSize, 28u);
  EXPECT_EQ(WorkerId::kSize, 28u);
}

TEST(Ids, HexRoundTripsAndRejectsBadInput) {
  NodeId id = NodeId::FromRandom();
  Result<NodeId> back = NodeId::FromHex(id.Hex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, id);
  EXPECT_EQ(NodeId::FromHex("abc").status().code(), Code::kInvalidArgument);
  std::string bad(56, 'z');
  EXPECT_EQ(NodeId::FromHex(bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(NodeId::FromBinary("short").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*NodeId::FromBinary(id.Binary()), id);
}

TEST(Ids, ObjectIdCarriesTaskAndIndex) {
  JobId job = JobId::FromRandom();
  ActorId actor = ActorId::Of(job);
  TaskId task = TaskId::Of(actor);
  EXPECT_EQ(actor.Job(), job);
  EXPECT_EQ(task.Actor(), actor);
  EXPECT_EQ(task.Job(), job);

  ObjectId ret = ObjectId::ForReturn(task, 3);
  EXPECT_EQ(ret.Task(), task);
  EXPECT_EQ(ret.Index(), 3u);
  EXPECT_FALSE(ret.IsPut());
  ObjectId put = ObjectId::ForPut(task, 3);
  EXPECT_TRUE(put.IsPut());
  EXPECT_EQ(put.Task(), task);
  EXPECT_NE(put, ret);
  EXPECT_EQ(TaskId::ForDriver(job).Job(), job);
}

TEST(Ids, NilIsAllOnesAndRandomIdsDiffer) {
  EXPECT_TRUE(ObjectId::Nil().IsNil());
  EXPECT_EQ(ObjectId::Nil().Hex(), std::string(56, 'f'));
  std::unordered_set<WorkerId> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(WorkerId::FromRandom());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(Logging, SetLogFileSendsLinesToThatFileAndRefusesAMissingFolder) {
  EXPECT_FALSE(SetLogFile("/nonexistent-airt-folder/x.log").ok());
  airt::testing::TempDir dir;
  ASSERT_TRUE(SetLogFile(dir.File("own.log")).ok());
  AIRT_LOG(WARNING) << "a line for the log file";
  EXPECT_NE(airt::testing::ReadFile(dir.File("own.log")).find("a line for the log file"),
            std::string::npos);
}

TEST(Flags, ParsesSizesWithSuffixes) {
  EXPECT_EQ(*ParseByteSize("512"), 512u);
  EXPECT_EQ(*ParseByteSize("64M"), 64ull << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("12Q").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("99999999999T").status().code(), Code::kInvalidArgument);
}

TEST(Flags, ParsesEachFormAndNamesBadFlags) {
  std::string socket;
  uint64_t capacity = 1, count = 2;
  bool prefault = true;
  FlagSet flags("t");
  flags.AddString("socket", &socket, "");
  flags.AddBytes("capacity", &capacity, "");
  flags.AddUint64("count", &count, "");
  flags.AddBool("prefault", &prefault, "");
  std::vector<std::string> args = {"t",  "--socket=/x", "--capacity",
                                   "1K", "--count=7",   "--no-prefault"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_EQ(socket, "/x");
  EXPECT_EQ(capacity, 1024u);
  EXPECT_EQ(count, 7u);
  EXPECT_FALSE(prefault);

  std::vector<std::string> bad = {"t", "--bogus=1"};
  std::vector<char*> bad_argv;
  for (auto& a : bad) bad_argv.push_back(a.data());
  Status s = flags.Parse(2, bad_argv.data());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--bogus"), std::string::npos);
}

}  // namespace
}  // namespace airt
