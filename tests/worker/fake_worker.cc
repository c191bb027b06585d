// airt_fake_worker: a stand-in for airt-worker in the node's tests. It takes the arguments the
// node gives a worker, prints them and its CUDA_VISIBLE_DEVICES to stdout (which the node sends
// to the worker's log), serves an empty Worker service on 127.0.0.1, registers it with the node
// (Node.registerWorker) and runs until SIGTERM or SIGINT, printing "stopping on SIGTERM".
//
// AIRT_FAKE_WORKER_MODE, from the node's environment, picks a misbehaviour:
//   exit            exit 3 at once, before registering
//   hang            never register (the node's register timeout kills it)
//   ignore-sigterm  register, then ignore SIGTERM (the node must SIGKILL it)
//   slow-register   wait 500 ms before registering
// Exit status: 0 after SIGTERM/SIGINT, 1 when registering fails, 2 for bad flags.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <sys/signalfd.h>

#include "common/flags.h"
#include "common/ids.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace {

class EmptyWorker final : public airt::proto::Worker::Server {
 protected:
  kj::Promise<void> pushTask(PushTaskContext) override {
    return airt::ToKjException(airt::Unimplemented("airt_fake_worker runs no tasks"));
  }
};

int Run(int argc, char** argv) {
  std::string node_address, worker_id_hex, job_id_hex, store_socket, transfer_address;
  std::string code_search_path, log_file, head_address;
  uint64_t node_port = 0;
  airt::FlagSet flags("airt_fake_worker");
  flags.AddString("head-address", &head_address, "the head (unused)");
  flags.AddString("node-address", &node_address, "the node's host");
  flags.AddUint64("node-port", &node_port, "the node's service port");
  flags.AddString("worker-id", &worker_id_hex, "the id the node gave this worker (hex)");
  flags.AddString("job-id", &job_id_hex, "the job (hex)");
  flags.AddString("store-socket", &store_socket, "the node's object store socket");
  flags.AddString("transfer-address", &transfer_address, "the node's transfer service");
  flags.AddString("code-search-path", &code_search_path, "where remote functions are");
  flags.AddString("log-file", &log_file,
                  "accepted as airt-worker takes it; everything goes to stdout");
  if (airt::Status parsed = flags.Parse(argc, argv); !parsed.ok()) {
    std::fprintf(stderr, "airt_fake_worker: %s\n", parsed.ToString().c_str());
    return 2;
  }
  auto worker_id = airt::WorkerId::FromHex(worker_id_hex);
  auto job_id = airt::JobId::FromHex(job_id_hex);
  if (!worker_id.ok() || !job_id.ok() || node_port == 0 || node_port > 65535 ||
      store_socket.empty() || transfer_address.find(':') == std::string::npos) {
    std::fprintf(stderr,
                 "airt_fake_worker: bad --worker-id, --job-id, --node-port, --store-socket or "
                 "--transfer-address\n");
    return 2;
  }
  const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES");
  const char* mode_env = std::getenv("AIRT_FAKE_WORKER_MODE");
  std::string mode = mode_env ? mode_env : "";
  std::printf("fake worker pid=%d\n", static_cast<int>(::getpid()));
  std::printf("args:");
  for (int i = 1; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\n");
  if (cuda != nullptr) {
    std::printf("CUDA_VISIBLE_DEVICES=%s\n", cuda);
  } else {
    std::printf("CUDA_VISIBLE_DEVICES unset\n");
  }
  std::fflush(stdout);
  if (mode == "exit") return 3;

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  if (mode == "ignore-sigterm") {
    ::signal(SIGTERM, SIG_IGN);
  } else {
    sigaddset(&stop, SIGTERM);
  }
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);

  capnp::EzRpcServer server(kj::heap<EmptyWorker>(), "127.0.0.1", 0);
  kj::WaitScope& wait = server.getWaitScope();
  auto port = static_cast<uint16_t>(server.getPort().wait(wait));

  // Kept until exit: a worker holds its connection to the node.
  std::unique_ptr<capnp::EzRpcClient> node;
  if (mode == "slow-register") {
    server.getIoProvider().getTimer().afterDelay(500 * kj::MILLISECONDS).wait(wait);
  }
  if (mode != "hang") {
    node = std::make_unique<capnp::EzRpcClient>(node_address, static_cast<uint>(node_port));
    auto request = node->getMain<airt::proto::Node>().registerWorkerRequest();
    auto address = request.initWorker();
    address.setWorkerId(capnp::Data::Reader(worker_id->data(), airt::WorkerId::kSize));
    address.setHost("127.0.0.1");
    address.setPort(port);
    address.setPid(static_cast<int32_t>(::getpid()));
    airt::Status registered = airt::CatchKj([&] { request.send().wait(wait); });
    if (!registered.ok()) {
      std::printf("registerWorker failed: %s\n", registered.ToString().c_str());
      std::fflush(stdout);
      return 1;
    }
    std::printf("registered, serving on 127.0.0.1:%u\n", static_cast<unsigned>(port));
    std::fflush(stdout);
  }

  int fd = ::signalfd(-1, &stop, SFD_CLOEXEC);
  if (fd < 0) return 1;
  using Flags = kj::LowLevelAsyncIoProvider;
  auto signals = server.getLowLevelIoProvider().wrapInputFd(fd, Flags::TAKE_OWNERSHIP);
  signalfd_siginfo info{};
  signals->read(&info, sizeof info).wait(wait);
  std::printf("stopping on %s\n", info.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Not InitProcess: a worker as the node starts it, with nothing of airt's process set-up.
  return Run(argc, argv);
}
