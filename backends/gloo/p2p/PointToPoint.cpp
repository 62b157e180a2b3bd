#include "backends/gloo/p2p/PointToPoint.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1 {

namespace {

using Clock = std::chrono::steady_clock;
using Header = P2PFrame::Header;
using Verdict = P2PFrame::Verdict;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// The listener's wait for a head has no deadline of its own; Gloo's needs one.
constexpr std::chrono::hours kListenTimeout{24};

}  // namespace

// ---- P2PWork ----

P2PWork::P2PWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, Tensor tensor,
                 std::shared_ptr<GlooBackend::Runtime> runtime)
    : Work(op, std::move(trace)),
      tensor_(std::move(tensor)),
      peer_(op.peer),
      tag_(op.tag),
      runtime_(std::move(runtime)) {
  if (op.type != OpType::Send) output_ = tensor_;
}

P2PWork::P2PWork(std::shared_ptr<detail::GroupTrace> trace,
                 std::shared_ptr<GlooBackend::Runtime> runtime)
    : Work(Op{}, std::move(trace)), runtime_(std::move(runtime)) {}

P2PWork::~P2PWork() = default;

void P2PWork::setTensor(const Tensor& tensor) {
  tensor_ = tensor;
  if (op().type != OpType::Send) output_ = tensor;
}

void P2PWork::rebind(const Op& op) {
  Work::rebind(op);
  peer_ = op.peer;
  tag_ = op.tag;
  claimed_.store(false, std::memory_order_relaxed);
  if (!abortReason_.empty()) abortReason_.clear();
  abortedByShutdown_ = false;
}

void P2PWork::recycle() {
  tensor_.reset();
  Work::recycle();
}

void P2PWork::completeIfUnclaimed() {
  if (claimed_.exchange(true)) return;
  try {
    run(Clock::now() + timeout());
    finish();
  } catch (...) {
    finishWithError(std::current_exception());
  }
}

std::exception_ptr P2PWork::abortError(const std::string& reason) const {
  std::string message = detail::concat(description(), ": ", reason);
  return abortedByShutdown_ ? std::make_exception_ptr(StateError(message))
                            : std::make_exception_ptr(BackendError(message));
}

void P2PWork::abortWait(const std::string& reason, bool shutDown) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (abortReason_.empty()) {
      abortReason_ = reason;
      abortedByShutdown_ = shutDown;
    }
    error = abortError(abortReason_);
    if (waiting_ != nullptr && waitingForSend_) {
      waiting_->abortWaitSend();
    } else if (waiting_ != nullptr) {
      waiting_->abortWaitRecv();
    }
  }
  // Not yet claimed: nobody runs its stages, so fail it here.
  const bool claimedHere = !claimed_.exchange(true);
  aborting(claimedHere);
  if (claimedHere) finishWithError(error);
}

void P2PWork::waitFor(gloo::transport::UnboundBuffer& buffer, bool send, int* peer,
                      Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!abortReason_.empty()) std::rethrow_exception(abortError(abortReason_));
    waiting_ = &buffer;
    waitingForSend_ = send;
  }
  bool completed = false;
  try {
    runtime_->guarded(*this, [&] {
      detail::SigpipeGuard::mayHaveFailedWrites();  // asynchronous pairs
      completed = send ? buffer.waitSend(peer, remaining(deadline))
                       : buffer.waitRecv(peer, remaining(deadline));
    });
  } catch (...) {
    std::lock_guard<std::mutex> guard(mutex_);
    waiting_ = nullptr;
    throw;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  waiting_ = nullptr;
  if (!completed) std::rethrow_exception(abortError(abortReason_));
}

std::string P2PWork::sizesDisagree(uint64_t sent, uint64_t taken, int sender, int receiver) const {
  return detail::concat(
      description(), ": rank ", sender, " sent ", sent, " bytes and rank ", receiver,
      "'s receive takes ", taken,
      "; a send and its receive must have the same size. The group is still usable, and ",
      sent > taken ? std::string("the receiver dropped the message (its tensor is untouched)")
                   : detail::concat("the receiver has the message's ", sent,
                                    " bytes at the start of its tensor (the rest is untouched)"));
}

// ---- P2PSend ----

