#include <algorithm>
#include <filesystem>
#include <system_error>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

struct Found {
  std::string path;
  bool hasStep = false;
  int64_t step = 0;
  int64_t created = 0;
};

std::vector<Found> scan(const std::string& root) {
  std::vector<Found> found;
  std::error_code error;
  std::filesystem::directory_iterator it(root, error);
  C10D_CHECK(!error, CheckpointError, "checkpoint: cannot list '", root, "': ", error.message());
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || detail::isPartialName(name)) continue;
    const std::string path = entry.path().string();
    if (!detail::pathExists(path + "/" + kMetadataFile)) continue;
    Metadata m;
    try {
      m = readMetadata(path);
    } catch (const Error&) {
      continue;  // not one this build can read: never the newest by mistake
    }
    Found f{path, false, 0, m.createdUnixNanos};
    auto step = m.values.find("step");
    if (step != m.values.end()) {
      State probe;
      probe.setValue("step", step->second);
      try {
        f.step = probe.getInt("step");
        f.hasStep = true;
      } catch (const InvalidArgument&) {
      }
    }
    found.push_back(std::move(f));
  }
  // One total order (a mixed comparison would not be one): by step when every checkpoint has
  // one, else by the time of the commit.
  const bool bySteps =
      std::all_of(found.begin(), found.end(), [](const Found& f) { return f.hasStep; });
  std::sort(found.begin(), found.end(), [bySteps](const Found& a, const Found& b) {
    if (bySteps && a.step != b.step) return a.step < b.step;
    return a.created < b.created;
  });
  return found;
}

}  // namespace

std::vector<std::string> completeCheckpoints(const std::string& root) {
  std::vector<std::string> paths;
  for (const Found& f : scan(root)) paths.push_back(f.path);
  return paths;
}

std::optional<std::string> latest(const std::string& root) {
  if (!detail::pathExists(root)) return std::nullopt;
  std::vector<std::string> all = completeCheckpoints(root);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::vector<std::string> keepLast(const std::string& root, size_t keep) {
  std::vector<std::string> removed;
  std::vector<std::string> complete = completeCheckpoints(root);
  for (size_t i = 0; i + keep < complete.size(); ++i) {
    detail::retireFolder(complete[i]);
    removed.push_back(complete[i]);
  }
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
    if (entry.is_directory() && detail::isPartialName(entry.path().filename().string())) {
      detail::removeTree(entry.path().string());
      removed.push_back(entry.path().string());
    }
  }
  return removed;
}

}  // namespace c10d::inline v1::checkpoint
