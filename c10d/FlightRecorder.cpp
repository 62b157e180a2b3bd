#include "c10d/FlightRecorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "c10d/AtomicOp.hpp"
#include "c10d/FlightRecorderSignal.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Json.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"
#include "c10d/core/Ticks.hpp"

namespace c10d::inline v1 {
namespace {

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* stateName(FlightRecorder::State state) {
  switch (state) {
    case FlightRecorder::State::Queued:
      return "queued";
    case FlightRecorder::State::Started:
      return "started";
    case FlightRecorder::State::Completed:
      return "completed";
    case FlightRecorder::State::Failed:
      return "failed";
  }
  return "unknown";
}

// A group name may hold '/' or spaces; the file name keeps letters, digits, '-' and '_'.
std::string fileSafe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return out;
}

// Live recorders, for dumpAll and the signal.
struct Registry {
  std::mutex mutex;
  std::set<const FlightRecorder*> recorders;
};
Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: the signal thread may use it
  return *instance;
}

// The signal handler may only write(2): it wakes a thread that does the dumping.
int signalPipe[2] = {-1, -1};
// The byte written is the signal's number, so that a process with both USR1 and USR2 installed
// names the one that arrived.
void onDumpSignal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] ssize_t ignored = ::write(signalPipe[1], &byte, 1);
}

// Installs the dump signal's handler when C10D_FLIGHT_RECORDER_SIGNAL names one; read at each
// recorder's creation, so a later group can still turn it on. Once installed it stays.
void installSignalHandlerIfAsked() {
  const int signal = flightRecorderSignalFromEnvironment();
  if (signal == 0) return;
  static std::mutex mutex;
  static std::atomic<int> installed{0};
  std::lock_guard<std::mutex> guard(mutex);
  if (installed == signal) return;
  if (signalPipe[0] < 0) {
    C10D_CHECK(::pipe(signalPipe) == 0, Error,
               "flight recorder: pipe() for the dump signal failed: ", std::strerror(errno));
    std::thread([] {
      detail::nameThisThread("c10d-flightrec");
      char byte;
      while (::read(signalPipe[0], &byte, 1) > 0 || errno == EINTR) {
        FlightRecorder::dumpAll(byte == SIGUSR1 ? "signal SIGUSR1" : "signal SIGUSR2");
      }
    }).detach();
  }
  struct sigaction action {};
  action.sa_handler = onDumpSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(signal, &action, nullptr);
  installed = signal;
}

}  // namespace

// One slot: the op, written by the thread that records it (a seqlock: AtomicOp); its state (with
// the number it belongs to) and times, which its Work's completion updates from any thread.
struct FlightRecorder::Ring {
  struct Slot {
    detail::AtomicOp op;
    std::atomic<uint64_t> status{0};  // (number + 1) << 2 | State; 0: empty
    std::atomic<uint64_t> queuedTicks{0};
    std::atomic<uint64_t> startedTicks{0};
    std::atomic<uint64_t> finishedTicks{0};
  };
  // Slots for the last capacity entries: a power of two of them, so that finding one is a mask.
  Ring(size_t capacity, bool pointToPoint)
      : slots(new Slot[std::bit_ceil(capacity)]),
        mask(std::bit_ceil(capacity) - 1),
        capacity(capacity),
        pointToPoint(pointToPoint) {}
  std::unique_ptr<Slot[]> slots;
  const size_t mask;
  const size_t capacity;
  const bool pointToPoint;
  Slot& of(uint64_t number) const { return slots[number & mask]; }
  // One past the highest number recorded: found by a reader (a dump), so that recording keeps
  // no shared counter.
  uint64_t next() const {
    uint64_t next = 0;
    for (size_t i = 0; i <= mask; ++i) {
      next = std::max(next, slots[i].status.load(std::memory_order_acquire) >> 2);
    }
    return next;
  }
};

