// Edge validation over the real RPC stack: every bad field is kInvalidArgument naming it, and the
// head keeps serving.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "head/internal/wire.h"
#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

using Info = proto::NodeInfo::Builder;
using Beat = proto::Head::HeartbeatParams::Builder;
using Actor = proto::ActorInfo::Builder;

class HeadValidationTest : public HeadRpcTest {
 protected:
  // Expects kInvalidArgument whose message starts with `field`, then checks the head still serves.
  void ExpectRejected(const Status& s, const std::string& field) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.message().rfind(field, 0), 0u)
        << "message should name " << field << ": " << s.message();
    EXPECT_TRUE(View().ok()) << "the head stopped serving";
  }
  Status RegisterEdited(const std::function<void(Info)>& edit) {
    return RegisterNode(NodeId::FromRandom(), /*gpus=*/2, edit);
  }
};

TEST_F(HeadValidationTest, RegisterNodeRejectsANodeIdOfTheWrongSize) {
  ExpectRejected(RegisterEdited([](Info i) { i.setNodeId(capnp::Data::Reader(nullptr, 0)); }),
                 "info.nodeId must be 28 bytes, got 0");
  std::string long_id(29, 'x');
  ExpectRejected(RegisterEdited([&](Info i) {
                   i.setNodeId(capnp::Data::Reader(
                       reinterpret_cast<const kj::byte*>(long_id.data()), long_id.size()));
                 }),
                 "info.nodeId must be 28 bytes, got 29");
}

TEST_F(HeadValidationTest, RegisterNodeRejectsBadResources) {
  ExpectRejected(RegisterEdited([](Info i) { i.getTotal()[1].setName(""); }),
                 "info.total[1].name must not be empty");
  ExpectRejected(RegisterEdited([](Info i) { i.getTotal()[0].setAmount(-1); }),
                 "info.total[0].amount (CPU) must be finite and >= 0, got -1");
  ExpectRejected(RegisterEdited([](Info i) {
                   i.getTotal()[0].setAmount(std::numeric_limits<double>::quiet_NaN());
                 }),
                 "info.total[0].amount (CPU) must be finite and >= 0, got nan");
  ExpectRejected(RegisterEdited([](Info i) {
                   i.getTotal()[1].setAmount(std::numeric_limits<double>::infinity());
                 }),
                 "info.total[1].amount (GPU) must be finite and >= 0, got inf");
  ExpectRejected(RegisterEdited([](Info i) { i.getTotal()[1].setName("CPU"); }),
                 "info.total lists 'CPU' twice");
  ExpectRejected(RegisterEdited([](Info i) {
                   i.getTotal()[0].setName(std::string(internal::kMaxNameBytes + 1, 'r'));
                 }),
                 "info.total[0].name is 257 bytes, more than the 256 allowed");
  ExpectRejected(RegisterEdited([](Info i) { i.initTotal(internal::kMaxListEntries + 1); }),
                 "info.total has 4097 entries, more than the 4096 allowed");
}

TEST_F(HeadValidationTest, RegisterNodeRejectsBadTextFields) {
  ExpectRejected(RegisterEdited([](Info i) { i.setAddress(""); }),
                 "info.address must not be empty");
  ExpectRejected(RegisterEdited([](Info i) { i.setAddress(std::string(300, 'a')); }),
                 "info.address is 300 bytes");
  ExpectRejected(
      RegisterEdited([](Info i) { i.setAddress(capnp::Text::Reader("10.0.0.1\0evil", 13)); }),
      "info.address must not contain a NUL byte");
  ExpectRejected(RegisterEdited([](Info i) { i.setStoreSocket(std::string(5000, 's')); }),
                 "info.storeSocket is 5000 bytes");
  ExpectRejected(RegisterEdited([](Info i) { i.setTempDir(std::string(5000, 't')); }),
                 "info.tempDir is 5000 bytes");
  ExpectRejected(RegisterEdited([](Info i) { i.getLabels()[0].setKey(""); }),
                 "info.labels[0].key must not be empty");
  ExpectRejected(RegisterEdited([](Info i) { i.getLabels()[0].setValue(std::string(2000, 'v')); }),
                 "info.labels[0].value is 2000 bytes");
  ExpectRejected(RegisterEdited([](Info i) {
                   auto labels = i.initLabels(2);
                   labels[0].setKey("zone");
                   labels[1].setKey("zone");
                 }),
                 "info.labels lists 'zone' twice");
}

TEST_F(HeadValidationTest, RegisterNodeRejectsAGpuIdListedTwice) {
  ExpectRejected(RegisterEdited([](Info i) { i.getGpuIds().set(1, 0); }),
                 "info.gpuIds lists GPU 0 twice");
}

TEST_F(HeadValidationTest, RejectedRegistrationLeavesNoNode) {
  ExpectRejected(RegisterEdited([](Info i) { i.setAddress(""); }), "info.address");
  EXPECT_EQ(View()->getNodes().size(), 0u);
}

