// C++ calling Python end to end: a real airt-head and an airt-node whose Python workers run the
// build's airt package (python -m airt._private.worker), this test as the driver, and a Python
// module the test writes into a folder of its own, given to the job as its code search path.
//
// The Python is $AIRT_PYTHON, else the one the build found; the test is skipped (saying why) when
// it cannot import the airt package of this build.
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "ray/api.h"
#include "tests/e2e/task_cluster.h"

namespace airt {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using namespace std::chrono_literals;

constexpr const char* kModule = R"(
def add(a, b):
    return a + b


def describe(name, values, weights):
    return {"name": name.upper(), "total": sum(values), "weighted": [v * weights[str(i)] for i, v in enumerate(values)]}


def fail(message):
    raise ValueError("failed on purpose: " + message)


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

    def explode(self):
        raise RuntimeError("the counter exploded at " + str(self.n))
)";

// What describe() answers: a dict, read by its keys.
struct Described {
  std::string name;
  int64_t total = 0;
  std::vector<double> weighted;
  MSGPACK_DEFINE_MAP(name, total, weighted);
};

// The Python the node runs workers with, or "" (and `why`) when it cannot import this build's airt.
std::string PythonWithAirt(const testing::TempDir& dir, std::string* why) {
#if defined(AIRT_TEST_PYTHON) && defined(AIRT_PYTHON_PACKAGE_DIR)
  const char* env = std::getenv("AIRT_PYTHON");
  std::string python = env && *env ? env : AIRT_TEST_PYTHON;
  std::string log = dir.File("probe.log");
  ChildProcess probe({"/usr/bin/env", "PYTHONPATH=" AIRT_PYTHON_PACKAGE_DIR, python, "-c",
                      "import airt._airt, msgpack, cloudpickle"},
                     log);
  if (probe.Wait(60s) == 0) return python;
  *why = python +
         " cannot import this build's airt package (" AIRT_PYTHON_PACKAGE_DIR "): " + ReadFile(log);
  return "";
#else
  (void)dir;
  *why = "the build has no Python extension (AIRT_WITH_PYTHON=OFF)";
  return "";
#endif
}

class CrossLanguage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    modules_ = new testing::TempDir();
    python_ = PythonWithAirt(*modules_, &skipped_);
    if (python_.empty()) return;
    std::ofstream(modules_->File("xlang_test_module.py")) << kModule;
#if defined(AIRT_PYTHON_PACKAGE_DIR)
    // The node's workers inherit it: they import this build's airt.
    ::setenv("PYTHONPATH", AIRT_PYTHON_PACKAGE_DIR, 1);
#endif
    Config config;
    config.code_search_path = {modules_->path()};
    cluster_ = new e2e::TaskCluster({"--num-cpus=2", "--python-executable=" + python_}, config);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete modules_;
  }
  void SetUp() override {
    if (python_.empty()) GTEST_SKIP() << "skipped: " << skipped_;
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  static testing::TempDir* modules_;
  static std::string python_;
  static std::string skipped_;
  static e2e::TaskCluster* cluster_;
};

testing::TempDir* CrossLanguage::modules_ = nullptr;
std::string CrossLanguage::python_;
std::string CrossLanguage::skipped_;
e2e::TaskCluster* CrossLanguage::cluster_ = nullptr;

TEST_F(CrossLanguage, PythonFunctionTakesAndReturnsMsgpackValues) {
  EXPECT_EQ(*Get(Task(PyFunction<int>{"xlang_test_module", "add"}).Remote(1, 2), 60000), 3);
  EXPECT_EQ(*Get(Task(PyFunction<std::string>{"xlang_test_module", "add"}).Remote("py", "thon")),
            "python");
  EXPECT_DOUBLE_EQ(*Get(Task(PyFunction<double>{"xlang_test_module", "add"}).Remote(0.5, 2.25)),
                   2.75);
  std::vector<int> joined = *Get(Task(PyFunction<std::vector<int>>{"xlang_test_module", "add"})
                                     .Remote(std::vector<int>{1, 2}, std::vector<int>{3}));
  EXPECT_EQ(joined, (std::vector<int>{1, 2, 3}));

  // A map back (read by key into a struct), built from a string, a vector and a map.
  Described described =
      *Get(Task(PyFunction<Described>{"xlang_test_module", "describe"})
               .Remote(std::string("airt"), std::vector<int>{1, 2, 3},
                       std::map<std::string, double>{{"0", 1.0}, {"1", 0.5}, {"2", 2.0}}));
  EXPECT_EQ(described.name, "AIRT");
  EXPECT_EQ(described.total, 6);
  EXPECT_EQ(described.weighted, (std::vector<double>{1.0, 1.0, 6.0}));

  // An ObjectRef argument passes its value; Ray's spelling works the same.
  ObjectRef<int> seven = Put(7);
  EXPECT_EQ(*Get(ray::Task(ray::PyFunction<int>{"xlang_test_module", "add"}).Remote(seven, 1)), 8);
}

TEST_F(CrossLanguage, PythonActorKeepsItsState) {
  PyActorHandle counter = Actor(PyActorClass{"xlang_test_module", "Counter"}).Remote(10);
  ObjectRef<int> fifteen = counter.Task(PyActorMethod<int>{"add"}).Remote(5);
  ObjectRef<int> sixteen = counter.Task(PyActorMethod<int>{"add"}).Remote(1);
  EXPECT_EQ(*Get(fifteen, 60000), 15);
  EXPECT_EQ(*Get(sixteen, 60000), 16);

  ray::ActorHandleXlang same = counter;
  EXPECT_EQ(*Get(same.Task(ray::PyActorMethod<int>{"add"}).Remote(4), 60000), 20);

  try {
    Get(counter.Task(PyActorMethod<int>{"explode"}).Remote(), 60000);
    ADD_FAILURE() << "explode returned";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("RuntimeError: the counter exploded at 20"),
              std::string::npos)
        << e.what();
  }
  // The actor survives its method's exception.
  EXPECT_EQ(*Get(counter.Task(PyActorMethod<int>{"add"}).Remote(1), 60000), 21);
  counter.Kill();
}

TEST_F(CrossLanguage, PythonExceptionIsTaskErrorWithTheTraceback) {
  try {
    Get(Task(PyFunction<int>{"xlang_test_module", "fail"}).Remote("now"), 60000);
    ADD_FAILURE() << "fail returned";
  } catch (const TaskError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("Traceback (most recent call last)"), std::string::npos) << what;
    EXPECT_NE(what.find("xlang_test_module.py"), std::string::npos) << what;
    EXPECT_NE(what.find("ValueError: failed on purpose: now"), std::string::npos) << what;
  }
  try {
    Get(Task(PyFunction<int>{"no_such_module_here", "f"}).Remote(), 60000);
    ADD_FAILURE() << "a missing module returned";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("ModuleNotFoundError"), std::string::npos) << e.what();
  }
  // A return that does not convert to R is the caller's error, at Get.
  EXPECT_THROW(Get(Task(PyFunction<std::string>{"xlang_test_module", "add"}).Remote(1, 2), 60000),
               internal::SerializationError);
  EXPECT_THROW(Task(PyFunction<int>{"a:b", "f"}), Exception);
}

}  // namespace
}  // namespace airt
