#include "backends/gloo/p2p/SharedPointToPoint.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "c10d/WorkPool.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Futex.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1 {

namespace {

using Clock = std::chrono::steady_clock;
using Message = SharedFrame::Message;

// A waiter that sleeps in its reads (more ranks than cores), and the listener completing an op
// nobody waits for, poll this long before they leave the channels to the listener and sleep; a
// waiter with a core of its own polls for the group's spin budget (SyncMesh::spinFor).
constexpr std::chrono::microseconds kPollBeforeSleep{50};
// How often a wait looks at the clock and at its peer's process (a read of /proc).
constexpr std::chrono::milliseconds kLookInterval{10};
// The listener's sleep between rings: only a message queued for want of room needs it sooner,
// since nobody rings when a reader frees room.
constexpr std::chrono::milliseconds kListenerSleep{100};
constexpr std::chrono::milliseconds kRetryQueued{1};
// Between the ops of a waiter that polls, the listener stays out of the way: taking over after
// each op cost a thread wake-up per op, and, armed on the doorbell, a system call per message
// (measured: docs/performance-history.md, "Figures that lived in code comments").
constexpr std::chrono::milliseconds kHandOver{2};

// Whole messages are in the channel when their head is: its payload never waits.
const shm::Waiting kNoWait{Clock::time_point::max(), 0, shm::kSpinForever};

int64_t nowNs() {
  return Clock::now().time_since_epoch().count();
}

}  // namespace

// ---- SharedP2P::List ----

void SharedP2P::List::push(SharedWork* work) {
  work->next_ = nullptr;
  if (last != nullptr) {
    last->next_ = work;
  } else {
    first = work;
  }
  last = work;
}

template <typename Match>
SharedWork* SharedP2P::List::take(Match&& match) {
  SharedWork* previous = nullptr;
  for (SharedWork* work = first; work != nullptr; previous = work, work = work->next_) {
    if (!match(*work)) continue;
    (previous != nullptr ? previous->next_ : first) = work->next_;
    if (last == work) last = previous;
    work->next_ = nullptr;
    return work;
  }
  return nullptr;
}

// ---- SharedP2P ----

SharedP2P::SharedP2P(GlooBackend::Runtime& runtime, SyncMesh& mesh)
    : runtime_(runtime),
      mesh_(mesh),
      doorbell_(mesh.p2pDoorbell()),
      spinFor_(mesh.spinFor()),
      sends_(std::make_shared<detail::WorkPool<SharedSend>>()),
      recvs_(std::make_shared<detail::WorkPool<SharedRecv>>()) {
  links_.resize(runtime_.size);
  for (int r = 0; r < runtime_.size; ++r) {
    if (r == runtime_.rank) continue;
    peers_.push_back(r);
    links_[r].channels = mesh.p2pLink(r);
  }
  // Room for a few heads that come before their receive is posted (which the scheduling alone
  // decides), so that small messages allocate nothing once a group runs.
  kept_.resize(kKeptAhead);
  keptOrder_.reserve(kKeptAhead);
  keptFree_.reserve(kKeptAhead);
  for (size_t slot = kKeptAhead; slot-- > 0;) {
    kept_[slot].eager.reserve(kKeptEagerBytes);
    keptFree_.push_back(slot);
  }
}

SharedP2P::~SharedP2P() {
  stop();
}

void SharedP2P::ensureStarted() {
  if (started_.load(std::memory_order_acquire)) return;
  // Made on the group's first op, so a group that only runs collectives has no thread for it;
  // under the lock stop() joins it with, so that it is never made after stop() looked.
  std::lock_guard<std::mutex> guard(listenerMutex_);
  if (started_.load(std::memory_order_relaxed) || stopping_.load()) return;
  listener_ = std::thread([this] { listen(); });
  started_.store(true, std::memory_order_release);
}

std::shared_ptr<Work> SharedP2P::start(const Op& op, const Tensor& tensor,
                                       const std::shared_ptr<detail::GroupTrace>& trace,
                                       const std::shared_ptr<GlooBackend::Runtime>& runtime) {
  ensureStarted();
  std::shared_ptr<SharedWork> work;
  if (op.type == OpType::Send) {
    work = detail::WorkPool<SharedSend>::acquire(
        sends_, op, [&] { return new SharedSend(trace, runtime, *this); });
  } else {
    work = detail::WorkPool<SharedRecv>::acquire(
        recvs_, op, [&] { return new SharedRecv(trace, runtime, *this); });
  }
  work->setTensor(tensor);
  runtime_.checkUsable(*work);
  work->self_ = work;  // the engine's until it lets the op go
  submit(work.get());
  return work;
}

