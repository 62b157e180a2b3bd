// ProcessGroup::monitoredBarrier: a barrier through the job's store rather than a backend, so
// that rank 0 can name the ranks that did not arrive in time.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/ProcessGroupChecks.hpp"
#include "c10d/ProcessGroupInstrumentation.hpp"
#include "c10d/core/Exception.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

std::shared_ptr<Work> ProcessGroup::monitoredBarrier(const BarrierOptions& options,
                                                     bool waitAllRanks) {
  return withErrorContext("monitored_barrier", -1, [&] {
    checkUsable("monitored_barrier");
    C10D_CHECK(state_->options.storeIsShared, InvalidArgument, "monitored_barrier in group '",
               state_->options.groupName,
               "' needs a store shared by the ranks; this job has none (start it with "
               "MASTER_ADDR and MASTER_PORT set)");
    auto timeout = resolve(options.timeout, "monitored_barrier");
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // Blocking, as torch's: the Work says so once every rank arrived.
    auto passed = [&] {
      auto work = std::make_shared<BackendWork>(
          detail::concat("monitored_barrier (group '", state_->options.groupName, "')"), timeout);
      work->finish();
      return std::shared_ptr<Work>(std::move(work));
    };
    // Through the store rather than the backend: the point is to name ranks that never arrive,
    // which a backend collective cannot do once it is stuck.
    std::string base = "monitored_barrier/" + state_->options.groupName + "/";
    int64_t round = state_->store->add(base + "round/" + std::to_string(state_->rank), 1);
    std::string prefix = base + std::to_string(round) + "/";
    state_->store->setString(prefix + "arrived/" + std::to_string(state_->rank), "1");
    if (state_->rank != 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      state_->store->wait({prefix + "released"}, std::max(left, std::chrono::milliseconds(1)));
      std::string verdict = state_->store->getString(prefix + "released");
      C10D_CHECK(verdict == "ok", TimeoutError, "monitored_barrier in group '",
                 state_->options.groupName, "': ", verdict);
      return passed();
    }
    std::vector<int> missing;
    for (int r = 1; r < state_->size; ++r) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        state_->store->wait({prefix + "arrived/" + std::to_string(r)},
                            std::max(left, std::chrono::milliseconds(1)));
      } catch (const TimeoutError&) {
        missing.push_back(r);
        if (!waitAllRanks) break;
      }
    }
    if (missing.empty()) {
      state_->store->setString(prefix + "released", "ok");
      return passed();
    }
    std::string message = detail::concat("rank(s) ", detail::rankList(missing),
                                         " did not arrive within ", timeout.count(), " ms");
    state_->store->setString(prefix + "released", message);
    throw TimeoutError(
        detail::concat("monitored_barrier in group '", state_->options.groupName, "': ", message),
        ErrorContext{.peers = missing});
  });
}

}  // namespace c10d::inline v1
