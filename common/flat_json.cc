#include "common/flat_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <system_error>

namespace airt {
namespace {

std::string Column(size_t pos) { return "column " + std::to_string(pos + 1); }

// "\"custom\"", shortened when long, for messages.
std::string QuoteKey(std::string_view key) {
  constexpr size_t kMax = 40;
  if (key.size() <= kMax) return "\"" + std::string(key) + "\"";
  return "\"" + std::string(key.substr(0, kMax)) + "...\"";
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (Unicode Table 3-7: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view s) {
  auto byte = [&](size_t i) { return i < s.size() ? static_cast<uint8_t>(s[i]) : 0u; };
  auto in = [](unsigned b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  unsigned b0 = byte(0), b1 = byte(1);
  if (in(b0, 0xC2, 0xDF)) return in(b1, 0x80, 0xBF) ? 2 : 0;
  unsigned lo = 0x80, hi = 0xBF;
  size_t n = 0;
  if (b0 == 0xE0) {
    lo = 0xA0, n = 3;
  } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
    n = 3;
  } else if (b0 == 0xED) {
    hi = 0x9F, n = 3;
  } else if (b0 == 0xF0) {
    lo = 0x90, n = 4;
  } else if (in(b0, 0xF1, 0xF3)) {
    n = 4;
  } else if (b0 == 0xF4) {
    hi = 0x8F, n = 4;
  } else {
    return 0;
  }
  if (!in(b1, lo, hi)) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (!in(byte(i), 0x80, 0xBF)) return 0;
  }
  return n;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::vector<FlatJsonMember>> Object() {
    SkipSpace();
    if (!Eat('{')) return Expected("'{'");
    std::vector<FlatJsonMember> members;
    SkipSpace();
    if (Eat('}')) return Finish(std::move(members));
    for (;;) {
      SkipSpace();
      size_t key_pos = pos_;
      if (Peek() != '"') return Expected("a string key");
      AIRT_ASSIGN_OR_RETURN(std::string key, String());
      for (const FlatJsonMember& m : members) {
        if (m.key == key) {
          return InvalidArgument("duplicate key " + QuoteKey(key) + " at " + Column(key_pos));
        }
      }
      SkipSpace();
      if (!Eat(':')) return Expected("':' after key " + QuoteKey(key));
      SkipSpace();
      AIRT_ASSIGN_OR_RETURN(FlatJsonValue value, Value(key));
      members.push_back({std::move(key), std::move(value)});
      SkipSpace();
      if (Eat('}')) return Finish(std::move(members));
      if (!Eat(','))
        return Expected("',' or '}' after the value of " + QuoteKey(members.back().key));
    }
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool AtEnd() const { return pos_ >= text_.size(); }
  bool Eat(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  // What stands at `pos`: "end of input", "'x'", "'true'" for a word, or "byte 0xNN".
  std::string Found(size_t pos) const {
    if (pos >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[pos]);
    if (IsWordChar(static_cast<char>(c))) {
      size_t end = pos;
      while (end < text_.size() && end - pos < 16 && IsWordChar(text_[end])) ++end;
      return "'" + std::string(text_.substr(pos, end - pos)) + "'";
    }
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char hex[16];
    std::snprintf(hex, sizeof hex, "byte 0x%02X", c);
    return hex;
  }
  Status Expected(const std::string& what) const { return ExpectedAt(what, pos_); }
  Status ExpectedAt(const std::string& what, size_t pos) const {
    return InvalidArgument("expected " + what + " at " + Column(pos) + ", got " + Found(pos));
  }

  Result<std::vector<FlatJsonMember>> Finish(std::vector<FlatJsonMember> members) {
    SkipSpace();
    if (!AtEnd()) return Expected("end of input after the object");
    return members;
  }

  Result<FlatJsonValue> Value(const std::string& key) {
    char c = Peek();
    if (c == '"') {
      AIRT_ASSIGN_OR_RETURN(std::string s, String());
      return FlatJsonValue(std::move(s));
    }
    if (c == '-' || IsDigit(c)) {
      AIRT_ASSIGN_OR_RETURN(double d, Number());
      return FlatJsonValue(d);
    }
    std::string what = "a number or a string for key " + QuoteKey(key);
    if (c == '{' || c == '[') {
      return InvalidArgument(ExpectedAt(what, pos_).message() + " (values cannot be nested)");
    }
    return Expected(what);
  }

  Result<double> Number() {
    size_t start = pos_;
    auto malformed = [&](const std::string& why) {
      return InvalidArgument("malformed number at " + Column(start) + ": " + why + " at " +
                             Column(pos_) + ", got " + Found(pos_));
    };
    Eat('-');
    if (Eat('0')) {
      if (IsDigit(Peek())) return malformed("a leading zero must stand alone: expected '.'");
    } else if (IsDigit(Peek())) {
      while (IsDigit(Peek())) ++pos_;
    } else {
      return malformed("expected a digit");
    }
    if (Eat('.')) {
      if (!IsDigit(Peek())) return malformed("expected a digit after '.'");
      while (IsDigit(Peek())) ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!IsDigit(Peek())) return malformed("expected a digit in the exponent");
      while (IsDigit(Peek())) ++pos_;
    }
    std::string_view literal = text_.substr(start, pos_ - start);
    double value = 0;
    auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), value);
    if (ec == std::errc::result_out_of_range || !std::isfinite(value)) {
      return InvalidArgument("number " + std::string(literal) + " at " + Column(start) +
                             " is out of range");
    }
    if (ec != std::errc() || end != literal.data() + literal.size()) {
      return InvalidArgument("malformed number " + std::string(literal) + " at " + Column(start));
    }
    return value;
  }

