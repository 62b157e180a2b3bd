#include "c10d/FlightRecorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "c10d/FlightRecorderSignal.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Json.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v0 {
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

FlightRecorder::FlightRecorder(std::string group, int rank, int size, size_t capacity)
    : group_(std::move(group)), rank_(rank), size_(size), ring_(capacity), p2p_(capacity) {
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

void FlightRecorder::queued(uint64_t sequence, const char* op, const Tensor* tensor,
                            int64_t tensors, int64_t root, std::optional<ReduceOp> reduceOp) {
  const int64_t now = nowUs();
  std::lock_guard<std::mutex> guard(mutex_);
  // Assigned field by field, so that once the ring has wrapped a slot's strings and vectors
  // keep their buffers.
  Entry& entry = ring_[sequence % ring_.size()];
  detail::CollectiveFingerprint::assign(entry.call, sequence, op, tensor, tensors, root, reduceOp);
  entry.state = State::Queued;
  entry.queuedUs = now;
  entry.startedUs = 0;
  entry.finishedUs = 0;
  entry.error.clear();
  next_ = std::max(next_, sequence + 1);
}

void FlightRecorder::started(uint64_t sequence) {
  int64_t now = nowUs();
  std::lock_guard<std::mutex> guard(mutex_);
  Entry& entry = ring_[sequence % ring_.size()];
  if (entry.call.sequence != sequence || entry.state != State::Queued) return;
  entry.state = State::Started;
  entry.startedUs = now;
}

void FlightRecorder::finished(uint64_t sequence, const std::string& error) {
  int64_t now = nowUs();
  std::lock_guard<std::mutex> guard(mutex_);
  Entry& entry = ring_[sequence % ring_.size()];
  if (entry.call.sequence != sequence || entry.queuedUs == 0) return;  // overwritten since
  entry.state = error.empty() ? State::Completed : State::Failed;
  entry.finishedUs = now;
  entry.error = error;
}

uint64_t FlightRecorder::pointToPointStarted(const char* op, const Tensor& tensor, int peer,
                                             int tag) {
  const int64_t now = nowUs();
  std::lock_guard<std::mutex> guard(mutex_);
  const uint64_t number = nextP2P_++;
  // Field by field, so a wrapped slot keeps its error string's buffer.
  PointToPointEntry& entry = p2p_[number % p2p_.size()];
  entry.number = number;
  entry.op = op;
  entry.peer = peer;
  entry.tag = tag;
  entry.dtype = tensor.dtype();
  entry.numel = tensor.numel();
  entry.state = State::Started;
  entry.startedUs = now;
  entry.finishedUs = 0;
  entry.error.clear();
  return number;
}

void FlightRecorder::pointToPointFinished(uint64_t number, const std::string& error) {
  const int64_t now = nowUs();
  std::lock_guard<std::mutex> guard(mutex_);
  PointToPointEntry& entry = p2p_[number % p2p_.size()];
  if (entry.number != number || entry.startedUs == 0) return;  // overwritten since
  entry.state = error.empty() ? State::Completed : State::Failed;
  entry.finishedUs = now;
  entry.error = error;
}

std::vector<FlightRecorder::PointToPointEntry> FlightRecorder::pointToPointEntries() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<PointToPointEntry> out;
  const uint64_t first = nextP2P_ > p2p_.size() ? nextP2P_ - p2p_.size() : 0;
  for (uint64_t number = first; number < nextP2P_; ++number) {
    const PointToPointEntry& entry = p2p_[number % p2p_.size()];
    if (entry.startedUs != 0 && entry.number == number) out.push_back(entry);
  }
  return out;
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<Entry> out;
  const uint64_t first = next_ > ring_.size() ? next_ - ring_.size() : 0;
  for (uint64_t sequence = first; sequence < next_; ++sequence) {
    const Entry& entry = ring_[sequence % ring_.size()];
    if (entry.queuedUs != 0 && entry.call.sequence == sequence) out.push_back(entry);
  }
  return out;
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
    out += detail::concat("{\"seq\":", entry.call.sequence, ",\"op\":");
    detail::appendJsonString(out, entry.call.op);
    out += ",\"call\":";
    detail::appendJsonString(out, entry.call.describe());
    out += ",\"state\":";
    detail::appendJsonString(out, stateName(entry.state));
    out += detail::concat(",\"queued_us\":", entry.queuedUs, ",\"started_us\":", entry.startedUs,
                          ",\"finished_us\":", entry.finishedUs, ",\"error\":");
    detail::appendJsonString(out, entry.error);
    out += "}";
  }
  out += "],\"p2p\":[";
  first = true;
  for (const PointToPointEntry& entry : pointToPointEntries()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += detail::concat("{\"n\":", entry.number, ",\"op\":");
    detail::appendJsonString(out, entry.op);
    out += detail::concat(",\"peer\":", entry.peer, ",\"tag\":", entry.tag, ",\"dtype\":");
    detail::appendJsonString(out, std::string(name(entry.dtype)));
    out += detail::concat(",\"numel\":", entry.numel, ",\"state\":");
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
  // Written beside and renamed, so a reader never sees half a dump.
  std::string partial = path + ".partial";
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

}  // namespace c10d::inline v0
