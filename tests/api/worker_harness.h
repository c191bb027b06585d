// A real airt-worker process against a fake node (tests/api/fake_node.h) and a real in-process
// object store, with a Cap'n Proto client to push tasks to it from the test's thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>

#include "common/ids.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "tests/api/fake_node.h"
#include "tests/testing/test_support.h"

namespace airt::testing {

inline constexpr std::chrono::seconds kDeadline{20};

// One argument of a pushed task.
struct Arg {
  bool is_object = false;
  std::string bytes;  // inline
  ObjectId id;        // object
  std::string transfer_address;
  static Arg Inline(std::string b) { return {false, std::move(b), {}, ""}; }
  static Arg Object(const ObjectId& id, std::string address) {
    return {true, "", id, std::move(address)};
  }
};

// A pushTask answer, or the RPC's error.
struct PushReply {
  Status status;  // not ok: the call itself failed
  bool failed = false;
  proto::ErrorKind kind = proto::ErrorKind::USER_EXCEPTION;
  std::string function_name;
  std::string message;
  std::string data;  // TaskError.data
  struct Return {
    bool in_store = false;
    std::string bytes;  // inline
    ObjectId id;        // in the store
    std::string transfer_address;
    uint64_t size = 0;
  };
  std::vector<Return> returns;
};

class WorkerHarness {
 public:
  struct Options {
    std::string code_search_path = AIRT_TEST_FUNCTIONS_DIR;
    std::vector<std::string> extra_flags;
  };
  WorkerHarness() : WorkerHarness(Options()) {}
  explicit WorkerHarness(Options options);
  ~WorkerHarness();

  // Waits (kDeadline) for the worker to register with the fake node.
  bool WaitForRegistration();
  std::optional<RegisteredWorker> registration() const;

  TaskId NewTaskId() const { return TaskId::Of(ActorId::NilFor(job_)); }
  // Sends pushTask over the test's connection (made on first use) without waiting.
  kj::Promise<PushReply> Send(const TaskId& task, const std::string& function,
                              const std::vector<Arg>& args, uint32_t num_returns = 1,
                              std::optional<JobId> job = std::nullopt);
  // Sends and waits (kDeadline).
  PushReply Push(const std::string& function, const std::vector<Arg>& args,
                 uint32_t num_returns = 1);
  // Waits (kDeadline) for `promise` on the test's event loop; throws on timeout.
  template <typename T>
  T Wait(kj::Promise<T>&& promise) {
    return client()
        .getIoProvider()
        .getTimer()
        .timeoutAfter(ToKj(kDeadline), kj::mv(promise))
        .wait(client().getWaitScope());
  }
  // Calls exit(); the call's Status.
  Status CallExit();
  // Sends exit() without waiting.
  kj::Promise<void> SendExit();
  // Drops the test's connection to the worker.
  void Disconnect() { client_.reset(); }
  // Stops the fake node, closing its connection with the worker.
  void StopNode() { node_.reset(); }

  ChildProcess& process() { return *process_; }
  std::string Log() const { return ReadFile(dir_.File("worker.log")); }
  objectstore::StoreClient& store() { return *store_client_; }
  const std::string& transfer_address() const { return transfer_address_; }
  const JobId& job() const { return job_; }
  const WorkerId& worker_id() const { return worker_id_; }
  const TempDir& dir() const { return dir_; }

 private:
  static kj::Duration ToKj(std::chrono::milliseconds ms) { return ms.count() * kj::MILLISECONDS; }
  capnp::EzRpcClient& client();

  TempDir dir_;
  JobId job_ = JobId::FromRandom();
  WorkerId worker_id_ = WorkerId::FromRandom();
  std::string transfer_address_ = "127.0.0.1:17999";  // the node's, echoed in store returns
  std::unique_ptr<objectstore::StoreServer> store_;
  std::unique_ptr<objectstore::StoreClient> store_client_;
  std::shared_ptr<FakeNodeState> node_state_ = std::make_shared<FakeNodeState>();
  std::unique_ptr<FakeNodeThread> node_;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<capnp::EzRpcClient> client_;
};

}  // namespace airt::testing
