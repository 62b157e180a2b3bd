// The fusion queue's cycle (see the header), on its thread:
//   1. take what was submitted since the last cycle;
//   2. one BAND allreduce: word 0 says whether every rank can skip the exchange (bit 0: nothing
//      new or stalled here) and keep running (bit 1: not shutting down); the other words hold a
//      bit per cached name, set where that name is pending with its cached signature;
//   3. when some rank needs it, the exchange: every rank's pending names and signatures, to
//      every rank, which all reach the same verdicts (agreed, mismatched, still missing on some);
//   4. run what every rank has, in cache-bit order, allreduces fused by kind up to the threshold.
// Every rank runs the same collectives in the same order, so the cycles stay in lockstep.

#include "c10d/training/FusionQueue.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Json.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"
#include "c10d/training/HostValues.hpp"

namespace c10d::inline v1 {

namespace {

using Clock = std::chrono::steady_clock;

enum class Kind : int64_t { Allreduce = 0, Allgather = 1, Broadcast = 2 };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::Allreduce:
      return "allreduce";
    case Kind::Allgather:
      return "allgather";
    case Kind::Broadcast:
      return "broadcast";
  }
  return "?";
}

struct Request {
  std::string name;
  Kind kind = Kind::Allreduce;
  Tensor tensor;  // allreduce, broadcast: in place; allgather: the input
  Tensor output;  // allgather
  ReduceOp reduceOp = ReduceOp::SUM;
  int root = 0;
  std::shared_ptr<Future> future;
  Clock::time_point submitted;
  bool warned = false;
  std::vector<int64_t> signature;  // signatureOf, computed once
  bool cached = false;             // its name has a cache bit with this signature
};

Request requestOf(const std::string& name, Kind kind, const Tensor& tensor) {
  Request request;
  request.name = name;
  request.kind = kind;
  request.tensor = tensor;
  return request;
}

// What every rank must agree on for a name: kind, reduce op (and factor), root, dtype, device,
// sizes. All values >= -1, as allgatherValues needs.
std::vector<int64_t> signatureOf(const Request& r) {
  int64_t factorBits = 0;
  double factor = r.reduceOp.factor();
  std::memcpy(&factorBits, &factor, sizeof(factor));
  std::vector<int64_t> s = {static_cast<int64_t>(r.kind),
                            static_cast<int64_t>(r.reduceOp.kind()),
                            factorBits >= 0 ? factorBits : -2 - factorBits,  // keep it >= -1
                            r.root,
                            static_cast<int64_t>(r.tensor.dtype()),
                            static_cast<int64_t>(r.tensor.device().type),
                            r.tensor.device().index,
                            r.tensor.dim()};
  s.insert(s.end(), r.tensor.sizes().begin(), r.tensor.sizes().end());
  return s;
}

std::string describeSignature(const std::vector<int64_t>& s) {
  std::string sizes;
  for (size_t k = 8; k < s.size(); ++k) sizes += (k > 8 ? ", " : "") + std::to_string(s[k]);
  Kind kind = static_cast<Kind>(s[0]);
  std::string text =
      detail::concat(kindName(kind), " ", static_cast<ScalarType>(s[4]), "[", sizes, "]");
  if (kind == Kind::Allreduce) text += detail::concat(" ", name(static_cast<ReduceOp::Kind>(s[1])));
  if (kind == Kind::Broadcast) text += detail::concat(" root ", s[3]);
  if (s[5] != static_cast<int64_t>(DeviceType::CPU)) text += detail::concat(" on cuda:", s[6]);
  return text;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

struct TimelineEvent {
  std::string tensor;
  const char* phase;
  int64_t startUs;
  int64_t durationUs;
};

}  // namespace

struct FusionQueue::Impl {
  std::shared_ptr<ProcessGroup> group;  // the queue's own
  FusionOptions options;
  Device control;  // where the negotiation's integers travel

  mutable std::mutex mutex;  // guards what submitters and the thread share, below
  std::vector<Request> submitted;
  std::set<std::string> namesHere;  // submitted or pending on this rank
  bool shutdownRequested = false;
  bool stopped = false;
  FusionStats stats;
  std::thread thread;

