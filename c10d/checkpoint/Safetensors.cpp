#include "c10d/checkpoint/Safetensors.hpp"

#include <nlohmann/json.hpp>

#include "c10d/checkpoint/Metadata.hpp"

namespace c10d::inline v1::checkpoint::detail {

std::string safetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    header[e.key] = {{"dtype", safetensorsDtype(e.dtype)},
                     {"shape", e.shape},
                     {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace c10d::inline v1::checkpoint::detail
