// Actors: a named parameter server (state kept between calls, calls applied in order) that tasks
// compute gradients for.
//   AIRT_ADDRESS=127.0.0.1:6379 build/examples/actors
#include <cstdio>
#include <vector>

#include "airt/api.h"
#include "examples/actors.h"

int main() {
  airt::Init();
  auto server = airt::Actor(ParameterServer::Create).SetName("parameter-server").Remote(4);
  std::vector<double> weights(4, 0.0);
  for (int step = 0; step < 20; ++step) {
    auto gradient = airt::Task(Gradient).Remote(weights, 1.0);     // a task on any worker
    weights = *airt::Get(server.Task(&ParameterServer::Apply).Remote(gradient, 0.25));
  }
  auto same = airt::GetActor<ParameterServer>("parameter-server");  // found by name
  std::printf("after %d updates the weights are %.4f %.4f %.4f %.4f (they approach 1)\n",
              *airt::Get(same->Task(&ParameterServer::Updates).Remote()), weights[0], weights[1],
              weights[2], weights[3]);
  server.Kill();
  airt::Shutdown();
  return 0;
}
