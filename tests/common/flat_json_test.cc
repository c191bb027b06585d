#include "common/flat_json.h"

#include <gtest/gtest.h>

namespace airt {
namespace {

// The error message of parsing `text`, or "parsed" when it parsed.
std::string ErrorOf(std::string_view text) {
  auto parsed = ParseFlatJson(text);
  if (parsed.ok()) return "parsed";
  EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << text;
  return parsed.status().message();
}

TEST(FlatJson, ParsesNumbersAndStringsInDocumentOrder) {
  auto parsed = ParseFlatJson(R"({"custom": 2, "TPU": 1.5, "accelerator_type": "A10", "e": -2e3})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[0].key, "custom");
  EXPECT_EQ(std::get<double>((*parsed)[0].value), 2.0);
  EXPECT_EQ((*parsed)[1].key, "TPU");
  EXPECT_EQ(std::get<double>((*parsed)[1].value), 1.5);
  EXPECT_EQ((*parsed)[2].key, "accelerator_type");
  EXPECT_EQ(std::get<std::string>((*parsed)[2].value), "A10");
  EXPECT_EQ(std::get<double>((*parsed)[3].value), -2000.0);
}

TEST(FlatJson, AcceptsEmptyObjectAndSurroundingWhitespace) {
  auto empty = ParseFlatJson(" \t{ \n } \r\n");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
  auto spaced = ParseFlatJson("{\n  \"a\" :\t0 ,\"b\":\"\"\n}");
  ASSERT_TRUE(spaced.ok()) << spaced.status().ToString();
  ASSERT_EQ(spaced->size(), 2u);
  EXPECT_EQ(std::get<double>((*spaced)[0].value), 0.0);
  EXPECT_EQ(std::get<std::string>((*spaced)[1].value), "");
}

TEST(FlatJson, DecodesEscapesAndUnicode) {
  auto parsed = ParseFlatJson(
      R"({"q\"b\\s\/": "\b\f\n\r\t", "u": "\u00e9\u4e2d\ud83d\ude00", "raw": "é中😀"})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)[0].key, "q\"b\\s/");
  EXPECT_EQ(std::get<std::string>((*parsed)[0].value), "\b\f\n\r\t");
  EXPECT_EQ(std::get<std::string>((*parsed)[1].value), "é中😀");
  EXPECT_EQ(std::get<std::string>((*parsed)[2].value), "é中😀");
}

TEST(FlatJson, RejectsTrailingCommaNamingTheColumn) {
  EXPECT_EQ(ErrorOf(R"({"custom": 2,})"), "expected a string key at column 14, got '}'");
  EXPECT_EQ(ErrorOf(R"({"a": 1 "b": 2})"),
            "expected ',' or '}' after the value of \"a\" at column 9, got '\"'");
  EXPECT_EQ(ErrorOf(R"({"a" 1})"), "expected ':' after key \"a\" at column 6, got '1'");
}

TEST(FlatJson, RejectsAnythingButOneObject) {
  EXPECT_EQ(ErrorOf(""), "expected '{' at column 1, got end of input");
  EXPECT_EQ(ErrorOf("  [1]"), "expected '{' at column 3, got '['");
  EXPECT_EQ(ErrorOf(R"({"a": 1} x)"),
            "expected end of input after the object at column 10, got 'x'");
  EXPECT_EQ(ErrorOf(R"({"a": 1)"),
            "expected ',' or '}' after the value of \"a\" at column 8, got end of input");
  EXPECT_EQ(ErrorOf("{'a': 1}"), "expected a string key at column 2, got '''");
  EXPECT_EQ(ErrorOf("{a: 1}"), "expected a string key at column 2, got 'a'");
}

