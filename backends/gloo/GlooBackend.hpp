#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "backends/common/QueuedBackend.hpp"

namespace c10d::inline v1 {

class GlooWork;  // private to backends/gloo
namespace detail {
template <typename T>
class WorkPool;
}  // namespace detail

// The Gloo backend: CPU tensors, every dtype and reduce op, over one Gloo TCP context per group
// that is built once at construction and reused by every operation.
//
// Collectives run in issue order on a worker thread, or on the caller's thread when it waits
// for an operation that is next in line (so blocking calls cost no hand-off). Point-to-point
// operations go straight to Gloo's unbound buffers with the tag as slot; their Work completes
// when waited on or, at the latest, by a progress thread.
//
// Gloo closes a context for good after any transport error or timeout: the first such failure
// fails that operation (TimeoutError or BackendError naming op, group, rank and sequence number)
// and every later one with BackendError quoting it. Create a new group to continue.
//

// The address other ranks reach this one on: C10D_SOCKET_IFNAME or GLOO_SOCKET_IFNAME names an
// interface; otherwise the local address that routes to the store's host (127.0.0.1 for
// single-host stores).
class GlooBackend : public QueuedBackend {
 public:
  explicit GlooBackend(const BackendContext& context);
  ~GlooBackend() override;

  // The Gloo context, for code in this folder (each collective's file). Opaque elsewhere.
  struct Runtime;
  Runtime& runtime() { return *runtime_; }

 private:
  // A GlooWork (Collectives.hpp): it runs op with its sequence number as its Gloo tag, and this
  // rank's messages say which call it is (the always-on check, WireCall.hpp).
  std::shared_ptr<QueuedWork> makeCollective(const Op& op, const OpTensors& tensors) override;
  std::shared_ptr<Work> startP2P(const Op& op, const Tensor& tensor) override;
  void stopAfterQueue() override;

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<detail::WorkPool<GlooWork>> pool_;  // the collectives' Works, for reuse
};

}  // namespace c10d::inline v1