  // The thread's own.
  std::map<std::string, Request> pending;
  std::vector<std::string> cacheNames;  // by bit
  std::vector<std::vector<int64_t>> cacheSignatures;
  std::map<std::string, size_t> cacheBits;
  std::vector<TimelineEvent> timeline;
  Clock::time_point epoch = Clock::now();

  int64_t sinceEpochUs(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - epoch).count();
  }
  void note(const std::string& tensor, const char* phase, Clock::time_point start,
            Clock::time_point end) {
    if (options.timelinePath.empty()) return;
    timeline.push_back(
        {tensor, phase, sinceEpochUs(start), sinceEpochUs(end) - sinceEpochUs(start)});
  }

  std::shared_ptr<Future> submit(Request request) {
    C10D_CHECK(!request.name.empty(), InvalidArgument, "FusionQueue: a tensor needs a name");
    C10D_CHECK(request.tensor.defined() && request.tensor.isContiguous(), InvalidArgument,
               "FusionQueue: ", kindName(request.kind), " '", request.name,
               "' needs a defined, contiguous tensor, got ", request.tensor.describe());
    request.future = std::make_shared<Future>();
    request.submitted = Clock::now();
    std::shared_ptr<Future> future = request.future;
    std::lock_guard<std::mutex> guard(mutex);
    C10D_CHECK(!stopped && !shutdownRequested, StateError, "FusionQueue: ", kindName(request.kind),
               " '", request.name, "' after the queue shut down");
    C10D_CHECK(namesHere.insert(request.name).second, InvalidArgument, "FusionQueue: '",
               request.name, "' is already pending on rank ", group->rank(),
               "; wait for its Future before submitting the name again");
    submitted.push_back(std::move(request));
    return future;
  }

  // Completes request (outside the mutex: callbacks run here) and forgets its name.
  void finish(Request& request, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      namesHere.erase(request.name);
      if (!error) ++stats.tensors;
    }
    if (error) {
      request.future->setError(error);
    } else {
      request.future->markCompleted(
          {request.kind == Kind::Allgather ? request.output : request.tensor});
    }
  }

  void failAll(std::exception_ptr error) {
    for (auto& [name, request] : pending) finish(request, error);
    pending.clear();
  }

  void run() {
    detail::nameThisThread("c10d-fusion");
    const auto stallAfter =
        std::min<std::chrono::milliseconds>(options.stallWarning, group->timeout());
    while (true) {
      std::this_thread::sleep_for(options.cycleTime);
      bool leaving;
      {
        std::lock_guard<std::mutex> guard(mutex);
        for (Request& request : submitted) {
          request.signature = signatureOf(request);
          auto bit = cacheBits.find(request.name);
          request.cached =
              bit != cacheBits.end() && cacheSignatures[bit->second] == request.signature;
          pending.emplace(request.name, std::move(request));
        }
        submitted.clear();
        leaving = shutdownRequested;
      }
      const auto start = Clock::now();
      bool exchange = false;
      for (const auto& [name, request] : pending) {
        exchange |= !request.cached || start - request.submitted >= stallAfter;
      }
      // 2. What every rank has, and whether anyone needs more.
      std::vector<int64_t> words(1 + (cacheNames.size() + 63) / 64, 0);
      words[0] = (exchange ? 0 : 1) | (leaving ? 0 : 2);
      for (const auto& [name, request] : pending) {
        if (!request.cached) continue;
        size_t bit = cacheBits.at(name);
        words[1 + bit / 64] |= int64_t{1} << (bit % 64);
      }
      std::vector<std::string> ready;
      try {
        words = detail::onDevice(words, control, [&](const Tensor& t) {
          group->allreduce(t, {.reduceOp = ReduceOp::BAND})->wait();
        });
        if (!(words[0] & 2)) {
          failAll(std::make_exception_ptr(StateError(
              "FusionQueue: the queue shut down (on this rank or another) before this tensor "
              "was reduced")));
          break;
        }
        for (size_t bit = 0; bit < cacheNames.size(); ++bit) {
          if (words[1 + bit / 64] & (int64_t{1} << (bit % 64))) ready.push_back(cacheNames[bit]);
        }
        if (!(words[0] & 1)) exchangeRequests(start, ready);
      } catch (...) {
        failAll(std::current_exception());
        break;
      }
      const auto agreed = Clock::now();
      {
        std::lock_guard<std::mutex> guard(mutex);
        ++stats.cycles;
        stats.exchanges += (words[0] & 1) ? 0 : 1;
        stats.negotiationUs += std::chrono::duration<double, std::micro>(agreed - start).count();
      }
      for (const std::string& name : ready)
        note(name, "negotiate", pending.at(name).submitted, agreed);
      try {
        execute(ready);
      } catch (...) {
        failAll(std::current_exception());
        break;
      }
    }
    std::lock_guard<std::mutex> guard(mutex);
    stopped = true;
    for (Request& request : submitted) namesHere.erase(request.name);
    for (Request& request : submitted) {
      request.future->setError(std::make_exception_ptr(
          StateError("FusionQueue: the queue shut down before this tensor was reduced")));
    }
    submitted.clear();
  }

  // 3. Every rank's pending names and signatures, to every rank; the same verdicts everywhere.
  void exchangeRequests(Clock::time_point now, std::vector<std::string>& ready) {
    std::vector<int64_t> mine;
    for (const auto& [name, request] : pending) {
      mine.push_back(static_cast<int64_t>(name.size()));
      for (unsigned char c : name) mine.push_back(c);
      const std::vector<int64_t>& signature = request.signature;
      mine.push_back(static_cast<int64_t>(signature.size()));
      mine.insert(mine.end(), signature.begin(), signature.end());
      // How long it has waited here: the ranks give up on a name together, when its oldest
      // request reaches the timeout, so they all name the same missing ranks.
      mine.push_back(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - request.submitted).count());
    }
    std::vector<std::vector<int64_t>> all = detail::allgatherValues(*group, mine, control);
    const int size = group->size();
    // name -> each rank's signature (empty: not pending there)
    std::map<std::string, std::vector<std::vector<int64_t>>> byName;
    std::map<std::string, int64_t> oldestMs;  // the longest any rank has waited for the name
    for (int r = 0; r < size; ++r) {
      const std::vector<int64_t>& d = all[r];
      for (size_t at = 0; at < d.size();) {
        std::string name;
        for (int64_t k = 0; k < d[at]; ++k) name.push_back(static_cast<char>(d[at + 1 + k]));
        at += 1 + d[at];
        std::vector<int64_t> signature(d.begin() + at + 1, d.begin() + at + 1 + d[at]);
        at += 1 + d[at];
        auto& slots = byName[name];
        slots.resize(size);
        slots[r] = std::move(signature);
        int64_t& oldest = oldestMs[name];
        oldest = std::max(oldest, d[at++]);
      }
    }
    std::set<std::string> alreadyReady(ready.begin(), ready.end());
    for (auto& [name, signatures] : byName) {  // sorted: new cache bits in the same order
      std::vector<int> missing;
      for (int r = 0; r < size; ++r) {
        if (signatures[r].empty()) missing.push_back(r);
      }
      auto mine = pending.find(name);
      if (!missing.empty()) {
        if (mine == pending.end()) continue;
        Request& request = mine->second;
        auto waited =
            std::chrono::duration_cast<std::chrono::milliseconds>(now - request.submitted);
        if (oldestMs[name] >= group->timeout().count()) {
          finish(request, std::make_exception_ptr(TimeoutError(detail::concat(
                              "FusionQueue: ", kindName(request.kind), " '", name, "': rank(s) ",
                              rankList(missing), " did not submit it within ",
                              group->timeout().count(), " ms"))));
          pending.erase(mine);
        } else if (waited >= options.stallWarning && !request.warned) {
          request.warned = true;
          C10D_LOG(Warning, "FusionQueue on rank ", group->rank(), ": ", kindName(request.kind),
                   " '", name, "' has waited ", waited.count(), " ms for rank(s) ",
                   rankList(missing), ", which have not submitted it");
        }
        continue;
      }
      if (alreadyReady.count(name)) continue;
      int differs = -1;
      for (int r = 1; r < size && differs < 0; ++r) {
        if (signatures[r] != signatures[0]) differs = r;
      }
      if (differs >= 0) {
        if (mine != pending.end()) {
          finish(
              mine->second,
              std::make_exception_ptr(InvalidArgument(detail::concat(
                  "FusionQueue: '", name, "': rank 0 submitted ", describeSignature(signatures[0]),
                  " but rank ", differs, " ", describeSignature(signatures[differs]),
                  "; every rank must submit a name with the same op, dtype and shape"))));
          pending.erase(mine);
        }
        continue;
      }
      auto cached = cacheBits.find(name);
      if (cached == cacheBits.end()) {
        cacheBits[name] = cacheNames.size();
        cacheNames.push_back(name);
        cacheSignatures.push_back(signatures[0]);
      } else {
        cacheSignatures[cached->second] = signatures[0];
      }
      ready.push_back(name);
    }
    // The agreed order: cache bits (new names last, by name).
    std::sort(ready.begin(), ready.end(), [&](const std::string& a, const std::string& b) {
      return cacheBits.at(a) < cacheBits.at(b);
    });
  }

  // 4. The ready requests, fused where they can be.
  void execute(const std::vector<std::string>& ready) {
    std::vector<Request*> batch;
    size_t batchBytes = 0;
    auto flush = [&] {
      if (!batch.empty()) reduceFused(batch);
      batch.clear();
      batchBytes = 0;
    };
    for (const std::string& name : ready) {
      Request& request = pending.at(name);
      if (request.kind != Kind::Allreduce) {
        flush();
        runAlone(request);
        continue;
      }
      bool fits = !batch.empty() && sameKind(*batch.front(), request) &&
                  batchBytes + request.tensor.nbytes() <= options.fusionThresholdBytes;
      if (!batch.empty() && !fits) flush();
      batch.push_back(&request);
      batchBytes += request.tensor.nbytes();
    }
    flush();
    for (const std::string& name : ready) pending.erase(name);
  }

  static bool sameKind(const Request& a, const Request& b) {
    return a.tensor.dtype() == b.tensor.dtype() && a.tensor.device() == b.tensor.device() &&
           a.reduceOp.kind() == b.reduceOp.kind() && a.reduceOp.factor() == b.reduceOp.factor();
  }

  void countCollective() {
    std::lock_guard<std::mutex> guard(mutex);
    ++stats.collectives;
  }

  void reduceFused(const std::vector<Request*>& batch) {
    const Tensor& first = batch.front()->tensor;
    if (batch.size() == 1) {
      auto start = Clock::now();
      std::exception_ptr error;
      try {
        group->allreduce(first, {.reduceOp = batch.front()->reduceOp})->wait();
      } catch (...) {
        error = std::current_exception();
      }
      countCollective();
      note(batch.front()->name, "allreduce", start, Clock::now());
      finish(*batch.front(), error);
      return;
    }
    int64_t numel = 0;
    for (Request* r : batch) numel += r->tensor.numel();
    std::exception_ptr error;
    auto start = Clock::now(), copied = start, reduced = start;
    try {
      Tensor fused = Tensor::empty({numel}, first.dtype(), first.device());
      char* at = static_cast<char*>(fused.data());
      auto part = [&](Request* r) {
        Tensor view = Tensor::fromBlob(at, r->tensor.dtype(), r->tensor.sizes(), r->tensor.device(),
                                       {}, fused.holder());
        at += r->tensor.nbytes();
        return view;
      };
      for (Request* r : batch) copyTensor(part(r), r->tensor);
      copied = Clock::now();
      group->allreduce(fused, {.reduceOp = batch.front()->reduceOp})->wait();
      reduced = Clock::now();
      at = static_cast<char*>(fused.data());
      for (Request* r : batch) copyTensor(r->tensor, part(r));
    } catch (...) {
      error = std::current_exception();
    }
    countCollective();
    auto end = Clock::now();
    for (Request* r : batch) {
      note(r->name, "copy in", start, copied);
      note(r->name, "allreduce (fused)", copied, reduced);
      note(r->name, "copy out", reduced, end);
      finish(*r, error);
    }
  }

  void runAlone(Request& request) {
    auto start = Clock::now();
    std::exception_ptr error;
    try {
      if (request.kind == Kind::Allgather) {
        group->allgatherIntoTensor(request.output, request.tensor)->wait();
      } else {
        group->broadcast(request.tensor, {.rootRank = request.root})->wait();
      }
    } catch (...) {
      error = std::current_exception();
    }
    countCollective();
    note(request.name, kindName(request.kind), start, Clock::now());
    finish(request, error);
  }

  void writeTimeline() {
    if (options.timelinePath.empty()) return;
    std::ofstream out(options.timelinePath);
    if (!out) {
      C10D_LOG(Warning, "FusionQueue: cannot write the timeline to ", options.timelinePath);
      return;
    }
    // One row (tid) per tensor, named by a metadata event.
    std::map<std::string, int> rows;
    for (const TimelineEvent& e : timeline) rows.emplace(e.tensor, static_cast<int>(rows.size()));
    out << "{\"traceEvents\": [\n";
    bool first = true;
    auto quoted = [](const std::string& text) {
      std::string json;
      detail::appendJsonString(json, text);
      return json;
    };
    for (const auto& [tensor, row] : rows) {
      out << (first ? "" : ",\n")
          << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << group->rank()
          << ", \"tid\": " << row << ", \"args\": {\"name\": " << quoted(tensor) << "}}";
      first = false;
    }
    for (const TimelineEvent& e : timeline) {
      out << (first ? "" : ",\n") << "{\"name\": \"" << e.phase
          << "\", \"cat\": " << quoted(e.tensor) << ", \"ph\": \"X\", \"ts\": " << e.startUs
          << ", \"dur\": " << e.durationUs << ", \"pid\": " << group->rank()
          << ", \"tid\": " << rows.at(e.tensor) << "}";
      first = false;
    }
    out << "\n]}\n";
  }
};