void SharedP2P::acquire() {
  for (unsigned spins = 0; !tryAcquire(); ++spins) {
    if (spins > 64) sched_yield();
  }
}

void SharedP2P::release() {
  for (;;) {
    token_.store(0, std::memory_order_seq_cst);
    // An op put into the inbox while this thread held the token found it taken: take it in.
    if (inbox_.load(std::memory_order_seq_cst) == nullptr || !tryAcquire()) return;
    takeInbox();
  }
}

void SharedP2P::submit(SharedWork* request) {
  SharedWork* head = inbox_.load(std::memory_order_relaxed);
  do {
    request->next_ = head;
  } while (!inbox_.compare_exchange_weak(head, request, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  if (tryAcquire()) {
    takeInbox();
    release();
  }
  // Posted while the engine stopped: nothing would make progress for it, nor fail it.
  if (stopping_.load(std::memory_order_seq_cst)) failAll();
}

void SharedP2P::failAll() {
  std::vector<std::shared_ptr<SharedWork>> held;
  auto takeAll = [&] {
    acquire();
    takeInbox();
    for (List* list : {&posted_, &unanswered_, &pulls_, &determined_}) {
      while (SharedWork* work = list->take([](SharedWork&) { return true; })) {
        held.push_back(std::move(work->self_));
      }
    }
    keptOrder_.clear();
    outstanding_.store(0, std::memory_order_relaxed);
    release();
  };
  // Until nothing is left: without the token, a failed receive withdraws itself (back into
  // determined_), and ops may still come in.
  for (;;) {
    held.clear();
    takeAll();
    if (held.empty()) return;
    for (auto& work : held) work->abortWait("aborted because the process group shut down", true);
  }
}

void SharedP2P::takeInbox() {
  SharedWork* taken = inbox_.exchange(nullptr, std::memory_order_acquire);
  // A stack: reversed, the ops come in the order they were put in.
  SharedWork* ordered = nullptr;
  while (taken != nullptr) {
    SharedWork* next = taken->next_;
    taken->next_ = ordered;
    ordered = taken;
    taken = next;
  }
  while (ordered != nullptr) {
    SharedWork* next = ordered->next_;
    if (ordered->op().type == OpType::Send) {
      postSend(static_cast<SharedSend&>(*ordered));
    } else {
      postRecv(static_cast<SharedRecv&>(*ordered));
    }
    ordered = next;
  }
}

void SharedP2P::write(int peer, const Message& message, const void* payload, size_t bytes) {
  Link& link = links_[peer];
  if (link.queued.empty() &&
      link.channels.out->tryWrite(&message, sizeof message, payload, bytes)) {
    link.channels.doorbell->ring();
    return;
  }
  const auto* from = static_cast<const uint8_t*>(payload);
  link.queued.push_back({message, std::vector<uint8_t>(from, from + bytes)});
}

void SharedP2P::postSend(SharedSend& send) {
  const uint64_t bytes = send.tensor_.nbytes();
  Message head{SharedFrame::kHead, 0, bytes, nextId_++, send.tag_, 0};
  if (SharedFrame::eagerBytes(bytes) == 0 && bytes > 0) {
    head.address = reinterpret_cast<uintptr_t>(send.tensor_.data());
  }
  send.answer_.id = head.id;
  unanswered_.push(&send);
  addOutstanding();
  write(send.peer_, head, send.tensor_.data(), SharedFrame::eagerBytes(bytes));
}

void SharedP2P::postRecv(SharedRecv& recv) {
  addOutstanding();
  // The first head kept for its source and tag, in arrival order.
  for (size_t i = 0; i < keptOrder_.size(); ++i) {
    Kept& kept = kept_[keptOrder_[i]];
    if ((recv.peer_ >= 0 && kept.source != recv.peer_) || kept.head.tag != recv.tag_) continue;
    const size_t slot = keptOrder_[i];
    keptOrder_.erase(keptOrder_.begin() + static_cast<ptrdiff_t>(i));
    keptFree_.push_back(slot);
    deliver(recv, kept.source, kept.head,
            [&](uint8_t* into) { std::memcpy(into, kept.eager.data(), kept.eager.size()); });
    return;
  }
  posted_.push(&recv);
}

template <typename Fill>
void SharedP2P::deliver(SharedRecv& recv, int source, const Message& head, Fill&& fill) {
  const uint64_t taken = recv.tensor_.nbytes();
  const bool fits = head.bytes <= taken;
  recv.source_ = source;
  recv.matchedHead_ = head;
  if (head.address != 0 && fits) {
    pulls_.push(&recv);
    moved();  // a waiter that sleeps copies its own payload
    return;
  }
  if (SharedFrame::eagerBytes(head.bytes) > 0 && fits) {
    fill(static_cast<uint8_t*>(recv.tensor_.data()));
  }
  write(source, Message{SharedFrame::kVerdict, head.bytes == taken ? 1u : 0u, taken, head.id, 0, 0},
        nullptr, 0);
  determine(recv);
}

void SharedP2P::addOutstanding() {
  const int before = outstanding_.load(std::memory_order_relaxed);
  outstanding_.store(before + 1, std::memory_order_seq_cst);
  // The watcher looks for lost peers while ops are in flight; parked, it must hear of them.
  if (before == 0) runtime_.wakeWatcher();
}

void SharedP2P::determine(SharedWork& work) {
  outstanding_.store(outstanding_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  determined_.push(&work);
  work.determined_.store(true, std::memory_order_release);
  moved();
}

void SharedP2P::moved() {
  changed_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) detail::futexWake(changed_);
}

void SharedP2P::wakeWaiters() {
  moved();
}

bool SharedP2P::takePulls(SharedWork* own) {
  bool copied = false;
  for (;;) {
    SharedWork* taken = pulls_.take([&](SharedWork& recv) {
      return &recv == own || !recv.claimed_.load(std::memory_order_acquire);
    });
    if (taken == nullptr) return copied;
    auto& recv = static_cast<SharedRecv&>(*taken);
    const long pid = links_[recv.source_].channels.pid;
    const Message head = recv.matchedHead_;
    release();
    // The tensor is this receive's alone until it completes; the sender keeps its memory until
    // the verdict. The token is free meanwhile: one large receive holds up nothing else.
    std::string error = shm::readProcessMemory(pid, head.address, recv.tensor_.data(), head.bytes);
    acquire();
    recv.pullError_ = std::move(error);
    if (recv.pullError_.empty()) {  // else the sender is gone: no verdict
      const uint64_t taken = recv.tensor_.nbytes();
      write(recv.source_,
            Message{SharedFrame::kVerdict, head.bytes == taken ? 1u : 0u, taken, head.id, 0, 0},
            nullptr, 0);
    }
    determine(recv);
    copied = true;
  }
}

bool SharedP2P::poll() {
  bool movedAny = false;
  for (int peer : peers_) {
    Link& link = links_[peer];
    while (!link.queued.empty()) {
      Queued& next = link.queued.front();
      if (!link.channels.out->tryWrite(&next.message, sizeof next.message, next.payload.data(),
                                       next.payload.size())) {
        break;
      }
      link.queued.pop_front();
      link.channels.doorbell->ring();
      movedAny = true;
    }
    Message message;
    while (link.channels.in->tryReadHeader(&message, sizeof message)) {
      movedAny = true;
      if (message.kind == SharedFrame::kVerdict) {
        link.channels.in->readPayload(0, kNoWait, [](const uint8_t*, size_t) {});
        SharedWork* send = unanswered_.take(
            [&](SharedWork& s) { return static_cast<SharedSend&>(s).answer_.id == message.id; });
        if (send != nullptr) {
          static_cast<SharedSend*>(send)->answer_ = message;
          determine(*send);
        }
        continue;
      }
      const size_t eager = SharedFrame::eagerBytes(message.bytes);
      auto matches = [&](SharedWork& r) {
        return (r.peer_ < 0 || r.peer_ == peer) && r.tag_ == message.tag;
      };
      SharedWork* recv = posted_.take(matches);
      if (recv == nullptr) {
        // Kept, with its payload, in a slot whose buffer stays for the next.
        size_t slot;
        if (keptFree_.empty()) {
          slot = kept_.size();
          kept_.emplace_back();
        } else {
          slot = keptFree_.back();
          keptFree_.pop_back();
        }
        Kept& kept = kept_[slot];
        kept.source = peer;
        kept.head = message;
        kept.eager.resize(eager);
        uint8_t* into = kept.eager.data();
        link.channels.in->readPayload(eager, kNoWait, [&](const uint8_t* piece, size_t n) {
          std::memcpy(into, piece, n);
          into += n;
        });
        keptOrder_.push_back(slot);
        continue;
      }
      bool filled = false;
      deliver(static_cast<SharedRecv&>(*recv), peer, message, [&](uint8_t* into) {
        filled = true;
        link.channels.in->readPayload(eager, kNoWait, [&](const uint8_t* piece, size_t n) {
          std::memcpy(into, piece, n);
          into += n;
        });
      });
      if (!filled) link.channels.in->readPayload(eager, kNoWait, [](const uint8_t*, size_t) {});
    }
  }
  return movedAny;
}

void SharedP2P::sweepDetermined(std::vector<std::shared_ptr<SharedWork>>* unclaimed,
                                std::shared_ptr<SharedWork>* one) {
  for (SharedWork* work = determined_.first; work != nullptr;) {
    SharedWork* next = work->next_;
    const bool completed = work->isCompleted();
    const bool collecting = unclaimed != nullptr || (one != nullptr && !*one);
    const bool nobodyRuns = collecting && !work->claimed_.load(std::memory_order_acquire);
    if (completed || nobodyRuns) {
      determined_.take([&](SharedWork& w) { return &w == work; });
      if (nobodyRuns && !completed) {
        if (unclaimed != nullptr) {
          unclaimed->push_back(std::move(work->self_));
        } else {
          *one = std::move(work->self_);
        }
      } else {
        // The engine's hold goes: the Work may go back to its pool now (nothing here touches it
        // after).
        std::shared_ptr<SharedWork> hold = std::move(work->self_);
      }
    }
    work = next;
  }
}

bool SharedP2P::progressOnce(SharedWork* own, bool* movedAny) {
  if (!tryAcquire()) return false;
  takeInbox();
  bool m = poll();
  if (pulls_.first != nullptr) m = takePulls(own) || m;
  std::shared_ptr<SharedWork> orphan;
  if (determined_.first != nullptr) sweepDetermined(nullptr, &orphan);
  release();
  // Without the token: a completion may issue ops.
  if (orphan) orphan->completeIfUnclaimed();
  *movedAny = m;
  return true;
}

bool SharedP2P::withdraw(SharedRecv* recv) {
  acquire();
  const bool found = posted_.take([&](SharedWork& r) { return &r == recv; }) != nullptr;
  if (found) {
    outstanding_.store(outstanding_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    // Released by a later sweep, once its wait has failed it.
    determined_.push(recv);
  }
  release();
  return found;
}

void SharedP2P::letGo(SharedWork& work) {
  std::shared_ptr<SharedWork> hold;  // dropped without the token; the waiter holds the Work too
  acquire();
  if (determined_.take([&](SharedWork& w) { return &w == &work; }) != nullptr) {
    hold = std::move(work.self_);
  }
  release();
}

void SharedP2P::abortAll(const std::string& reason, bool shutDown) {
  std::vector<std::shared_ptr<SharedWork>> hit;
  acquire();
  takeInbox();
  for (List* list : {&posted_, &unanswered_, &pulls_}) {
    while (SharedWork* work = list->take([](SharedWork&) { return true; })) {
      hit.push_back(work->self_);
      determined_.push(work);  // released by a later sweep, once failed
    }
  }
  outstanding_.store(0, std::memory_order_relaxed);
  release();
  for (auto& work : hit) work->abortWait(reason, shutDown);
}

std::string SharedP2P::lostPeer(int peer) {
  auto look = [&](int r) -> std::string {
    const SyncMesh::P2PLink& link = links_[r].channels;
    if (link.in->closed() || link.out->closed()) return mesh_.lossText(shm::Wait::Closed, r, false);
    if (shm::processEnded(link.pid)) return mesh_.lossText(shm::Wait::PeerEnded, r, false);
    return "";
  };
  if (peer >= 0) return look(peer);
  for (int r : peers_) {
    if (std::string lost = look(r); !lost.empty()) return lost;
  }
  return "";
}

SharedP2P::Progress SharedP2P::progressUntil(SharedWork& work, Clock::time_point deadline, int peer,
                                             std::string* lost) {
  auto done = [&] {
    return work.determined_.load(std::memory_order_acquire) ||
           work.aborted_.load(std::memory_order_acquire);
  };
  if (done()) return Progress::Done;
  activeWaiters_.fetch_add(1, std::memory_order_seq_cst);
  bool active = true;
  auto leave = [&](Progress progress) {
    (active ? activeWaiters_ : sleepers_).fetch_sub(1, std::memory_order_seq_cst);
    lastWaiterNs_.store(nowNs(), std::memory_order_relaxed);
    return progress;
  };
  auto lastLook = Clock::now();
  const std::chrono::nanoseconds poll =
      GlooBackend::Runtime::onProgressThread()
          ? kPollBeforeSleep
          : std::max<std::chrono::nanoseconds>(spinFor_, kPollBeforeSleep);
  const auto pollUntil = poll == shm::kSpinForever ? Clock::time_point::max() : lastLook + poll;
  for (unsigned round = 1;; ++round) {
    if (done()) break;
    // Asleep, it still copies its own payload: nobody else does.
    const uint32_t seen = changed_.load(std::memory_order_seq_cst);
    bool movedAny = false;
    progressOnce(&work, &movedAny);
    if (done()) break;
    // Every 64th round goes on to the clock and the peer, even while others' messages flow.
    if (active && round % 64 != 0) {
      if (!movedAny) shm::cpuRelax();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) return leave(Progress::TimedOut);
    if (now - lastLook >= kLookInterval) {
      lastLook = now;
      *lost = lostPeer(peer);
      if (!lost->empty()) return leave(Progress::PeerLost);
    }
    if (active && now >= pollUntil) {
      // Going to sleep, this waiter leaves the channels to the listener at once.
      active = false;
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      activeWaiters_.fetch_sub(1, std::memory_order_seq_cst);
      doorbell_.ring();
    }
    if (!active) {
      detail::futexWait(changed_, seen, std::min(deadline, now + kLookInterval) - now);
    }
  }
  return leave(Progress::Done);
}

bool SharedP2P::anyQueued() const {
  return std::any_of(peers_.begin(), peers_.end(),
                     [&](int r) { return !links_[r].queued.empty(); });
}

void SharedP2P::listen() {
  detail::nameThisThread("c10d-gloo-shm");
  detail::blockSigpipeInThisThread();
  GlooBackend::Runtime::onProgressThread() = true;
  std::vector<std::shared_ptr<SharedWork>> unclaimed;
  while (!stopping_.load(std::memory_order_acquire)) {
    // A waiter that polls makes progress itself; one that finishes does not say so (kHandOver).
    if (activeWaiters_.load(std::memory_order_acquire) > 0) {
      std::this_thread::sleep_for(kHandOver);
      continue;
    }
    const int64_t handOver =
        lastWaiterNs_.load(std::memory_order_relaxed) +
        std::chrono::duration_cast<std::chrono::nanoseconds>(kHandOver).count();
    if (sleepers_.load(std::memory_order_acquire) == 0 && nowNs() < handOver) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(handOver - nowNs()));
      continue;
    }
    bool movedAny = false;
    if (tryAcquire()) {
      takeInbox();
      movedAny = poll();
      if (pulls_.first != nullptr) movedAny = takePulls(nullptr) || movedAny;
      if (determined_.first != nullptr) sweepDetermined(&unclaimed);
      const bool queued = anyQueued();
      release();
      // Ops nobody waits for: completed here, without the token (a completion may issue ops).
      for (auto& work : unclaimed) work->completeIfUnclaimed();
      if (!unclaimed.empty()) {
        unclaimed.clear();
        continue;
      }
      if (movedAny) continue;
      const uint32_t armed = doorbell_.arm();
      bool again = false;
      if (tryAcquire()) {
        again = poll();
        release();
      } else {
        again = true;  // someone else makes progress now
      }
      if (!again) doorbell_.sleep(armed, queued ? kRetryQueued : kListenerSleep);
      doorbell_.disarm();
    } else {
      std::this_thread::sleep_for(kHandOver);
    }
  }
}

void SharedP2P::stop() {
  if (stopping_.exchange(true)) return;
  doorbell_.ring();
  {
    std::lock_guard<std::mutex> guard(listenerMutex_);
    if (listener_.joinable() && listener_.get_id() != std::this_thread::get_id()) {
      listener_.join();
    }
  }
  // The engine lets every op go, failing any still in flight (the runtime failed those it knew
  // of before: abortAll).
  failAll();
  // Idle Works hold the runtime, which holds this engine: they go now, the others as they come
  // back.
  sends_->close();
  recvs_->close();
}

// ---- SharedWork ----

void SharedWork::rebind(const Op& op) {
  P2PWork::rebind(op);
  aborted_.store(false, std::memory_order_relaxed);
  determined_.store(false, std::memory_order_relaxed);
  next_ = nullptr;
}

void SharedWork::aborting(bool /*claimedHere*/) {
  aborted_.store(true, std::memory_order_release);
  engine_.wakeWaiters();
}

// ---- SharedSend ----

void SharedSend::run(Clock::time_point deadline) {
  std::string lost;
  const SharedP2P::Progress progress = engine_.progressUntil(*this, deadline, peer_, &lost);
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard(mutex_);
    std::rethrow_exception(abortError(abortReason_));
  }
  if (progress == SharedP2P::Progress::TimedOut) {
    runtime_->fail(description(), detail::concat("Timed out waiting ", timeout().count(),
                                                 "ms for a matching recv"));
  }
  if (progress == SharedP2P::Progress::PeerLost) runtime_->fail(description(), lost);
  engine_.letGo(*this);
  C10D_CHECK(answer_.matched == 1, InvalidArgument,
             sizesDisagree(tensor_.nbytes(), answer_.bytes, runtime_->rank, peer_));
}

