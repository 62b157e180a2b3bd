#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace c10d::inline v0::detail {

// Appends text as a JSON string literal (quotes, escapes, control characters as \u00XX): what the
// flight recorder's dumps and the launcher's error files write.
inline void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (unsigned char c : text) {
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

}  // namespace c10d::inline v0::detail
