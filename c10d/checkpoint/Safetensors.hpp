#pragma once

// Private to c10d/checkpoint (not installed): the safetensors layout every data file of a
// checkpoint (and consolidate's output) has: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and data_offsets (from the end of the header, back to
// back), padded with spaces so that the data starts 8-byte aligned, then the data.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1::checkpoint::detail {

struct SafetensorsEntry {
  std::string key;
  ScalarType dtype;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

// The file's first bytes (length and header) for entries, in that order; entry i's data then
// starts at the returned size plus the bytes of the entries before it.
std::string safetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata);

}  // namespace c10d::inline v1::checkpoint::detail
