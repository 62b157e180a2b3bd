#pragma once

/// \file
/// The process's default group and the functions that use it (getRank, getWorldSize, ...).
///
/// The process's default group, as torch.distributed's (is_initialized, get_rank, get_world_size,
/// get_backend, destroy_process_group), for code that does not pass a group around: the group
/// initProcessGroup (c10d/Init.hpp) last made, or one given to setDefaultGroup.
///
/// The program owns the group (the shared_ptr initProcessGroup returned); the default is kept
/// only while the program holds it, so dropping the group still shuts it down where the program
/// drops it, not at exit. initProcessGroup again makes the new group the default (torch refuses a
/// second init_process_group; a C++ program may hold several groups).
///
/// Errors: every call but isInitialized throws StateError when there is no default group, saying
/// why (never made, destroyed, or no longer held by the program) and what to call.
/// Threading: every function may be called from any thread.

#include <memory>
#include <string>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// Whether there is a default group: made, not destroyed, still held.
/// \return True when there is.
bool isInitialized();
/// The default group.
/// \return The default group.
/// \throws StateError when there is none, saying why.
std::shared_ptr<ProcessGroup> defaultGroup();
/// The default group's rank and size, and its backend spec ("gloo", "cpu:gloo,cuda:nccl").
/// \return This process's rank in the default group.
int getRank();
/// \return The default group's size.
int getWorldSize();
/// \return The default group's backend spec.
std::string getBackend();
/// Shuts the default group down (ProcessGroup::shutdown: its later ops throw StateError) and
/// forgets it. The program's shared_ptr stays valid, as a shut-down group.
void destroyProcessGroup();
/// Makes group the default (initProcessGroup does this); null forgets the current one.
/// \param group the new default group, kept only while the program holds it; or null.
void setDefaultGroup(std::shared_ptr<ProcessGroup> group);

}  // namespace c10d::inline v1
