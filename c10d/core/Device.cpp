#include "c10d/core/Device.hpp"

#include <charconv>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

Device Device::cuda(int index) {
  C10D_CHECK(index >= 0, InvalidArgument, "CUDA device index must be >= 0, got ", index);
  return Device{DeviceType::CUDA, index};
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view digits = text.substr(kPrefix.size());
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) {
      return cuda(index);
    }
  }
  C10D_THROW(InvalidArgument, "cannot parse device '", text, "'; expected cpu, cuda or cuda:N");
}

std::string Device::str() const {
  return isCPU() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::string_view name(DeviceType type) {
  return type == DeviceType::CPU ? "cpu" : "cuda";
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << device.str();
}

}  // namespace c10d::inline v1
