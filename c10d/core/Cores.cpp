#include "c10d/core/Cores.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {
namespace {

bool readWords(const std::string& path, std::vector<std::string>* words) {
  std::ifstream in(path);
  if (!in) return false;
  words->clear();
  for (std::string word; in >> word;) words->push_back(word);
  return !words->empty();
}

// The CPUs a quota file allows (0: no quota there). v2's cpu.max is "<quota|max> <period>".
double quotaAt(const std::string& folder, bool v2) {
  std::vector<std::string> words;
  double quota = -1, period = 0;
  try {
    if (v2) {
      if (!readWords(folder + "/cpu.max", &words) || words[0] == "max") return 0;
      quota = std::stod(words[0]);
      period = words.size() > 1 ? std::stod(words[1]) : 100000;
    } else {
      if (!readWords(folder + "/cpu.cfs_quota_us", &words)) return 0;
      quota = std::stod(words[0]);
      if (!readWords(folder + "/cpu.cfs_period_us", &words)) return 0;
      period = std::stod(words[0]);
    }
  } catch (const std::exception&) {
    return 0;  // not a number: as if absent
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// "/a/b" -> "/a/b", "/a", "" (the root).
std::vector<std::string> selfAndAncestors(std::string path) {
  std::vector<std::string> paths;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    paths.push_back(path);
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || path.empty()) break;
    path.erase(slash);
  }
  return paths;
}

}  // namespace

CoreCount countCores(const std::string& procSelfCgroup, const std::string& cgroupRoot,
                     unsigned affinity) {
  CoreCount count;
  count.affinity = affinity;
  std::string where;
  std::istringstream lines(procSelfCgroup);
  for (std::string line; std::getline(lines, line);) {
    // "<id>:<controllers>:<path>"; v2's line has no controllers.
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::vector<std::string> mounts;
    const bool v2 = controllers.empty();
    if (v2) {
      mounts = {cgroupRoot, cgroupRoot + "/unified"};
    } else {
      std::istringstream names(controllers);
      bool hasCpu = false;
      for (std::string name; std::getline(names, name, ',');) hasCpu |= name == "cpu";
      if (!hasCpu) continue;
      mounts = {cgroupRoot + "/" + controllers, cgroupRoot + "/cpu"};
    }
    for (const std::string& mount : mounts) {
      for (const std::string& folder : selfAndAncestors(path)) {
        const double cpus = quotaAt(mount + folder, v2);
        if (cpus > 0 && (count.quota == 0 || cpus < count.quota)) {
          count.quota = cpus;
          where =
              concat(v2 ? "cpu.max" : "cpu.cfs_quota_us", " of ", folder.empty() ? "/" : folder);
        }
      }
    }
  }
  unsigned usable = affinity > 0 ? affinity : 1;
  if (count.quota > 0) {
    // Rounded down: a rank that spins on a fraction of a CPU past the quota is throttled.
    usable = std::min(usable, std::max(1u, static_cast<unsigned>(std::floor(count.quota))));
  }
  count.usable = usable;
  count.why = affinity > 0 ? concat(affinity, " CPUs in the affinity mask")
                           : std::string("affinity mask unreadable");
  if (count.quota > 0) count.why += concat(", cgroup quota ", count.quota, " CPUs (", where, ")");
  return count;
}

const CoreCount& usableCores() {
  static const CoreCount count = [] {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const unsigned affinity =
        sched_getaffinity(0, sizeof mask, &mask) == 0 ? static_cast<unsigned>(CPU_COUNT(&mask)) : 0;
    std::ifstream in("/proc/self/cgroup");
    std::stringstream text;
    text << in.rdbuf();
    return countCores(text.str(), "/sys/fs/cgroup", affinity);
  }();
  return count;
}

}  // namespace c10d::inline v1::detail
