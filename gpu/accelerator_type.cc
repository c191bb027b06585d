#include "gpu/accelerator_type.h"

#include <cctype>
#include <vector>

namespace airt {
namespace {

std::string Upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Whether `token` is a word of `words` (split on spaces and '-').
bool HasWord(const std::vector<std::string>& words, std::string_view token) {
  for (const std::string& w : words) {
    if (w == token) return true;
  }
  return false;
}

}  // namespace

std::string AcceleratorTypeFromName(std::string_view name) {
  std::string upper = Upper(name);
  std::vector<std::string> words;
  std::string word;
  for (char c : upper + " ") {
    if (c == ' ' || c == '-' || c == '_') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  // Most specific first: "A10G" before "A10", "L40S" before "L40", "H100" before "H10".
  static const char* const kFamilies[] = {
      "GB200", "B200", "B100", "H200", "H100", "H800", "H20", "GH200", "A100", "A800", "A10G",
      "A10",   "A30",  "A40",  "A16",  "A2",   "L40S", "L40", "L4",    "V100", "T4",   "P100",
      "P4",    "K80"};
  for (const char* family : kFamilies) {
    if (HasWord(words, family)) return family;
  }
  std::string out;
  for (char c : std::string(name)) {
    if (c == ' ') c = '-';
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
        c == ':') {
      out += c;
    }
  }
  return out;
}

double ExpectedBandwidthGbps(std::string_view type, uint64_t total_memory) {
  // Peak memory bandwidth as published; a device copy reaches most of it.
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  if (type == "B200") return 8000;
  if (type == "H200") return 4800;
  if (type == "H100") return total_memory > 90 * kGiB ? 3900 : 3350;
  if (type == "A100") return total_memory > 50 * kGiB ? 2039 : 1555;
  if (type == "A10" || type == "A10G") return 600;
  if (type == "L40S" || type == "L40") return 864;
  if (type == "L4") return 300;
  if (type == "V100") return 900;
  if (type == "T4") return 320;
  return 0;
}

}  // namespace airt
