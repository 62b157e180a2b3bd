#pragma once

// The C10D_* variables of one process group (docs/configuration.md): ProcessGroupOptions::config
// over the environment, read with one policy. Unset or empty means the variable's default; any
// other value must be one the table (c10d/core/Config.hpp) accepts, or the read throws
// InvalidArgument naming the variable, where its value came from, the value and what is accepted.
// A name the table does not have is a bug of the caller's: Error.
//
// Thread-safe: immutable after construction; reading the environment while another thread calls
// setenv is the caller's race, as with getenv.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace c10d::inline v1::config {

class Settings {
 public:
  /// The environment alone.
  Settings() = default;
  /// overrides: variable name -> value, for one group. Throws InvalidArgument for a name not in
  /// the table, a variable read once per process (only the environment sets those) or a bad value.
  explicit Settings(std::map<std::string, std::string> overrides);

  /// The value as given, unchecked: this group's override, else the environment, else the alias;
  /// nullopt when none is set or the one that is set is empty.
  std::optional<std::string> given(std::string_view name) const;
  /// Where given(name) comes from, for messages: "environment", "from GLOO_SOCKET_IFNAME", ...
  std::string origin(std::string_view name) const;
  /// The checked value, or the table's fallback when unset (empty when it has none).
  std::string value(std::string_view name) const;
  /// A 0/1 variable as a bool; nullopt when unset and the table has no fallback.
  std::optional<bool> flag(std::string_view name) const;
  /// An integer variable's checked value.
  int64_t integer(std::string_view name) const;
  /// Checks every variable that is set; the first bad one throws as value() would.
  void checkAll() const;

 private:
  std::map<std::string, std::string> overrides_;
};

}  // namespace c10d::inline v1::config
