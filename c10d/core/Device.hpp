#pragma once

/// \file
/// Device: where a tensor's memory lives (the CPU or a numbered CUDA device).

#include <ostream>
#include <string>
#include <string_view>

namespace c10d::inline v1 {

/// The kind of memory a Device names.
enum class DeviceType : uint8_t { CPU, /**< host memory */ CUDA /**< a CUDA device's memory */ };

/// Where a tensor's memory lives. CPU has no index; CUDA devices are numbered from 0.
struct Device {
  DeviceType type = DeviceType::CPU;  ///< CPU or CUDA
  int index = -1;  ///< -1 for CPU, >= 0 for CUDA

  /// \return The CPU device (index -1).
  static Device cpu() { return Device{}; }
  /// \param index The CUDA device's number, >= 0 (not checked against the devices present).
  /// \return The device cuda:index.
  /// \throws InvalidArgument when index is negative.
  static Device cuda(int index);

  /// Parses "cpu", "cuda" (device 0) and "cuda:N". Throws InvalidArgument otherwise.
  /// \param text The device's name, as str() writes it (or "cuda" alone).
  /// \return The device text names.
  /// \throws InvalidArgument for any other text.
  static Device parse(std::string_view text);

  /// \return Whether this is the CPU.
  bool isCPU() const { return type == DeviceType::CPU; }
  /// \return Whether this is a CUDA device.
  bool isCUDA() const { return type == DeviceType::CUDA; }
  /// \return The device's name, which parse() reads back.
  std::string str() const;  ///< "cpu", "cuda:1"

  /// \return Whether both name the same device: same type and index.
  friend bool operator==(const Device&, const Device&) = default;
};

/// \param type The device type.
/// \return Its lower-case name, without an index.
std::string_view name(DeviceType type);  ///< "cpu", "cuda"
/// Writes device.str() to out.
/// \param out The stream to write to.
/// \param device The device to write.
/// \return out.
std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace c10d::inline v1
