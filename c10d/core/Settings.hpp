#pragma once

/// \file
/// Settings, the reader of one process group's C10D_* variables (its overrides over the
/// environment), checked against the table of c10d/core/Config.hpp.
///
/// The C10D_* variables of one process group (docs/configuration.md): ProcessGroupOptions::config
/// over the environment, read with one policy. Unset or empty means the variable's default; any
/// other value must be one the table (c10d/core/Config.hpp) accepts, or the read throws
/// InvalidArgument naming the variable, where its value came from, the value and what is accepted.
/// A name the table does not have is a bug of the caller's: Error.
///
/// Thread-safe: immutable after construction; reading the environment while another thread calls
/// setenv is the caller's race, as with getenv.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace c10d::inline v1::config {

/// The C10D_* variables of one process group: ProcessGroupOptions::config's overrides over the
/// environment, each read and checked against its Variable in kVariables. Every getter throws
/// Error when name is not in the table (a bug of the caller's), and the checked ones
/// InvalidArgument naming the variable, where its value came from, the value and what is
/// accepted. Thread-safe: immutable after construction.
class Settings {
 public:
  /// The environment alone.
  Settings() = default;
  /// overrides: variable name -> value, for one group. Throws InvalidArgument for a name not in
  /// the table, a variable read once per process (only the environment sets those) or a bad value.
  /// \param overrides Variable name -> value; an empty value stands for the variable's default,
  ///        hiding the environment's value too.
  /// \throws InvalidArgument for a name not in kVariables, one of Scope::Process, or a non-empty
  ///         value the variable does not accept.
  explicit Settings(std::map<std::string, std::string> overrides);

  /// The value as given, unchecked: this group's override, else the environment, else the alias;
  /// nullopt when none is set or the one that is set is empty.
  /// \param name A variable of kVariables, e.g. "C10D_SOCKET_IFNAME".
  /// \return The raw value, or nullopt.
  /// \throws Error when name is not in the table.
  std::optional<std::string> given(std::string_view name) const;
  /// Where given(name) comes from, for messages: "environment", "from GLOO_SOCKET_IFNAME", ...
  /// \param name A variable of kVariables.
  /// \return "ProcessGroupOptions::config", "environment", or "from " and the alias's name.
  /// \throws Error when name is not in the table.
  std::string origin(std::string_view name) const;
  /// The checked value, or the table's fallback when unset (empty when it has none).
  /// \param name A variable of kVariables.
  /// \return The value as given, or Variable::fallback.
  /// \throws InvalidArgument when the value given is not one the variable accepts.
  /// \throws Error when name is not in the table.
  std::string value(std::string_view name) const;
  /// A 0/1 variable as a bool; nullopt when unset and the table has no fallback.
  /// \param name A variable of kVariables whose choices are exactly "0|1".
  /// \return true for "1", false for "0", or nullopt.
  /// \throws InvalidArgument when the value given is neither "0" nor "1".
  /// \throws Error when name is not in the table or is not a 0/1 variable.
  std::optional<bool> flag(std::string_view name) const;
  /// An integer variable's checked value.
  /// \param name A variable of kVariables of Type::Integer (each has a fallback).
  /// \return The value given, or the fallback, within [Variable::min, Variable::max].
  /// \throws InvalidArgument when the value given is not an integer in that range.
  /// \throws Error when name is not in the table or is not an Integer variable.
  int64_t integer(std::string_view name) const;
  /// Checks every variable that is set; the first bad one throws as value() would.
  /// \throws InvalidArgument for the first variable, in the table's order, whose value is bad.
  void checkAll() const;

 private:
  std::map<std::string, std::string> overrides_;
};

}  // namespace c10d::inline v1::config