void P2PSend::post(uint64_t id) {
  detail::SigpipeGuard::mayHaveFailedWrites();  // asynchronous pairs
  id_ = id;
  const uint64_t bytes = tensor_.nbytes();
  const size_t eager = std::min<uint64_t>(bytes, P2PFrame::kEagerBytes);
  // The verdict's receive first: the receiver may answer as soon as the head is there.
  verdict_ = runtime_->acquireStaging(sizeof(Verdict));
  verdict_->buffer->recv(peer_, P2PFrame::verdictSlot(id));
  head_ = runtime_->acquireStaging(P2PFrame::kHeadRoom);
  Header header{bytes, id, tag_};
  std::memcpy(head_->bytes.get(), &header, sizeof header);
  if (eager > 0) std::memcpy(head_->bytes.get() + sizeof header, tensor_.data(), eager);
  head_->buffer->send(peer_, P2PFrame::kHeadSlot, 0, sizeof header + eager);
  if (bytes > eager) {
    bulk_ = runtime_->acquireBuffer(static_cast<uint8_t*>(tensor_.data()) + eager, bytes - eager);
    bulk_->send(peer_, P2PFrame::bulkSlot(id));
  }
}

void P2PSend::run(Clock::time_point deadline) {
  int peer = -1;
  waitFor(*head_->buffer, true, &peer, deadline);
  if (bulk_) waitFor(*bulk_, true, &peer, deadline);
  waitFor(*verdict_->buffer, false, &peer, deadline);
  Verdict verdict;
  std::memcpy(&verdict, verdict_->bytes.get(), sizeof verdict);
  // Every stage completed: the staging and the buffer can serve other messages.
  runtime_->releaseStaging(std::move(head_));
  runtime_->releaseStaging(std::move(verdict_));
  if (bulk_) runtime_->releaseBuffer(std::move(bulk_));
  C10D_CHECK(verdict.matched == 1, InvalidArgument,
             sizesDisagree(tensor_.nbytes(), verdict.receiverBytes, runtime_->rank, peer_));
}

// ---- P2PRecv ----

void P2PRecv::deliver(int source, const Header& header, const uint8_t* eager) {
  const uint64_t taken = tensor_.nbytes();
  const bool fits = header.bytes <= taken;
  const size_t eagerBytes = std::min<uint64_t>(header.bytes, P2PFrame::kEagerBytes);
  if (fits && eagerBytes > 0) std::memcpy(tensor_.data(), eager, eagerBytes);
  std::exception_ptr error;
  try {
    runtime_->guarded(*this, [&] {
      detail::SigpipeGuard::mayHaveFailedWrites();  // asynchronous pairs
      if (header.bytes > eagerBytes) {
        const uint64_t rest = header.bytes - eagerBytes;
        uint8_t* into;
        if (fits) {
          into = static_cast<uint8_t*>(tensor_.data()) + eagerBytes;
        } else {
          discarded_.resize(rest);
          into = discarded_.data();
        }
        bulk_ = runtime_->acquireBuffer(into, rest);
        bulk_->recv(source, P2PFrame::bulkSlot(header.id));
      }
      verdict_ = runtime_->acquireStaging(sizeof(Verdict));
      Verdict verdict{taken, header.bytes == taken ? 1u : 0u};
      std::memcpy(verdict_->bytes.get(), &verdict, sizeof verdict);
      verdict_->buffer->send(source, P2PFrame::verdictSlot(header.id));
    });
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    source_ = source;
    header_ = header;
    matchError_ = error;
    matched_ = true;
  }
  matchedChanged_.notify_all();
}

void P2PRecv::aborting(bool claimedHere) {
  // Failed here: no head may be delivered into it any more. Claimed elsewhere: run() wakes,
  // withdraws it and throws.
  if (claimedHere) runtime_->p2p->withdraw(this);
  matchedChanged_.notify_all();
}

