#pragma once

/// \file
/// Internal: how many cores this process may run on (affinity mask and cgroup CPU quota).
///
/// How many cores this process may run on, which decides whether a rank may spin while it waits:
/// std::thread::hardware_concurrency() counts the host's cores, not the ones taskset, a Slurm or
/// Kubernetes cpuset (the affinity mask) or a container's CPU quota (cgroup v2 `cpu.max`, v1
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us`) leave us.

#include <string>

namespace c10d::inline v1::detail {

struct CoreCount {
  unsigned usable = 1;    ///< what the others leave, rounded up; at least 1
  unsigned affinity = 0;  ///< CPUs in the affinity mask (0: could not be read)
  double quota = 0;       ///< CPUs the tightest cgroup quota on our path allows (0: none)
  std::string why;        ///< "2 CPUs in the affinity mask, cgroup quota 1.5 CPUs (cpu.max of /a)"
};

/// Reads the counts: `procSelfCgroup` is /proc/self/cgroup's text, `cgroupRoot` where the cgroup
/// file systems are mounted (v2 at the root or under "unified", v1 under one folder per controller
/// list), `affinity` the mask's CPU count. A quota set on any ancestor of our cgroup applies too.
/// Files that are absent or unreadable count as no quota. Thread-safe; no global state.
CoreCount countCores(const std::string& procSelfCgroup, const std::string& cgroupRoot,
                     unsigned affinity);

/// This process's counts, read from /proc and /sys/fs/cgroup once, the first time it is asked.
const CoreCount& usableCores();

}  // namespace c10d::inline v1::detail
