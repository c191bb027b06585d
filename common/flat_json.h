// A flat JSON object of string keys to number or string values, as Ray's CLI takes them:
//   --resources '{"custom": 2, "TPU": 1}'     --labels '{"accelerator_type": "A10"}'
// Strict RFC 8259 for what it accepts: no comments, no trailing commas, no NaN or Infinity, no
// single quotes, valid UTF-8, no duplicate keys. Nested objects, arrays, true, false and null are
// refused: a flag value is one level of names.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace airt {

// A number (always finite) or a string (UTF-8, escapes decoded).
using FlatJsonValue = std::variant<double, std::string>;

struct FlatJsonMember {
  std::string key;
  FlatJsonValue value;
};

// The members of `text` in document order. kInvalidArgument for anything else than one flat
// object (surrounding whitespace allowed); the message says what was expected and where, as a
// 1-based column (byte offset + 1) and what stood there instead, e.g.
//   "expected a string key at column 14, got '}'".
Result<std::vector<FlatJsonMember>> ParseFlatJson(std::string_view text);

}  // namespace airt
