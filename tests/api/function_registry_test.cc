// The function registry, AIRT_REMOTE/AIRT_FUNC and msgpack serialization, in one process.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/api/test_types.h"

namespace {

using airt::ErrorKind;
using airt::internal::Deserialize;
using airt::internal::FunctionRegistry;
using airt::internal::InvokeOutcome;
using airt::internal::SerializationError;
using airt::internal::Serialize;
using airt::testing::Point;

int Add(int a, int b) { return a + b; }
std::string Add(std::string a, std::string b) { return a + "+" + b; }  // NOLINT(performance-*)
double Add(double a, double b, double c) { return a + b + c; }

size_t TotalLength(const std::vector<std::string>& parts, const std::string& separator) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size();
  return parts.empty() ? 0 : n + separator.size() * (parts.size() - 1);
}

void Increment(int& value) { ++value; }  // a non-const reference gets a deserialized copy

int Throws(int) { throw std::invalid_argument("no thanks"); }
int ThrowsInt() { throw 42; }

int g_void_calls = 0;
void Touch() { ++g_void_calls; }

namespace geometry {
Point Mirror(Point p) {
  std::swap(p.x, p.y);
  return p;
}
}  // namespace geometry

AIRT_REMOTE(AIRT_FUNC(Add, int, int), TotalLength, Increment, Throws, ThrowsInt, Touch);
AIRT_REMOTE(geometry::Mirror);

// Invokes `name` from the global registry with `args` (each serialized already).
InvokeOutcome Call(const std::string& name, const std::vector<std::string>& args) {
  const airt::internal::Invoker* invoker = FunctionRegistry::Global().Find(name);
  EXPECT_NE(invoker, nullptr) << name;
  if (invoker == nullptr) return {};
  std::vector<std::string_view> views(args.begin(), args.end());
  return (*invoker)(views);
}

TEST(Serialization, RoundTripsNumbersStringsAndContainers) {
  EXPECT_EQ(Deserialize<int>(Serialize(-42)), -42);
  EXPECT_EQ(Deserialize<uint64_t>(Serialize(uint64_t{1} << 60)), uint64_t{1} << 60);
  EXPECT_DOUBLE_EQ(Deserialize<double>(Serialize(2.5)), 2.5);
  EXPECT_EQ(Deserialize<bool>(Serialize(true)), true);
  EXPECT_EQ(Deserialize<std::string>(Serialize(std::string("h\0i", 3))), std::string("h\0i", 3));
  std::vector<int> v{1, 2, 3};
  EXPECT_EQ(Deserialize<std::vector<int>>(Serialize(v)), v);
  std::map<std::string, std::vector<double>> m{{"a", {1.5}}, {"b", {}}};
  EXPECT_EQ((Deserialize<std::map<std::string, std::vector<double>>>(Serialize(m))), m);
  std::vector<uint8_t> bytes{0, 255, 7};
  EXPECT_EQ(Deserialize<std::vector<uint8_t>>(Serialize(bytes)), bytes);
  EXPECT_EQ(Deserialize<std::optional<int>>(Serialize(std::optional<int>())), std::nullopt);
}

TEST(Serialization, RoundTripsMsgpackDefineStruct) {
  Point p{1.5, -2, "p", {"a", "b"}};
  EXPECT_EQ(Deserialize<Point>(Serialize(p)), p);
}

TEST(Serialization, ThrowsWhenBytesAreMalformedTruncatedOrLeftOver) {
  std::string good = Serialize(std::string("hello"));
  EXPECT_THROW(Deserialize<std::string>(good.substr(0, 3)), SerializationError);
  EXPECT_THROW(Deserialize<std::string>(""), SerializationError);
  EXPECT_THROW(Deserialize<std::string>(good + good), SerializationError);
  EXPECT_THROW(Deserialize<int>(std::string("\xc1", 1)), SerializationError);  // never used byte
}

