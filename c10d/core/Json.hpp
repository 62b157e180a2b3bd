#pragma once

/// \file
/// Internal: writing and reading JSON string literals (escapes, UTF-8 checks).

#include <cstdio>
#include <string>
#include <string_view>

namespace c10d::inline v1::detail {

/// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
/// surrogates, nothing above U+10FFFF), or 0.
inline size_t utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  if (lead < 0xC2 || lead > 0xF4 || i + length > text.size()) return 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range, narrower after some leads
  if (lead == 0xE0) low = 0xA0;
  if (lead == 0xED) high = 0x9F;
  if (lead == 0xF0) low = 0x90;
  if (lead == 0xF4) high = 0x8F;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

/// Appends text as a JSON string literal (quotes, escapes, control characters as \u00XX, bytes
/// that are not UTF-8 as U+FFFD, since a JSON reader refuses the whole file over one): what the
/// flight recorder's dumps, the fusion timeline and the launcher's error files write.
inline void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t length = utf8SequenceLength(text, i);
      if (length == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.substr(i, length));
        i += length - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

/// The JSON string literal starting at json[at] (its opening quote) decoded, the inverse of
/// appendJsonString; escapes of code points beyond ASCII become '?'. A literal cut short ends the
/// text where the input ends.
inline std::string readJsonString(std::string_view json, size_t at) {
  std::string text;
  for (size_t i = at + 1; i < json.size() && json[i] != '"'; ++i) {
    if (json[i] != '\\' || i + 1 >= json.size()) {
      text += json[i];
      continue;
    }
    const char escaped = json[++i];
    switch (escaped) {
      case 'b':
        text += '\b';
        break;
      case 'f':
        text += '\f';
        break;
      case 'n':
        text += '\n';
        break;
      case 'r':
        text += '\r';
        break;
      case 't':
        text += '\t';
        break;
      case 'u': {
        unsigned value = 0;
        size_t digits = 0;
        for (; digits < 4 && i + 1 < json.size(); ++digits) {
          const char c = json[i + 1];
          const int digit = c >= '0' && c <= '9'   ? c - '0'
                            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                   : -1;
          if (digit < 0) break;
          value = value * 16 + static_cast<unsigned>(digit);
          ++i;
        }
        text += digits == 4 && value < 0x80 ? static_cast<char>(value) : '?';
        break;
      }
      default:  // \" \\ \/
        text += escaped;
    }
  }
  return text;
}

}  // namespace c10d::inline v1::detail