TEST_F(HeadValidationTest, HeartbeatRejectsBadFields) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(id, /*gpus=*/2).ok());
  ExpectRejected(
      Heartbeat(id, [](Beat b) { b.setNodeId(capnp::Data::Reader(nullptr, 0)); }).status(),
      "nodeId must be 28 bytes, got 0");
  ExpectRejected(
      Heartbeat(
          id,
          [](Beat b) { b.getAvailable()[0].setAmount(std::numeric_limits<double>::quiet_NaN()); })
          .status(),
      "available[0].amount (CPU) must be finite and >= 0, got nan");
  ExpectRejected(Heartbeat(id, [](Beat b) { b.getAvailable()[0].setName(""); }).status(),
                 "available[0].name must not be empty");
  ExpectRejected(Heartbeat(id,
                           [](Beat b) {
                             auto ids = b.initGpuIdsInUse(2);
                             ids.set(0, 1);
                             ids.set(1, 1);
                           })
                     .status(),
                 "gpuIdsInUse lists GPU 1 twice");
  ExpectRejected(Heartbeat(id, [](Beat b) { b.initGpuIdsInUse(1).set(0, 7); }).status(),
                 "gpuIdsInUse: GPU 7 is not one of node " + id.Hex() + "'s GPUs");
  ExpectRejected(Heartbeat(id, [](Beat b) { b.initQuarantinedGpuIds(1).set(0, 9); }).status(),
                 "quarantinedGpuIds: GPU 9 is not one of node");
  auto known = Heartbeat(id);
  ASSERT_TRUE(known.ok());
  EXPECT_TRUE(*known);
}

TEST_F(HeadValidationTest, UnregisterNodeRejectsANodeIdOfTheWrongSize) {
  auto request = head().unregisterNodeRequest();
  request.setNodeId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>("short"), 5));
  ExpectRejected(Send(kj::mv(request)).status(), "nodeId must be 28 bytes, got 5");
}

TEST_F(HeadValidationTest, KvCallsRejectBadNamespacesKeysAndValues) {
  ExpectRejected(KvPut("ns", "", "v").status(), "key must not be empty");
  ExpectRejected(KvPut(std::string(257, 'n'), "k", "v").status(), "namespace is 257 bytes");
  ExpectRejected(KvPut("ns", std::string(4097, 'k'), "v").status(), "key is 4097 bytes");
  ExpectRejected(KvPut("ns", "k", std::string(internal::kMaxKvValueBytes + 1, 'v')).status(),
                 "value is 33554433 bytes, more than the 33554432 allowed");
  ExpectRejected(KvGet("ns", std::string("a\0b", 3)).status(), "key must not contain a NUL byte");
  auto del = head().kvDeleteRequest();
  del.setNamespace("ns");
  ExpectRejected(Send(kj::mv(del)).status(), "key must not be empty");
  auto keys = head().kvKeysRequest();
  keys.setNamespace("ns");
  keys.setPrefix(std::string(4097, 'p'));
  ExpectRejected(Send(kj::mv(keys)).status(), "prefix is 4097 bytes");
  EXPECT_TRUE(*KvPut("ns", "k", std::string(internal::kMaxKvValueBytes, 'v')))
      << "a value at the limit is accepted";
}

TEST_F(HeadValidationTest, JobCallsRejectBadJobIdsAndAddresses) {
  auto finish = head().finishJobRequest();
  finish.setJobId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>("12345678"), 8));
  ExpectRejected(Send(kj::mv(finish)).status(), "jobId must be 4 bytes, got 8");
  auto reg = head().registerJobRequest();
  reg.setDriverAddress(std::string(300, 'a'));
  ExpectRejected(Send(kj::mv(reg)).status(), "driverAddress is 300 bytes");
}