TEST(FlatJson, RejectsNestedValuesAndLiterals) {
  EXPECT_EQ(ErrorOf(R"({"a": {"b": 1}})"),
            "expected a number or a string for key \"a\" at column 7, got '{' (values cannot be "
            "nested)");
  EXPECT_EQ(ErrorOf(R"({"a": [1]})"),
            "expected a number or a string for key \"a\" at column 7, got '[' (values cannot be "
            "nested)");
  EXPECT_EQ(ErrorOf(R"({"a": true})"),
            "expected a number or a string for key \"a\" at column 7, got 'true'");
  EXPECT_EQ(ErrorOf(R"({"a": null})"),
            "expected a number or a string for key \"a\" at column 7, got 'null'");
  EXPECT_EQ(ErrorOf(R"({"a": NaN})"),
            "expected a number or a string for key \"a\" at column 7, got 'NaN'");
  EXPECT_EQ(ErrorOf(R"({"a": Infinity})"),
            "expected a number or a string for key \"a\" at column 7, got 'Infinity'");
}

TEST(FlatJson, RejectsDuplicateKeys) {
  EXPECT_EQ(ErrorOf(R"({"GPU": 1, "GPU": 2})"), "duplicate key \"GPU\" at column 12");
}

TEST(FlatJson, RejectsMalformedNumbers) {
  EXPECT_EQ(ErrorOf(R"({"a": 01})"),
            "malformed number at column 7: a leading zero must stand alone: expected '.' at column "
            "8, got '1'");
  EXPECT_EQ(ErrorOf(R"({"a": 1.})"),
            "malformed number at column 7: expected a digit after '.' at column 9, got '}'");
  EXPECT_EQ(ErrorOf(R"({"a": .5})"),
            "expected a number or a string for key \"a\" at column 7, got '.'");
  EXPECT_EQ(ErrorOf(R"({"a": +1})"),
            "expected a number or a string for key \"a\" at column 7, got '+'");
  EXPECT_EQ(ErrorOf(R"({"a": -})"),
            "malformed number at column 7: expected a digit at column 8, got '}'");
  EXPECT_EQ(ErrorOf(R"({"a": 1e})"),
            "malformed number at column 7: expected a digit in the exponent at column 9, got '}'");
  EXPECT_EQ(ErrorOf(R"({"a": 1e999})"), "number 1e999 at column 7 is out of range");
  EXPECT_EQ(ErrorOf(R"({"a": 0x10})"),
            "expected ',' or '}' after the value of \"a\" at column 8, got 'x10'");
}

TEST(FlatJson, RejectsUnterminatedStringsAndControlCharacters) {
  EXPECT_EQ(ErrorOf(R"({"a": "A10)"),
            "unterminated string starting at column 7: expected '\"', got end of input");
  EXPECT_EQ(ErrorOf("{\"a\": \"x\ty\"}"),
            "control character byte 0x09 in the string at column 9 (escape it)");
  EXPECT_EQ(
      ErrorOf(R"({"a": "\x"})"),
      "invalid escape at column 8: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u, got "
      "\\x");
  EXPECT_EQ(ErrorOf(R"({"a": "\u12"})"),
            "expected 4 hex digits after \\u at column 8, got '\"' at column 12");
}

TEST(FlatJson, RejectsInvalidUtf8AndLoneSurrogates) {
  EXPECT_EQ(ErrorOf("{\"a\": \"\xC3\"}"), "invalid UTF-8 at column 8: byte 0xC3");
  EXPECT_EQ(ErrorOf("{\"a\": \"\xC0\xAF\"}"), "invalid UTF-8 at column 8: byte 0xC0");  // overlong
  EXPECT_EQ(ErrorOf("{\"a\": \"\xED\xA0\x80\"}"), "invalid UTF-8 at column 8: byte 0xED");
  EXPECT_EQ(ErrorOf(R"({"a": "\udc00"})"), "unpaired low surrogate \\u escape at column 8");
  EXPECT_EQ(ErrorOf(R"({"a": "\ud83dx"})"),
            "high surrogate \\u escape at column 8 is not followed by a low surrogate \\u escape");
  EXPECT_EQ(ErrorOf(R"({"a": "\u0000"})"), "\\u0000 at column 8 is not allowed");
}

}  // namespace
}  // namespace airt
