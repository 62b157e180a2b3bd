#pragma once

/// \file
/// Internal: naming the calling thread for top, gdb and perf.

#include <pthread.h>

#include <string>

namespace c10d::inline v1::detail {

/// Names the calling thread as top -H, gdb, perf and /proc/<pid>/task/*/comm show it. Linux keeps
/// 15 characters; a longer name is cut, never refused.
inline void nameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace c10d::inline v1::detail
