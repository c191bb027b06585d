// A first Ray C++ program, written the way Ray's C++ documentation writes one: one file holding
// the remote functions, an actor class and main. Built as a program (the driver) and as a shared
// library beside it (what the workers load), it runs unchanged on Ray (run_on_ray.sh) and on airt.
#include <ray/api.h>

#include <iostream>
#include <string>
#include <vector>

// Plain functions made remote.
int Plus(int x, int y) { return x + y; }
int Square(int x) { return x * x; }
std::string Greet(std::string name) { return "hello, " + name; }
RAY_REMOTE(Plus, Square, Greet);

// An actor: its state lives in a worker process; its methods run there one at a time.
class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter *FactoryCreate(int start) { return new Counter(start); }
  int Add(int x) {
    value_ += x;
    return value_;
  }
  int Get() { return value_; }

 private:
  int value_;
};
RAY_REMOTE(Counter::FactoryCreate, &Counter::Add, &Counter::Get);

namespace {
int failures = 0;
void Expect(bool ok, const std::string &what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
  if (!ok) ++failures;
}
}  // namespace

int main() {
  ray::Init();
  Expect(ray::IsInitialized(), "ray::Init()");

  // Objects: put one, get it back.
  ray::ObjectRef<int> object = ray::Put(100);
  Expect(*ray::Get(object) == 100, "ray::Put and ray::Get");

  // Tasks: the result is a reference; refs can be passed on to other tasks.
  ray::ObjectRef<int> three = ray::Task(Plus).Remote(1, 2);
  ray::ObjectRef<int> nine = ray::Task(Square).Remote(three);
  Expect(*ray::Get(nine) == 9, "ray::Task(Square).Remote(ref)");
  Expect(*ray::Task(Greet).Remote(std::string("ray")).Get() == "hello, ray", "ObjectRef::Get");

  std::vector<ray::ObjectRef<int>> squares;
  for (int i = 0; i < 8; ++i) squares.push_back(ray::Task(Square).Remote(i));
  int sum = 0;
  for (const auto &value : ray::Get(squares)) sum += *value;
  Expect(sum == 140, "ray::Get of a list");
  ray::WaitResult<int> waited = ray::Wait(squares, 8, 30000);
  Expect(waited.ready.size() == 8 && waited.unready.empty(), "ray::Wait");

  // Actors: created from a factory; calls keep their order.
  ray::ActorHandle<Counter> counter = ray::Actor(Counter::FactoryCreate).Remote(0);
  ray::ObjectRef<int> first = counter.Task(&Counter::Add).Remote(3);
  ray::ObjectRef<int> second = counter.Task(&Counter::Add).Remote(three);
  Expect(*ray::Get(first) == 3 && *ray::Get(second) == 6, "actor calls in order");
  Expect(*counter.Task(&Counter::Get).Remote().Get() == 6, "actor state kept");
  counter.Kill();

  ray::Shutdown();
  Expect(!ray::IsInitialized(), "ray::Shutdown()");
  std::cout << (failures == 0 ? "all passed" : "some failed") << std::endl;
  return failures == 0 ? 0 : 1;
}