FlightRecorder::FlightRecorder(std::string group, int rank, int size, size_t capacity)
    : group_(std::move(group)),
      rank_(rank),
      size_(size),
      collectives_(std::make_unique<Ring>(std::max<size_t>(capacity, 1), false)),
      pointToPoint_(std::make_unique<Ring>(std::max<size_t>(capacity, 1), true)) {
  C10D_CHECK(capacity > 0, InvalidArgument, "flight recorder of group '", group_,
             "': capacity must be positive");
  installSignalHandlerIfAsked();
  std::lock_guard<std::mutex> guard(registry().mutex);
  registry().recorders.insert(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> guard(registry().mutex);
  registry().recorders.erase(this);
}

namespace {

constexpr uint64_t statusOf(uint64_t number, FlightRecorder::State state) {
  return ((number + 1) << 2) | static_cast<uint64_t>(state);
}

}  // namespace

void FlightRecorder::record(Ring& ring, const Op& op, State state) {
  Ring::Slot& slot = ring.of(op.seq);
  const uint64_t ticks = detail::ticks();
  slot.op.begin();
  slot.op.store(op);
  slot.queuedTicks.store(ticks, std::memory_order_relaxed);
  slot.startedTicks.store(state == State::Started ? ticks : 0, std::memory_order_relaxed);
  slot.finishedTicks.store(0, std::memory_order_relaxed);
  slot.status.store(statusOf(op.seq, state), std::memory_order_relaxed);
  slot.op.end();
}

void FlightRecorder::advance(Ring& ring, uint64_t number, State to, const std::string* error) {
  Ring::Slot& slot = ring.of(number);
  // Ignored once overwritten (more ops in flight than the ring holds). Not atomic with the
  // store below: an op recorded into this slot right between (the ring's whole capacity of ops
  // later, while this one is still in flight) may lose its entry; a compare-and-swap here would
  // cost every op an atomic operation for that case.
  if ((slot.status.load(std::memory_order_relaxed) >> 2) != number + 1) return;
  (to == State::Started ? slot.startedTicks : slot.finishedTicks)
      .store(detail::ticks(), std::memory_order_relaxed);
  if (error != nullptr && !error->empty()) {
    std::lock_guard<std::mutex> guard(errorsMutex_);
    errors_[{ring.pointToPoint, number}] = *error;
    // Forget the messages of entries the ring no longer holds.
    const uint64_t oldest = number >= ring.capacity ? number - ring.capacity + 1 : 0;
    for (auto it = errors_.begin(); it != errors_.end();) {
      const bool gone = it->first.first == ring.pointToPoint && it->first.second < oldest;
      it = gone ? errors_.erase(it) : std::next(it);
    }
  }
  slot.status.store(statusOf(number, to), std::memory_order_release);
}

void FlightRecorder::queued(const Op& op) {
  record(*collectives_, op, State::Queued);
}

void FlightRecorder::started(const Op& op) {
  record(*collectives_, op, State::Started);
}

void FlightRecorder::started(uint64_t sequence) {
  advance(*collectives_, sequence, State::Started, nullptr);
}

void FlightRecorder::finished(uint64_t sequence, const std::string& error) {
  advance(*collectives_, sequence, error.empty() ? State::Completed : State::Failed, &error);
}

void FlightRecorder::completed(uint64_t sequence) {
  advance(*collectives_, sequence, State::Completed, nullptr);
}

void FlightRecorder::pointToPointCompleted(uint64_t number) {
  advance(*pointToPoint_, number, State::Completed, nullptr);
}

void FlightRecorder::pointToPointStarted(const Op& op) {
  record(*pointToPoint_, op, State::Started);
}

void FlightRecorder::pointToPointFinished(uint64_t number, const std::string& error) {
  advance(*pointToPoint_, number, error.empty() ? State::Completed : State::Failed, &error);
}

std::vector<FlightRecorder::Entry> FlightRecorder::read(const Ring& ring) const {
  const bool p2p = ring.pointToPoint;
  std::vector<Entry> out;
  const uint64_t next = ring.next();
  const uint64_t first = next > ring.capacity ? next - ring.capacity : 0;
  for (uint64_t number = first; number < next; ++number) {
    const Ring::Slot& slot = ring.of(number);
    Entry entry;
    uint64_t status = 0, queued = 0, started = 0, finished = 0;
    std::optional<Op> op = slot.op.read([&] {
      status = slot.status.load(std::memory_order_acquire);
      queued = slot.queuedTicks.load(std::memory_order_relaxed);
      started = slot.startedTicks.load(std::memory_order_relaxed);
      finished = slot.finishedTicks.load(std::memory_order_relaxed);
    });
    const bool consistent = op.has_value();
    if (consistent) entry.op = *op;
    if (!consistent || (status >> 2) != number + 1) continue;
    entry.state = static_cast<State>(status & 3);
    entry.queuedUs = detail::toSystemMicros(queued);
    // An op that failed before it started (the DETAIL check) has no start time.
    entry.startedUs =
        entry.state >= State::Started && started != 0 ? detail::toSystemMicros(started) : 0;
    entry.finishedUs =
        entry.state >= State::Completed && finished != 0 ? detail::toSystemMicros(finished) : 0;
    if (entry.state == State::Failed) {
      std::lock_guard<std::mutex> guard(errorsMutex_);
      auto it = errors_.find({p2p, number});
      if (it != errors_.end()) entry.error = it->second;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  return read(*collectives_);
}

std::vector<FlightRecorder::Entry> FlightRecorder::pointToPointEntries() const {
  return read(*pointToPoint_);
}

std::string FlightRecorder::toJson(const std::string& reason) const {
  std::string out = "{\"group\":";
  detail::appendJsonString(out, group_);
  out += detail::concat(",\"rank\":", rank_, ",\"size\":", size_, ",\"reason\":");
  detail::appendJsonString(out, reason);
  out += detail::concat(",\"dumped_us\":", nowUs(), ",\"entries\":[");
  bool first = true;
  for (const Entry& entry : entries()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += detail::concat("{\"seq\":", entry.op.seq, ",\"op\":");
    detail::appendJsonString(out, std::string(name(entry.op.type)));
    out += ",\"call\":";
    detail::appendJsonString(out, describeNumbered(entry.op));
    out += ",\"state\":";
    detail::appendJsonString(out, stateName(entry.state));
    out += detail::concat(",\"queued_us\":", entry.queuedUs, ",\"started_us\":", entry.startedUs,
                          ",\"finished_us\":", entry.finishedUs, ",\"error\":");
    detail::appendJsonString(out, entry.error);
    out += "}";
  }
  out += "],\"p2p\":[";
  first = true;
  for (const Entry& entry : pointToPointEntries()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += detail::concat("{\"n\":", entry.op.seq, ",\"op\":");
    detail::appendJsonString(out, std::string(name(entry.op.type)));
    out += detail::concat(",\"peer\":", entry.op.peer, ",\"tag\":", entry.op.tag, ",\"dtype\":");
    detail::appendJsonString(out, std::string(name(entry.op.dtype)));
    out += detail::concat(",\"numel\":", entry.op.count, ",\"state\":");
    detail::appendJsonString(out, stateName(entry.state));
    out += detail::concat(",\"started_us\":", entry.startedUs,
                          ",\"finished_us\":", entry.finishedUs, ",\"error\":");
    detail::appendJsonString(out, entry.error);
    out += "}";
  }
  out += "]}\n";
  return out;
}

std::string FlightRecorder::dump(const std::string& reason) const {
  std::string path = detail::concat(config::value("C10D_FLIGHT_RECORDER_DIR"), "/c10d_flight_",
                                    fileSafe(group_), "_rank", rank_, ".json");
  std::string json = toJson(reason);
  // Written beside and renamed, so a reader never sees half a dump; beside under a name of its
  // own, since a failure's dump and a signal's may be written at once (the last rename wins).
  static std::atomic<uint64_t> dumps{0};
  std::string partial = detail::concat(path, ".partial.", ::getpid(), ".", dumps.fetch_add(1));
  {
    std::ofstream file(partial, std::ios::trunc);
    file << json;
    C10D_CHECK(file.good(), Error, "flight recorder of group '", group_, "' rank ", rank_,
               ": cannot write ", partial);
  }
  C10D_CHECK(std::rename(partial.c_str(), path.c_str()) == 0, Error, "flight recorder of group '",
             group_, "' rank ", rank_, ": cannot rename ", partial, " to ", path, ": ",
             std::strerror(errno));
  return path;
}

std::vector<std::string> FlightRecorder::dumpAll(const std::string& reason) {
  std::vector<std::string> paths;
  std::lock_guard<std::mutex> guard(registry().mutex);
  for (const FlightRecorder* recorder : registry().recorders) {
    try {
      paths.push_back(recorder->dump(reason));
      C10D_LOG(Warning, "flight recorder of group '", recorder->group_, "' rank ", recorder->rank_,
               " dumped to ", paths.back(), " (", reason, ")");
    } catch (const std::exception& e) {
      C10D_LOG(Warning, e.what());
    }
  }
  return paths;
}

}  // namespace c10d::inline v1