TEST(Serialization, ThrowsNamingBothTypesWhenTypesDiffer) {
  try {
    Deserialize<int>(Serialize(std::string("x")));
    FAIL() << "no exception";
  } catch (const SerializationError& e) {
    EXPECT_STREQ(e.what(), "expected int, got a msgpack str");
  }
  EXPECT_THROW(Deserialize<int>(Serialize(int64_t{1} << 40)), SerializationError);
  EXPECT_THROW(Deserialize<uint32_t>(Serialize(-1)), SerializationError);
  EXPECT_THROW(Deserialize<Point>(Serialize(7)), SerializationError);
}

TEST(RemoteNames, ParsesPlainQualifiedAddressAndAirtFuncEntries) {
  using airt::internal::ParseRemoteNames;
  EXPECT_EQ(ParseRemoteNames("f"), (std::vector<std::string>{"f"}));
  EXPECT_EQ(ParseRemoteNames(" f , ns::g,&h, ::top"),
            (std::vector<std::string>{"f", "ns::g", "h", "top"}));
  EXPECT_EQ(ParseRemoteNames("AIRT_FUNC(Add, int, int), AIRT_FUNC( ns::Sub , std::vector<int>)"),
            (std::vector<std::string>{"Add", "ns::Sub"}));
  EXPECT_EQ(ParseRemoteNames("AIRT_FUNC(Zero)"), (std::vector<std::string>{"Zero"}));
  EXPECT_TRUE(ParseRemoteNames("f,,g").empty());
  EXPECT_TRUE(ParseRemoteNames("f<int, int>").empty());
  EXPECT_TRUE(ParseRemoteNames("AIRT_FUNC(f, int").empty());
}

TEST(FunctionRegistry, InvokesFunctionRegisteredWithAirtRemote) {
  InvokeOutcome out = Call("TotalLength", {Serialize(std::vector<std::string>{"ab", "cde"}),
                                           Serialize(std::string(", "))});
  ASSERT_TRUE(out.ok()) << out.error;
  ASSERT_EQ(out.returns.size(), 1u);
  EXPECT_EQ(Deserialize<size_t>(out.returns[0]), 7u);
}

TEST(FunctionRegistry, RegistersQualifiedNameAndStructs) {
  InvokeOutcome out = Call("geometry::Mirror", {Serialize(Point{1, 2, "m", {}})});
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_EQ(Deserialize<Point>(out.returns.at(0)), (Point{2, 1, "m", {}}));
}

TEST(FunctionRegistry, PicksOverloadNamedWithAirtFunc) {
  InvokeOutcome out = Call("Add", {Serialize(2), Serialize(3)});
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_EQ(Deserialize<int>(out.returns.at(0)), 5);

  // Another overload under another registry.
  FunctionRegistry registry;
  ASSERT_TRUE(airt::internal::RegisterRemoteFunctions(registry,
                                                      "AIRT_FUNC(Add, std::string, std::string)",
                                                      AIRT_FUNC(Add, std::string, std::string)));
  std::vector<std::string> args{Serialize(std::string("a")), Serialize(std::string("b"))};
  std::vector<std::string_view> views(args.begin(), args.end());
  InvokeOutcome strings = (*registry.Find("Add"))(views);
  ASSERT_TRUE(strings.ok()) << strings.error;
  EXPECT_EQ(Deserialize<std::string>(strings.returns.at(0)), "a+b");
  auto three = AIRT_FUNC(Add, double, double, double);
  static_assert(std::is_same_v<decltype(three), double (*)(double, double, double)>);
  EXPECT_DOUBLE_EQ(three(1, 2, 3.5), 6.5);
}

TEST(FunctionRegistry, ReturnsBadArgumentsNamingFunctionAndIndexWhenTypeDiffers) {
  InvokeOutcome out = Call("Add", {Serialize(2), Serialize(std::string("three"))});
  EXPECT_EQ(out.failure, ErrorKind::kBadArguments);
  EXPECT_TRUE(out.returns.empty());
  EXPECT_EQ(out.error,
            "bad arguments for 'Add': argument 1 (0-based, of 2): expected int, got a msgpack str");
}

