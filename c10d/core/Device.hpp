#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace c10d::inline v1 {

enum class DeviceType : uint8_t { CPU, CUDA };

/// Where a tensor's memory lives. CPU has no index; CUDA devices are numbered from 0.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = -1;  ///< -1 for CPU, >= 0 for CUDA

  static Device cpu() { return Device{}; }
  static Device cuda(int index);

  /// Parses "cpu", "cuda" (device 0) and "cuda:N". Throws InvalidArgument otherwise.
  static Device parse(std::string_view text);

  bool isCPU() const { return type == DeviceType::CPU; }
  bool isCUDA() const { return type == DeviceType::CUDA; }
  std::string str() const;  ///< "cpu", "cuda:1"

  friend bool operator==(const Device&, const Device&) = default;
};

std::string_view name(DeviceType type);  ///< "cpu", "cuda"
std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace c10d::inline v1
