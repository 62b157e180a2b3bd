// c10d/core/Settings.hpp's reader, over the table of c10d/core/Config.hpp.

#include "c10d/core/Settings.hpp"

#include <cstdlib>
#include <utility>

#include "c10d/core/Config.hpp"

namespace c10d::inline v1::config {

Settings::Settings(std::map<std::string, std::string> overrides)
    : overrides_(std::move(overrides)) {
  for (const auto& [name, value] : overrides_) {
    const Variable* found = find(name);
    C10D_CHECK(found != nullptr, InvalidArgument, "ProcessGroupOptions::config names '", name,
               "', which is not a c10d variable (see `c10d-config`)");
    C10D_CHECK(found->scope == Scope::Group, InvalidArgument, "ProcessGroupOptions::config: ", name,
               " is read once per process; set it in the environment");
    if (!value.empty()) check(*found, value, "ProcessGroupOptions::config");
  }
}

std::optional<std::string> Settings::given(std::string_view name) const {
  const Variable& v = variable(name);
  if (auto it = overrides_.find(std::string(name)); it != overrides_.end()) {
    if (it->second.empty()) return std::nullopt;
    return it->second;
  }
  for (std::string_view n : {v.name, v.alias}) {
    if (n.empty()) continue;
    const char* value = std::getenv(std::string(n).c_str());
    if (value != nullptr && *value != '\0') return std::string(value);
  }
  return std::nullopt;
}

std::string Settings::origin(std::string_view name) const {
  const Variable& v = variable(name);
  if (overrides_.count(std::string(name)) != 0) return "ProcessGroupOptions::config";
  const char* own = std::getenv(std::string(v.name).c_str());
  if ((own == nullptr || *own == '\0') && !v.alias.empty()) {
    return detail::concat("from ", v.alias);
  }
  return "environment";
}

std::string Settings::value(std::string_view name) const {
  const Variable& v = variable(name);
  std::optional<std::string> text = given(name);
  if (!text) return std::string(v.fallback);
  check(v, *text, origin(name));
  return *text;
}

std::optional<bool> Settings::flag(std::string_view name) const {
  const Variable& v = variable(name);
  C10D_CHECK(v.type == Type::Choice && v.choices == "0|1", Error, "internal: ", name,
             " is not a 0/1 variable");
  std::string text = value(name);
  if (text.empty()) return std::nullopt;
  return text == "1";
}

int64_t Settings::integer(std::string_view name) const {
  const Variable& v = variable(name);
  C10D_CHECK(v.type == Type::Integer, Error, "internal: ", name, " is not an integer variable");
  std::optional<int64_t> parsed = parseInteger(value(name), v.min, v.max);  // value() checked it
  C10D_CHECK(parsed.has_value(), Error, "internal: ", name, " is unset and has no default");
  return *parsed;
}

void Settings::checkAll() const {
  for (const Variable& v : kVariables) value(v.name);
}

}  // namespace c10d::inline v1::config