TEST(FunctionRegistry, ReturnsBadArgumentsWhenArgumentCountDiffers) {
  InvokeOutcome out = Call("Add", {Serialize(2)});
  EXPECT_EQ(out.failure, ErrorKind::kBadArguments);
  EXPECT_EQ(out.error, "bad arguments for 'Add': takes 2 arguments, got 1");
}

TEST(FunctionRegistry, ReturnsBadArgumentsWhenBytesAreMalformedOrOutOfRange) {
  InvokeOutcome garbage = Call("Add", {std::string("\xc1\xc1", 2), Serialize(1)});
  EXPECT_EQ(garbage.failure, ErrorKind::kBadArguments);
  EXPECT_NE(garbage.error.find("argument 0"), std::string::npos) << garbage.error;
  InvokeOutcome overflow = Call("Add", {Serialize(1), Serialize(int64_t{1} << 40)});
  EXPECT_EQ(overflow.failure, ErrorKind::kBadArguments);
  EXPECT_NE(overflow.error.find("argument 1"), std::string::npos) << overflow.error;
  InvokeOutcome nested = Call("TotalLength", {Serialize(std::vector<int>{1}), Serialize("")});
  EXPECT_EQ(nested.failure, ErrorKind::kBadArguments);
  EXPECT_NE(nested.error.find("argument 0"), std::string::npos) << nested.error;
}

TEST(FunctionRegistry, PassesDeserializedCopyToReferenceParameter) {
  InvokeOutcome out = Call("Increment", {Serialize(1)});
  EXPECT_TRUE(out.ok()) << out.error;
  EXPECT_TRUE(out.returns.empty());
}

TEST(FunctionRegistry, ReturnsUserExceptionWithWhatWhenFunctionThrows) {
  InvokeOutcome out = Call("Throws", {Serialize(1)});
  EXPECT_EQ(out.failure, ErrorKind::kUserException);
  EXPECT_EQ(out.error, "no thanks");
  EXPECT_EQ(out.data, "no thanks");  // a C++ exception travels as its what()
  InvokeOutcome other = Call("ThrowsInt", {});
  EXPECT_EQ(other.failure, ErrorKind::kUserException);
  EXPECT_EQ(other.error, "an exception not derived from std::exception");
}

TEST(FunctionRegistry, ReturnsNothingForVoidFunction) {
  int before = g_void_calls;
  InvokeOutcome out = Call("Touch", {});
  EXPECT_TRUE(out.ok()) << out.error;
  EXPECT_TRUE(out.returns.empty());
  EXPECT_EQ(g_void_calls, before + 1);
}

TEST(FunctionRegistry, KeepsFirstAndRecordsProblemWhenNameRegisteredTwice) {
  FunctionRegistry registry;
  EXPECT_TRUE(airt::internal::RegisterRemoteFunctions(registry, "Touch", Touch));
  EXPECT_FALSE(airt::internal::RegisterRemoteFunctions(registry, "Touch", ThrowsInt));
  std::vector<std::string> problems = registry.TakeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'Touch' is registered twice"), std::string::npos) << problems[0];
  EXPECT_TRUE(registry.TakeProblems().empty());
  InvokeOutcome out = (*registry.Find("Touch"))({});
  EXPECT_TRUE(out.ok());  // still the first one
}

TEST(FunctionRegistry, RecordsProblemWhenNamesCannotBeRead) {
  FunctionRegistry registry;
  EXPECT_FALSE(airt::internal::RegisterRemoteFunctions(registry, "Touch,,", Touch));
  EXPECT_EQ(registry.TakeProblems().size(), 1u);
  EXPECT_TRUE(registry.Names().empty());
}

TEST(FunctionRegistry, FindReturnsNullWhenNameUnknown) {
  EXPECT_EQ(FunctionRegistry::Global().Find("NoSuchFunction"), nullptr);
  std::vector<std::string> names = FunctionRegistry::Global().Names();
  EXPECT_NE(std::find(names.begin(), names.end(), "geometry::Mirror"), names.end());
}

}  // namespace