// ---- SharedRecv ----

void SharedRecv::recycle() {
  if (!pullError_.empty()) pullError_.clear();
  source_ = -1;
  P2PWork::recycle();
}

void SharedRecv::aborting(bool claimedHere) {
  // Failed here: no head may be delivered into it any more.
  if (claimedHere) engine_.withdraw(this);
  SharedWork::aborting(claimedHere);
}

void SharedRecv::run(Clock::time_point deadline) {
  std::string lost;
  SharedP2P::Progress progress = engine_.progressUntil(*this, deadline, peer_, &lost);
  if (progress != SharedP2P::Progress::Done || aborted_.load(std::memory_order_acquire)) {
    const bool withdrawn = engine_.withdraw(this);
    if (aborted_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> guard(mutex_);
      std::rethrow_exception(abortError(abortReason_));
    }
    // As Gloo's own waits: a timeout or a lost peer is the group's failure. (Not withdrawn: a
    // head was delivered meanwhile, and the receive goes on.)
    if (withdrawn && progress == SharedP2P::Progress::PeerLost) runtime_->fail(description(), lost);
    if (withdrawn) {
      runtime_->fail(description(), detail::concat("Timed out waiting ", timeout().count(),
                                                   "ms for a matching send"));
    }
    // Matched meanwhile: its payload may still be on its way.
    while (!determined_.load(std::memory_order_acquire) &&
           !aborted_.load(std::memory_order_acquire)) {
      progress = engine_.progressUntil(*this, Clock::now() + timeout(), peer_, &lost);
      if (progress == SharedP2P::Progress::PeerLost) runtime_->fail(description(), lost);
    }
  }
  engine_.letGo(*this);
  setSourceRank(source_);
  const uint64_t taken = tensor_.nbytes();
  if (!pullError_.empty()) {
    runtime_->fail(description(),
                   detail::concat(engine_.mesh().lossText(shm::Wait::Closed, source_, false), ": ",
                                  pullError_));
  }
  C10D_CHECK(matchedHead_.bytes == taken, InvalidArgument,
             sizesDisagree(matchedHead_.bytes, taken, source_, runtime_->rank));
}

}  // namespace c10d::inline v1
