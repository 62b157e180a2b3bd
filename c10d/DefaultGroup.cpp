#include "c10d/DefaultGroup.hpp"

#include <mutex>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {
namespace {

struct Default {
  std::mutex mutex;
  std::weak_ptr<ProcessGroup> group;
  enum class State { Never, Set, Destroyed } state = State::Never;
};

Default& state() {
  static Default* d = new Default;  // never destroyed: callable from other statics' destructors
  return *d;
}

}  // namespace

bool isInitialized() {
  Default& d = state();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.state == Default::State::Set && !d.group.expired();
}

std::shared_ptr<ProcessGroup> defaultGroup() {
  Default& d = state();
  std::lock_guard<std::mutex> lock(d.mutex);
  C10D_CHECK(d.state != Default::State::Never, StateError,
             "no default process group: call c10d::initProcessGroup() first");
  C10D_CHECK(d.state != Default::State::Destroyed, StateError,
             "no default process group: destroyProcessGroup() ended it; call "
             "c10d::initProcessGroup() for a new one");
  std::shared_ptr<ProcessGroup> group = d.group.lock();
  C10D_CHECK(group != nullptr, StateError,
             "no default process group: the program no longer holds the group "
             "initProcessGroup() returned (the default lasts while it is held)");
  return group;
}

int getRank() {
  return defaultGroup()->rank();
}

int getWorldSize() {
  return defaultGroup()->size();
}

std::string getBackend() {
  return defaultGroup()->backendSpec();
}

void destroyProcessGroup() {
  std::shared_ptr<ProcessGroup> group = defaultGroup();
  {
    Default& d = state();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.group.lock() == group) {
      d.group.reset();
      d.state = Default::State::Destroyed;
    }
  }
  group->shutdown();
}

void setDefaultGroup(std::shared_ptr<ProcessGroup> group) {
  Default& d = state();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.group = group;
  d.state = group ? Default::State::Set : Default::State::Never;
}

}  // namespace c10d::inline v1
