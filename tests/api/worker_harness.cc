#include "tests/api/worker_harness.h"

#include <gtest/gtest.h>

#include "common/rpc_status.h"

namespace airt::testing {
namespace {

capnp::Data::Reader AsData(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

std::string AsString(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

PushReply ToReply(proto::Worker::PushTaskResults::Reader results) {
  PushReply reply;
  reply.failed = results.getFailed();
  if (results.hasError()) {
    reply.kind = results.getError().getKind();
    reply.function_name = results.getError().getFunctionName();
    reply.message = results.getError().getMessage();
    reply.data = AsString(results.getError().getData());
  }
  for (auto r : results.getReturns()) {
    PushReply::Return out;
    if (r.isInline()) {
      out.bytes = AsString(r.getInline());
      out.size = out.bytes.size();
    } else {
      out.in_store = true;
      auto id = ObjectId::FromBinary(AsString(r.getObject().getObjectId()));
      EXPECT_TRUE(id.ok()) << id.status().ToString();
      if (id.ok()) out.id = *id;
      out.transfer_address = r.getObject().getTransferAddress();
      out.size = r.getObject().getSize();
    }
    reply.returns.push_back(std::move(out));
  }
  return reply;
}

}  // namespace

WorkerHarness::WorkerHarness(Options options) {
  objectstore::StoreOptions store_options;
  store_options.socket_path = dir_.File("store.sock");
  store_options.capacity_bytes = 32 << 20;
  store_options.prefault = false;
  auto store = objectstore::StoreServer::Start(store_options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return;
  store_ = std::move(*store);
  auto client = objectstore::StoreClient::Connect(store_options.socket_path,
                                                  {.spin_us = 50, .prefault = false});
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (client.ok()) store_client_ = std::move(*client);

  node_ = std::make_unique<FakeNodeThread>(node_state_);
  EXPECT_NE(node_->port(), 0);
  std::vector<std::string> argv{AIRT_WORKER_BIN,
                                "--node-address=127.0.0.1",
                                "--node-port=" + std::to_string(node_->port()),
                                "--worker-id=" + worker_id_.Hex(),
                                "--job-id=" + job_.Hex(),
                                "--store-socket=" + store_options.socket_path,
                                "--transfer-address=" + transfer_address_,
                                "--code-search-path=" + options.code_search_path};
  argv.insert(argv.end(), options.extra_flags.begin(), options.extra_flags.end());
  process_ = std::make_unique<ChildProcess>(argv, dir_.File("worker.log"));
}

WorkerHarness::~WorkerHarness() {
  client_.reset();
  process_.reset();  // killed by pid if still running
  node_.reset();
}

bool WorkerHarness::WaitForRegistration() {
  return WaitUntil([&] { return registration().has_value() || !process_->Running(); }, kDeadline) &&
         registration().has_value();
}

std::optional<RegisteredWorker> WorkerHarness::registration() const {
  auto all = node_state_->Registrations();
  if (all.empty()) return std::nullopt;
  return all.front();
}

capnp::EzRpcClient& WorkerHarness::client() {
  if (!client_) {
    auto r = registration();
    EXPECT_TRUE(r.has_value()) << "the worker has not registered; its log:\n" << Log();
    client_ = std::make_unique<capnp::EzRpcClient>(r ? r->host : "127.0.0.1", r ? r->port : 1);
  }
  return *client_;
}

kj::Promise<PushReply> WorkerHarness::Send(const TaskId& task, const std::string& function,
                                           const std::vector<Arg>& args, uint32_t num_returns,
                                           std::optional<JobId> job) {
  auto worker = client().getMain<proto::Worker>();
  auto request = worker.pushTaskRequest();
  auto spec = request.initTask();
  spec.setTaskId(capnp::Data::Reader(task.data(), TaskId::kSize));
  JobId job_id = job.value_or(job_);
  spec.setJobId(capnp::Data::Reader(job_id.data(), JobId::kSize));
  spec.setFunctionName(function);
  spec.setName(function);
  spec.setNumReturns(num_returns);
  auto list = spec.initArgs(static_cast<unsigned>(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_object) {
      list[i].setInline(AsData(args[i].bytes));
      continue;
    }
    auto object = list[i].initObject();
    object.setObjectId(capnp::Data::Reader(args[i].id.data(), ObjectId::kSize));
    object.setTransferAddress(args[i].transfer_address);
  }
  return request.send().then(
      [](capnp::Response<proto::Worker::PushTaskResults> response) { return ToReply(response); },
      [](kj::Exception&& e) {
        PushReply reply;
        reply.status = FromKjException(e);
        return reply;
      });
}

PushReply WorkerHarness::Push(const std::string& function, const std::vector<Arg>& args,
                              uint32_t num_returns) {
  PushReply reply;
  Status waited = CatchKj([&] { reply = Wait(Send(NewTaskId(), function, args, num_returns)); });
  if (!waited.ok()) reply.status = waited;
  return reply;
}

kj::Promise<void> WorkerHarness::SendExit() {
  return client().getMain<proto::Worker>().exitRequest().send().ignoreResult();
}

Status WorkerHarness::CallExit() {
  return CatchKj([&] { Wait(SendExit()); });
}

}  // namespace airt::testing
