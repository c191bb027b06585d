#include "common/rpc_status.h"

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "common/proto/cluster.capnp.h"

namespace airt {
namespace {

TEST(RpcStatus, RoundTripsEveryCodeAndMessage) {
  for (int c = 1; c <= static_cast<int>(Code::kInternal); ++c) {
    Status s(static_cast<Code>(c), "node ab12 has no GPU: {GPU: 1}");
    EXPECT_EQ(FromKjException(ToKjException(s)), s) << CodeName(s.code());
  }
}

TEST(RpcStatus, ForeignExceptionsMapToWhatTheCallerShouldDo) {
  kj::Exception gone(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__, kj::str("peer died"));
  EXPECT_EQ(FromKjException(gone).code(), Code::kUnavailable);
  kj::Exception unimplemented(kj::Exception::Type::UNIMPLEMENTED, __FILE__, __LINE__,
                              kj::str("no such method"));
  EXPECT_EQ(FromKjException(unimplemented).code(), Code::kUnimplemented);
  kj::Exception failed(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str("boom"));
  EXPECT_EQ(FromKjException(failed).code(), Code::kInternal);
}

// A Head whose kvGet fails with a Status, served over a real socket on loopback.
class FailingHead final : public proto::Head::Server {
 protected:
  kj::Promise<void> kvGet(KvGetContext) override {
    return ToKjException(NotFound("key 'x' in namespace 'actors'"));
  }
};

TEST(RpcStatus, StatusThrownByServerReachesClientUnchanged) {
  capnp::EzRpcServer server(kj::heap<FailingHead>(), "127.0.0.1", 0);
  auto& wait = server.getWaitScope();
  uint port = server.getPort().wait(wait);
  capnp::EzRpcClient client("127.0.0.1", port);
  auto head = client.getMain<proto::Head>();
  Status s = CatchKj([&] {
    auto request = head.kvGetRequest();
    request.setNamespace("actors");
    request.setKey("x");
    request.send().wait(client.getWaitScope());
  });
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "key 'x' in namespace 'actors'");
  Status unimplemented = CatchKj([&] { head.listJobsRequest().send().wait(wait); });
  EXPECT_EQ(unimplemented.code(), Code::kUnimplemented);
}

}  // namespace
}  // namespace airt
