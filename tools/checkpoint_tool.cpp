// c10d-checkpoint: looks into a checkpoint folder from the command line.
//   c10d-checkpoint inspect DIR          tensors, slices, world size and layout, step, sizes
//   c10d-checkpoint verify DIR           every checksum; exit 1 naming each problem
//   c10d-checkpoint consolidate DIR OUT  every tensor whole in one safetensors file
//   c10d-checkpoint latest ROOT          the newest complete checkpoint under ROOT
// Exit status: 0 fine, 1 a damaged or unusable checkpoint, 2 bad usage.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Metadata.hpp"

namespace {

using namespace c10d::checkpoint;

std::string humanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

// A bar on stderr when it is a terminal; nothing otherwise (logs stay clean).
Progress progressBar(const char* what) {
  if (!::isatty(STDERR_FILENO)) return nullptr;
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [what, last](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - *last < std::chrono::milliseconds(100)) return;
    *last = now;
    const int width = 30;
    const double share = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const int filled = static_cast<int>(share * width);
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %s of %s", what, std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), static_cast<int>(share * 100),
                 humanBytes(done).c_str(), humanBytes(total).c_str());
    if (done >= total) std::fprintf(stderr, "\n");
  };
}

int inspect(const std::string& dir) {
  const Metadata m = readMetadata(dir);
  const std::time_t created = static_cast<std::time_t>(m.createdUnixNanos / 1000000000);
  char when[64];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&created));
  std::cout << "checkpoint " << dir << "\n  format version " << m.version << ", saved " << when
            << " by " << m.worldSize << (m.worldSize == 1 ? " rank" : " ranks")
            << (m.layout.empty() ? "" : " (" + m.layout + ")") << "\n";
  auto step = m.values.find("step");
  if (step != m.values.end()) std::cout << "  step " << valueText(step->second) << "\n";
  int64_t fileBytes = 0;
  for (const SavedFile& f : m.files) fileBytes += f.bytes;
  std::cout << "  " << m.tensors.size() << " tensors, " << humanBytes(m.dataBytes())
            << " of data in " << m.files.size() << " files (" << humanBytes(fileBytes)
            << " with headers); checksums xxh3_64 per " << humanBytes(m.checksumBlockBytes)
            << "\n\nfiles:\n";
  for (const SavedFile& f : m.files) {
    std::cout << "  " << f.name << "  rank " << f.rank << "  " << humanBytes(f.bytes) << "\n";
  }
  std::cout << "\ntensors:\n";
  for (const auto& [name, t] : m.tensors) {
    int64_t bytes = 0;
    for (const SavedSlice& s : t.slices) bytes += s.bytes;
    std::cout << "  " << name << "  " << shapeText(t.dtype, t.shape) << "  " << humanBytes(bytes)
              << "  " << t.slices.size() << (t.slices.size() == 1 ? " slice" : " slices") << "\n";
    for (const SavedSlice& s : t.slices) {
      std::cout << "    " << s.slice.describe() << "  in " << m.files[s.file].name << " at "
                << s.offset << ", held by rank" << (s.holders.size() == 1 ? " " : "s ");
      for (size_t i = 0; i < s.holders.size(); ++i) std::cout << (i ? "," : "") << s.holders[i];
      std::cout << "\n";
    }
  }
  if (!m.values.empty()) {
    std::cout << "\nvalues:\n";
    for (const auto& [name, bytes] : m.values) {
      std::cout << "  " << name << " = " << valueText(bytes) << "\n";
    }
  }
  return 0;
}

int verifyCommand(const std::string& dir) {
  const std::vector<std::string> problems = verify(dir, progressBar("verify"));
  for (const std::string& p : problems) std::cerr << "c10d-checkpoint: " << p << "\n";
  if (!problems.empty()) {
    std::cerr << "c10d-checkpoint: " << dir << ": " << problems.size()
              << (problems.size() == 1 ? " problem" : " problems") << "\n";
    return 1;
  }
  const Metadata m = readMetadata(dir);
  std::cout << dir << ": ok (" << m.tensors.size() << " tensors, " << humanBytes(m.dataBytes())
            << " checked)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspects, verifies and consolidates c10d checkpoint folders"};
  app.require_subcommand(1);
  std::string dir, out, root;
  auto* inspectCmd = app.add_subcommand("inspect", "Tensors, slices, world size, layout, step");
  inspectCmd->add_option("DIR", dir, "checkpoint folder")->required();
  auto* verifyCmd = app.add_subcommand("verify", "Check every block against its checksum");
  verifyCmd->add_option("DIR", dir, "checkpoint folder")->required();
  auto* consolidateCmd =
      app.add_subcommand("consolidate", "Write every tensor whole into one safetensors file");
  consolidateCmd->add_option("DIR", dir, "checkpoint folder")->required();
  consolidateCmd->add_option("OUT", out, "the safetensors file to write")->required();
  auto* latestCmd = app.add_subcommand("latest", "Print the newest complete checkpoint");
  latestCmd->add_option("ROOT", root, "folder holding checkpoint folders")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*inspectCmd) return inspect(dir);
    if (*verifyCmd) return verifyCommand(dir);
    if (*consolidateCmd) {
      consolidate(dir, out, progressBar("consolidate"));
      std::cout << out << ": " << readMetadata(dir).tensors.size() << " tensors\n";
      return 0;
    }
    auto newest = latest(root);
    if (!newest) {
      std::cerr << "c10d-checkpoint: no complete checkpoint under " << root << "\n";
      return 1;
    }
    std::cout << *newest << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "c10d-checkpoint: " << e.what() << "\n";
    return 1;
  }
}