  // Reads the 4 hex digits of a \u escape whose backslash is at `escape`.
  Result<uint32_t> Hex4(size_t escape) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = HexValue(Peek());
      if (AtEnd() || h < 0) {
        return InvalidArgument("expected 4 hex digits after \\u at " + Column(escape) + ", got " +
                               Found(pos_) + " at " + Column(pos_));
      }
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return v;
  }

  Result<std::string> String() {
    size_t start = pos_;
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (AtEnd()) {
        return InvalidArgument("unterminated string starting at " + Column(start) +
                               ": expected '\"', got end of input");
      }
      size_t at = pos_;
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) {
        return InvalidArgument("control character " + Found(at) + " in the string at " +
                               Column(at) + " (escape it)");
      }
      if (c >= 0x80) {
        size_t n = Utf8SequenceLength(text_.substr(pos_));
        if (n == 0) return InvalidArgument("invalid UTF-8 at " + Column(at) + ": " + Found(at));
        out.append(text_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      char e = Peek();
      ++pos_;
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          AIRT_ASSIGN_OR_RETURN(uint32_t cp, Hex4(at));
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return InvalidArgument("unpaired low surrogate \\u escape at " + Column(at));
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!(Eat('\\') && Eat('u'))) {
              return InvalidArgument("high surrogate \\u escape at " + Column(at) +
                                     " is not followed by a low surrogate \\u escape");
            }
            AIRT_ASSIGN_OR_RETURN(uint32_t low, Hex4(pos_ - 2));
            if (low < 0xDC00 || low > 0xDFFF) {
              return InvalidArgument("high surrogate \\u escape at " + Column(at) +
                                     " is not followed by a low surrogate \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (cp == 0) return InvalidArgument("\\u0000 at " + Column(at) + " is not allowed");
          AppendUtf8(cp, &out);
          break;
        }
        default:
          pos_ = at + 1;
          return InvalidArgument("invalid escape at " + Column(at) +
                                 ": expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u, got " +
                                 (AtEnd() ? "end of input" : "\\" + std::string(1, e)));
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<FlatJsonMember>> ParseFlatJson(std::string_view text) {
  return Parser(text).Object();
}

}  // namespace airt
