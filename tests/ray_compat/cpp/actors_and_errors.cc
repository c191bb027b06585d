// More of Ray's C++ API, as Ray's documentation uses it: a RayConfig with a namespace and head
// args, named actors found with ray::GetActor, an actor ending itself with ray::ExitActor, task
// errors as ray::internal exceptions, a void task, and a task's runtime_env env_vars. Built as a
// program and as a shared library beside it; runs unchanged on Ray (run_on_ray.sh) and on airt.
#include <ray/api.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

int Divide(int a, int b) {
  if (b == 0) throw std::invalid_argument("division by zero");
  return a / b;
}
void Touch(int x) { (void)x; }
std::string ReadEnv(std::string name) {
  const char *value = std::getenv(name.c_str());
  return value == nullptr ? "" : value;
}
RAY_REMOTE(Divide, Touch, ReadEnv);

class Account {
 public:
  explicit Account(int balance) : balance_(balance) {}
  static Account *FactoryCreate(int balance) { return new Account(balance); }
  int Deposit(int amount) { return balance_ += amount; }
  int Close() {
    ray::ExitActor();
    return balance_;
  }
  bool Restarted() { return ray::WasCurrentActorRestarted(); }

 private:
  int balance_;
};
RAY_REMOTE(Account::FactoryCreate, &Account::Deposit, &Account::Close, &Account::Restarted);

namespace {
int failures = 0;
void Expect(bool ok, const std::string &what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
  if (!ok) ++failures;
}
}  // namespace

int main(int argc, char **argv) {
  ray::RayConfig config;
  config.ray_namespace = "bank";
  config.head_args = {"--num-cpus=2"};
  ray::Init(config, argc, argv);
  Expect(ray::GetNamespace() == "bank", "ray::GetNamespace");

  // A task that throws: Get rethrows it as RayTaskException.
  bool caught = false;
  try {
    ray::Task(Divide).Remote(1, 0).Get();
  } catch (const ray::internal::RayTaskException &e) {
    caught = std::string(e.what()).find("division by zero") != std::string::npos;
  }
  Expect(caught, "RayTaskException from a task");
  Expect(*ray::Task(Divide).Remote(9, 3).Get() == 3, "a task that succeeds");

  // A void task: its ref tells when it is done.
  ray::ObjectRef<void> touched = ray::Task(Touch).Remote(1);
  touched.Get();
  Expect(true, "ObjectRef<void>::Get");

  // A named actor, found by name in this namespace.
  ray::ActorHandle<Account> account =
      ray::Actor(Account::FactoryCreate).SetName("main_account").Remote(10);
  Expect(*account.Task(&Account::Deposit).Remote(5).Get() == 15, "actor call");
  auto found = ray::GetActor<Account>("main_account");
  Expect(static_cast<bool>(found), "ray::GetActor finds it");
  if (found) Expect(*found->Task(&Account::Deposit).Remote(5).Get() == 20, "call via GetActor");
  Expect(!ray::GetActor<Account>("no_such_account"), "ray::GetActor of an unknown name");
  Expect(!*account.Task(&Account::Restarted).Remote().Get(), "ray::WasCurrentActorRestarted");

  // The actor ends itself; its pending call fails with RayActorException.
  caught = false;
  try {
    account.Task(&Account::Close).Remote().Get();
  } catch (const ray::internal::RayActorException &) {
    caught = true;
  }
  Expect(caught, "ray::ExitActor: RayActorException");

  // A task's runtime environment.
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"BANK_MODE", "audit"}});
  Expect(*ray::Task(ReadEnv).SetRuntimeEnv(env).Remote(std::string("BANK_MODE")).Get() ==
             "audit",
         "runtime_env env_vars");

  ray::Shutdown();
  std::cout << (failures == 0 ? "all passed" : "some failed") << std::endl;
  return failures == 0 ? 0 : 1;
}
