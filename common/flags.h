// Command-line flags for airt's daemons and tools: `--name=value` or `--name value`, `--flag` for
// booleans, sizes with K/M/G/T suffixes (powers of 1024). Each flag binds to a caller's variable,
// whose value before Parse is the default.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace airt {

// "64M" -> 67108864. kInvalidArgument for anything else than digits and one optional suffix.
Result<uint64_t> ParseByteSize(std::string_view text);

class FlagSet {
 public:
  explicit FlagSet(std::string program) : program_(std::move(program)) {}

  void AddString(std::string name, std::string* value, std::string help);
  void AddUint64(std::string name, uint64_t* value, std::string help);
  void AddBytes(std::string name, uint64_t* value, std::string help);
  void AddBool(std::string name, bool* value, std::string help);

  // kInvalidArgument naming the flag for an unknown flag, a missing or bad value. `--help`
  // returns kCancelled (the caller prints Usage()).
  Status Parse(int argc, char** argv);
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool;
    bool* bool_value;
    std::function<Status(std::string_view)> set;
  };
  std::string program_;
  std::vector<Flag> flags_;
};

}  // namespace airt
