#pragma once

// Private to c10d/elastic: how its messages list process ids ("0, 2, 3"; "none" when empty).

#include <string>
#include <vector>

namespace c10d::inline v1::elastic {

inline std::string idList(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ", ") + std::to_string(id);
  return text.empty() ? "none" : text;
}

}  // namespace c10d::inline v1::elastic