FusionQueue::FusionQueue(ProcessGroup& group, FusionOptions options)
    : impl_(std::make_unique<Impl>()) {
  C10D_CHECK(options.cycleTime.count() > 0 && options.fusionThresholdBytes > 0, InvalidArgument,
             "FusionQueue: the cycle time (", options.cycleTime.count(),
             " us) and the fusion threshold (", options.fusionThresholdBytes,
             " bytes) must be positive");
  C10D_CHECK(group.isMember(), InvalidArgument, "FusionQueue: this rank is not a member of group '",
             group.groupName(), "'");
  std::vector<int> everyone(group.size());
  for (int r = 0; r < group.size(); ++r) everyone[r] = r;
  impl_->group = group.newGroup(everyone);
  impl_->options = std::move(options);
  // The control integers go where the group's backend takes tensors: the CPU unless it serves
  // only CUDA (then the local rank's device).
  bool cpu = true;
  try {
    group.backend(DeviceType::CPU);
  } catch (const InvalidArgument&) {
    cpu = false;
  }
  impl_->control =
      cpu ? Device::cpu()
          : Device::cuda(std::max(0, group.localRank()) % std::max(1, cudaDeviceCount()));
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

FusionQueue::~FusionQueue() {
  shutdown();
}

void FusionQueue::shutdown() {
  {
    std::lock_guard<std::mutex> guard(impl_->mutex);
    impl_->shutdownRequested = true;
  }
  if (impl_->thread.joinable()) {
    impl_->thread.join();
    impl_->writeTimeline();
  }
}

FusionStats FusionQueue::stats() const {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  return impl_->stats;
}

std::shared_ptr<Future> FusionQueue::allreduce(const std::string& name, const Tensor& tensor,
                                               ReduceOp op) {
  checkReduceOp(op, tensor.dtype(), "FusionQueue allreduce '" + name + "'");
  Request request = requestOf(name, Kind::Allreduce, tensor);
  request.reduceOp = op;
  return impl_->submit(std::move(request));
}

std::shared_ptr<Future> FusionQueue::allgather(const std::string& name, const Tensor& input,
                                               const Tensor& output) {
  C10D_CHECK(output.defined() && output.isContiguous() && output.dtype() == input.dtype() &&
                 output.device() == input.device() &&
                 output.numel() == input.numel() * impl_->group->size(),
             InvalidArgument, "FusionQueue: allgather '", name, "': output ", output.describe(),
             " must be contiguous, like input ", input.describe(), ", with ", impl_->group->size(),
             " times its elements");
  Request request = requestOf(name, Kind::Allgather, input);
  request.output = output;
  return impl_->submit(std::move(request));
}

std::shared_ptr<Future> FusionQueue::broadcast(const std::string& name, const Tensor& tensor,
                                               int root) {
  C10D_CHECK(root >= 0 && root < impl_->group->size(), InvalidArgument, "FusionQueue: broadcast '",
             name, "': root ", root, " is not a rank of a group of ", impl_->group->size());
  Request request = requestOf(name, Kind::Broadcast, tensor);
  request.root = root;
  return impl_->submit(std::move(request));
}

}  // namespace c10d::inline v1