TEST_F(HeadValidationTest, RegisterActorRejectsEveryBadField) {
  JobId job = *RegisterJob();
  ActorId id = ActorId::Of(job);
  auto edited = [&](const std::function<void(proto::ActorInfo::Builder)>& edit) {
    return RegisterActor(id, "a", "ns", edit);
  };
  const kj::byte three[3] = {1, 2, 3};
  ExpectRejected(edited([&](Actor a) { a.setActorId(capnp::Data::Reader(three, 3)); }),
                 "info.actorId must be 16 bytes, got 3");
  ExpectRejected(edited([&](Actor a) { a.setJobId(capnp::Data::Reader(three, 3)); }),
                 "info.jobId must be 4 bytes, got 3");
  JobId other = JobId::FromRandom();
  ExpectRejected(
      edited([&](Actor a) { a.setJobId(capnp::Data::Reader(other.data(), JobId::kSize)); }),
      "info.actorId " + id.Hex() + " does not end with info.jobId " + other.Hex());
  ExpectRejected(edited([](Actor a) { a.setClassName(""); }), "info.className must not be empty");
  ExpectRejected(edited([](Actor a) { a.setName(std::string(257, 'n')); }),
                 "info.name is 257 bytes, more than the 256 allowed");
  ExpectRejected(edited([](Actor a) { a.setNamespace(capnp::Text::Reader("a\0b", 3)); }),
                 "info.namespace must not contain a NUL byte");
  ExpectRejected(edited([](Actor a) { a.setState(static_cast<proto::ActorState>(9)); }),
                 "info.state has the unknown value 9");
  ExpectRejected(edited([&](Actor a) { a.setWorkerId(capnp::Data::Reader(three, 3)); }),
                 "info.workerId must be 28 bytes, got 3");
  ExpectRejected(edited([](Actor a) { a.setWorkerAddress(std::string(300, 'w')); }),
                 "info.workerAddress is 300 bytes");
  ExpectRejected(edited([](Actor a) { a.setNodeAddress(std::string(300, 'w')); }),
                 "info.nodeAddress is 300 bytes");
  ExpectRejected(edited([](Actor a) { a.setPid(-5); }), "info.pid must be >= 0, got -5");
  ExpectRejected(edited([](Actor a) { a.setMaxRestarts(-2); }),
                 "info.maxRestarts must be -1 (without limit) or >= 0, got -2");
  ExpectRejected(edited([](Actor a) { a.setLanguage(2); }),
                 "info.language has the unknown value 2");
  ExpectRejected(
      edited([](Actor a) { a.setDeathCause(std::string(internal::kMaxDeathCauseBytes + 1, 'c')); }),
      "info.deathCause is 65537 bytes");
  ExpectRejected(edited([](Actor a) { a.setMaxTaskRetries(-2); }),
                 "info.maxTaskRetries must be -1 (without limit) or >= 0, got -2");
  ExpectRejected(edited([](Actor a) {
                   auto r = a.initResources(1);
                   r[0].setName("CPU");
                   r[0].setAmount(-1);
                 }),
                 "info.resources[0].amount (CPU) must be finite and >= 0, got -1");
  ExpectRejected(edited([](Actor a) {
                   auto r = a.initResources(2);
                   r[0].setName("GPU");
                   r[1].setName("GPU");
                 }),
                 "info.resources lists 'GPU' twice");
  ExpectRejected(edited([](Actor a) { a.setAcceleratorType(capnp::Text::Reader("A\0", 2)); }),
                 "info.acceleratorType must not contain a NUL byte");
  ExpectRejected(edited([&](Actor a) { a.setNodeId(capnp::Data::Reader(three, 3)); }),
                 "info.nodeId must be 28 bytes, got 3");
  ExpectRejected(RegisterActor(id, "", "ns", [](Actor a) { a.setDetached(true); }),
                 "info.detached is set but info.name is empty: a detached actor must be named");
  ASSERT_TRUE(RegisterActor(id, "a", "ns").ok()) << "none of those was registered";
}

TEST_F(HeadValidationTest, OtherActorCallsRejectBadIdsNamesAndCauses) {
  auto update = head().updateActorRequest();
  update.initInfo().setActorId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>("abc"), 3));
  ExpectRejected(Send(kj::mv(update)).status(), "info.actorId must be 16 bytes, got 3");
  ActorId id = ActorId::Of(*RegisterJob());
  ASSERT_TRUE(RegisterActor(id).ok());
  auto state = head().updateActorRequest();
  state.initInfo().setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
  state.getInfo().setState(static_cast<proto::ActorState>(4));
  ExpectRejected(Send(kj::mv(state)).status(), "info.state has the unknown value 4");

  auto get = head().getActorRequest();
  get.setActorId(capnp::Data::Reader(id.data(), 5));
  ExpectRejected(Send(kj::mv(get)).status(), "actorId must be 16 bytes, got 5");
  ExpectRejected(Send(head().getActorRequest()).status(),
                 "name must not be empty when actorId is not set");
  auto long_name = head().getActorRequest();
  long_name.setName(std::string(257, 'n'));
  ExpectRejected(Send(kj::mv(long_name)).status(), "name is 257 bytes");

  auto kill = head().killActorRequest();
  ExpectRejected(Send(kj::mv(kill)).status(), "actorId must be 16 bytes, got 0");
  auto cause = head().killActorRequest();
  cause.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
  cause.setCause(std::string(internal::kMaxDeathCauseBytes + 1, 'c'));
  ExpectRejected(Send(kj::mv(cause)).status(), "cause is 65537 bytes");

  auto place = head().placeActorRequest();
  place.setActorId(capnp::Data::Reader(id.data(), 7));
  ExpectRejected(Send(kj::mv(place)).status(), "actorId must be 16 bytes, got 7");
  auto avoid = head().placeActorRequest();
  avoid.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
  avoid.initAvoidNodes(2).set(1, capnp::Data::Reader(id.data(), 4));
  ExpectRejected(Send(kj::mv(avoid)).status(), "avoidNodes[0] must be 28 bytes, got 0");
  auto many = head().placeActorRequest();
  many.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
  many.initAvoidNodes(internal::kMaxListEntries + 1);
  ExpectRejected(Send(kj::mv(many)).status(), "avoidNodes has 4097 entries");
}

}  // namespace
}  // namespace airt::head::testing
