// ray::RuntimeEnv's fields and RayConfig::head_args as the local cluster reads them.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/local_cluster.h"
#include "ray/api.h"

namespace {

TEST(RayRuntimeEnv, SetGetContainsRemoveAndEmpty) {
  ray::RuntimeEnv env;
  EXPECT_TRUE(env.Empty());
  env.Set("env_vars", std::map<std::string, std::string>{{"A", "1"}});
  env.Set("count", 3);
  EXPECT_FALSE(env.Empty());
  EXPECT_TRUE(env.Contains("env_vars"));
  EXPECT_EQ((env.Get<std::map<std::string, std::string>>("env_vars")),
            (std::map<std::string, std::string>{{"A", "1"}}));
  EXPECT_EQ(env.Get<int>("count"), 3);
  EXPECT_EQ(env.GetJsonStr("env_vars"), R"({"A":"1"})");
  env.SetJsonStr("pip", R"(["requests"])");
  EXPECT_EQ(env.Get<std::vector<std::string>>("pip"), std::vector<std::string>{"requests"});
  EXPECT_TRUE(env.Remove("pip"));
  EXPECT_FALSE(env.Remove("pip"));
  EXPECT_FALSE(env.Contains("pip"));
  ray::RuntimeEnv back = ray::RuntimeEnv::Deserialize(env.Serialize());
  EXPECT_EQ(back.Get<int>("count"), 3);
  EXPECT_TRUE(env.Remove("env_vars"));
  EXPECT_TRUE(env.Remove("count"));
  EXPECT_TRUE(env.Empty());
}

TEST(RayRuntimeEnv, MissingOrMistypedFieldsAreRayRuntimeEnvExceptions) {
  ray::RuntimeEnv env;
  EXPECT_THROW(env.Get<int>("absent"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(env.GetJsonStr("absent"), ray::internal::RayRuntimeEnvException);
  env.Set("name", std::string("text"));
  EXPECT_THROW(env.Get<int>("name"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(env.SetJsonStr("bad", "{not json"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(ray::RuntimeEnv::Deserialize("[1]"), ray::internal::RayRuntimeEnvException);
}

TEST(RayRuntimeEnv, OnlyEnvVarsOfStringsAreTaken) {
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}});
  EXPECT_EQ(airt::internal::RuntimeEnvVars(env),
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  for (const char* field : {"working_dir", "pip", "conda", "py_modules"}) {
    ray::RuntimeEnv other = env;
    other.Set(field, std::string("x"));
    try {
      airt::internal::RuntimeEnvVars(other);
      ADD_FAILURE() << field << " was taken";
    } catch (const airt::UnimplementedError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
  ray::RuntimeEnv numbers;
  numbers.SetJsonStr("env_vars", R"({"A": 1})");
  EXPECT_THROW(airt::internal::RuntimeEnvVars(numbers), ray::internal::RayRuntimeEnvException);
  numbers.SetJsonStr("env_vars", R"(["A"])");
  EXPECT_THROW(airt::internal::RuntimeEnvVars(numbers), ray::internal::RayRuntimeEnvException);
}

TEST(RayHeadArgs, RayStartFlagsShapeTheLocalCluster) {
  airt::LocalClusterOptions options;
  options.num_cpus = 8;
  ASSERT_TRUE(airt::ApplyHeadArgs({"--num-cpus=2", "--num-gpus", "1",
                                   R"(--resources='{"x": 1, "y": 0.5}')",
                                   "--object-store-memory=100000000"},
                                  &options)
                  .ok());
  EXPECT_EQ(options.num_cpus, 2);
  EXPECT_EQ(options.num_gpus, 1);
  EXPECT_EQ(options.resources, (std::map<std::string, double>{{"x", 1}, {"y", 0.5}}));
  EXPECT_EQ(options.object_store_memory, 100000000u);
}

TEST(RayHeadArgs, BadFlagsAreInvalidArgumentsNamingThem) {
  const std::vector<std::vector<std::string>> bad = {
      {"--num-cpus=-1"},        {"--num-cpus=two"},      {"--num-gpus"},
      {"--resources={\"x\":"},  {"--resources=[1]"},     {"--resources={\"x\": \"a\"}"},
      {"--object-store-memory=0"}, {"--dashboard-port=8265"}, {"num-cpus=2"},
  };
  for (const std::vector<std::string>& args : bad) {
    airt::LocalClusterOptions options;
    airt::Status status = airt::ApplyHeadArgs(args, &options);
    EXPECT_EQ(status.code(), airt::Code::kInvalidArgument) << args[0];
    std::string flag = args[0].substr(0, args[0].find('='));
    EXPECT_NE(status.message().find(flag), std::string::npos) << status.message();
  }
}

}  // namespace