void P2PRecv::run(Clock::time_point deadline) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!matched_) {
      if (!abortReason_.empty() || Clock::now() >= deadline) {
        std::string reason = abortReason_;
        std::exception_ptr aborted = reason.empty() ? nullptr : abortError(reason);
        lock.unlock();
        if (runtime_->p2p->withdraw(this)) {
          if (aborted) std::rethrow_exception(aborted);
          // As Gloo's own waits: a timeout is the group's failure.
          runtime_->fail(description(), detail::concat("Timed out waiting ", timeout().count(),
                                                       "ms for a matching send"));
        }
        lock.lock();  // a head is being delivered: it is quick
        matchedChanged_.wait(lock, [&] { return matched_; });
        break;
      }
      matchedChanged_.wait_until(lock, deadline);
    }
    if (matchError_) std::rethrow_exception(matchError_);
  }
  setSourceRank(source_);
  int peer = -1;
  if (bulk_) waitFor(*bulk_, false, &peer, deadline);
  waitFor(*verdict_->buffer, true, &peer, deadline);
  const uint64_t taken = tensor_.nbytes();
  runtime_->releaseStaging(std::move(verdict_));
  if (bulk_ && header_.bytes <= taken) {
    runtime_->releaseBuffer(std::move(bulk_));
  } else {
    bulk_.reset();  // over memory of our own, not worth keeping
    std::vector<uint8_t>().swap(discarded_);
  }
  C10D_CHECK(header_.bytes == taken, InvalidArgument,
             sizesDisagree(header_.bytes, taken, source_, runtime_->rank));
}

// ---- P2PEngine ----

P2PEngine::P2PEngine(GlooBackend::Runtime& runtime) : runtime_(runtime) {
  for (int r = 0; r < runtime_.size; ++r) {
    if (r != runtime_.rank) peers_.push_back(r);
  }
}

P2PEngine::~P2PEngine() {
  stop();
}

void P2PEngine::ensureStarted() {
  if (started()) return;
  std::lock_guard<std::mutex> guard(stopMutex_);
  if (started_ || stopping_) return;
  for (int i = 0; i < kPostedHeads; ++i) {
    heads_.push_back(runtime_.acquireStaging(P2PFrame::kHeadRoom));
    heads_.back()->buffer->recv(peers_, P2PFrame::kHeadSlot);
  }
  listener_ = std::thread([this] { listen(); });
  started_.store(true, std::memory_order_release);
}

void P2PEngine::stop() {
  std::lock_guard<std::mutex> guard(stopMutex_);
  stopping_ = true;
  if (!listener_.joinable()) return;
  // The flag outlives a wait that has not begun yet: the listener's next wait returns at once.
  for (auto& head : heads_) head->buffer->abortWaitRecv();
  listener_.join();
}

void P2PEngine::listen() {
  detail::nameThisThread("c10d-gloo-match");
  detail::blockSigpipeInThisThread();
  while (!stopping_) {
    GlooBackend::Runtime::Staging& staging = *heads_[next_];
    int source = -1;
    bool got = false;
    try {
      got = staging.buffer->waitRecv(&source, kListenTimeout);
    } catch (const std::exception& e) {
      // The group failed (its connections closed); its Works fail through breakGroup.
      if (!stopping_)
        C10D_LOG(Info, "gloo group '", runtime_.group, "': listener stops: ", e.what());
      return;
    }
    if (!got) continue;  // stop() woke it
    Header header;
    std::memcpy(&header, staging.bytes.get(), sizeof header);
    const uint8_t* eager = staging.bytes.get() + sizeof header;
    std::shared_ptr<P2PRecv> recv;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      recv = matcher_.match(source, header.tag);
      if (!recv) {
        // Kept until its receive is posted; the copy frees the staging for the next head.
        const size_t bytes = std::min<uint64_t>(header.bytes, P2PFrame::kEagerBytes);
        matcher_.keep({source, header, std::vector<uint8_t>(eager, eager + bytes)});
      }
    }
    // Straight from the staging into the tensor, before the staging takes the next head.
    if (recv) recv->deliver(source, header, eager);
    try {
      staging.buffer->recv(peers_, P2PFrame::kHeadSlot);
    } catch (const std::exception& e) {
      if (!stopping_)
        C10D_LOG(Info, "gloo group '", runtime_.group, "': listener stops: ", e.what());
      return;
    }
    next_ = (next_ + 1) % heads_.size();
  }
}

void P2PEngine::post(const std::shared_ptr<P2PRecv>& recv, int source, int tag) {
  std::optional<Head> head;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    head = matcher_.post(recv, source, tag);
  }
  if (head) recv->deliver(head->source, head->header, head->eager.data());
}

bool P2PEngine::withdraw(const P2PRecv* recv) {
  std::lock_guard<std::mutex> guard(mutex_);
  return matcher_.withdraw(recv);
}

}  // namespace c10d::inline v1
