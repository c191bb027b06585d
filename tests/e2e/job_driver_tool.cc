// airt_job_driver_tool HOST:PORT: a driver that only holds a job. It registers one with the head
// at HOST:PORT, prints "job <job id hex>" to stdout, and keeps its connection, and with it the
// job's lease, until it is killed. Exit status 1 when the head cannot be reached.
#include <unistd.h>

#include <cstdio>

#include <capnp/ez-rpc.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: airt_job_driver_tool HOST:PORT\n");
    return 2;
  }
  capnp::EzRpcClient client(argv[1]);
  kj::WaitScope& wait = client.getWaitScope();
  airt::Status held = airt::CatchKj([&] {
    auto request = client.getMain<airt::proto::Head>().registerJobRequest();
    request.setDriverPid(static_cast<int32_t>(::getpid()));
    auto reply = request.send().wait(wait);
    airt::proto::JobLease::Client lease = reply.getLease();
    auto id = reply.getJobId();
    std::printf("job %s\n", airt::internal::ToHex(id.begin(), id.size()).c_str());
    std::fflush(stdout);
    kj::Promise<void>(kj::NEVER_DONE).wait(wait);
  });
  std::fprintf(stderr, "airt_job_driver_tool: %s\n", held.ToString().c_str());
  return 1;
}
