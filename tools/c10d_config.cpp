// c10d-config: what c10d reads from the environment.
//
//   c10d-config              every variable: its value here (or the default), checked; exits 1
//                            when one is refused, naming it, as a process group would
//   c10d-config --markdown   docs/configuration.md's table of variables
//                            (tests/integration/repo/config_table_test.sh keeps the two equal)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "c10d/core/Config.hpp"

namespace config = c10d::config;

int main(int argc, char** argv) {
  CLI::App app{"Lists the environment variables c10d reads, checked against their accepted values"};
  bool markdown = false;
  app.add_flag("--markdown", markdown, "print docs/configuration.md's table of variables and exit");
  CLI11_PARSE(app, argc, argv);
  if (markdown) {
    std::fputs(config::markdownTable().c_str(), stdout);
    return 0;
  }
  const config::Settings settings;
  int refused = 0;
  for (const config::Variable& v : config::kVariables) {
    std::optional<std::string> given = settings.given(v.name);
    std::string shown;
    try {
      std::string value = settings.value(v.name);
      std::string byDefault = !value.empty()           ? value
                              : !v.defaultText.empty() ? std::string(v.defaultText)
                                                       : std::string("unset");
      shown = !given     ? "(default) " + byDefault
              : v.secret ? std::string("<set>")
                         : value + " (" + settings.origin(v.name) + ")";
    } catch (const c10d::InvalidArgument& e) {
      shown = std::string("REFUSED: ") + e.what();
      ++refused;
    }
    std::printf("%-28s %s\n", std::string(v.name).c_str(), shown.c_str());
  }
  for (const std::string& name : config::unknownEnvironmentNames()) {
    std::printf("%-28s set, but c10d does not read it (misspelt?)\n", name.c_str());
  }
  return refused == 0 ? 0 : 1;
}
