// c10d/net/SharedMemory: segments mapped across processes, and the channel's messages, waits and
// ends (timeout, close from the other end, the other process gone); and the Gloo backend's
// choice of it per pair, in groups of forked ranks.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/net/SharedMemory.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1::shm {
namespace {

using namespace std::chrono_literals;

// spin: never sleep (kSpinForever); else sleep after a few dozen spins.
Waiting within(std::chrono::milliseconds timeout, bool spin = false, long peerPid = 0) {
  return {std::chrono::steady_clock::now() + timeout, peerPid,
          spin ? kSpinForever : std::chrono::nanoseconds{0}};
}

std::chrono::nanoseconds threadCpuTime() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
  return data;
}

struct Header {
  uint64_t index;
  uint64_t bytes;
};

// Sizes around a payload's room beside its 16-byte header (48), the slot, the publish step and
// the capacity (a ring of 4 KiB wraps often).
const size_t kSizes[] = {0,    1,    16,   48,   49,    63,     64, 65,
                         1000, 4032, 4096, 4097, 70000, 300000, 4,  48};

void writeAll(Channel channel, bool spin) {
  uint64_t index = 0;
  for (size_t bytes : kSizes) {
    std::vector<uint8_t> data = pattern(bytes, static_cast<uint8_t>(index));
    Header header{index++, bytes};
    ASSERT_EQ(channel.write(&header, sizeof(header), data.data(), bytes, within(10s, spin)),
              Wait::Ready);
  }
}

void readAll(Channel channel, bool spin) {
  uint64_t index = 0;
  for (size_t bytes : kSizes) {
    Header header{};
    ASSERT_EQ(channel.readHeader(&header, sizeof(header), within(10s, spin)), Wait::Ready);
    EXPECT_EQ(header.index, index);
    ASSERT_EQ(header.bytes, bytes);
    std::vector<uint8_t> got;
    ASSERT_EQ(
        channel.readPayload(bytes, within(10s, spin),
                            [&](const uint8_t* piece, size_t n) {
                              // Whole slots, but for the message's end.
                              EXPECT_TRUE(n % Channel::kSlotBytes == 0 || got.size() + n == bytes);
                              got.insert(got.end(), piece, piece + n);
                            }),
        Wait::Ready);
    EXPECT_EQ(got, pattern(bytes, static_cast<uint8_t>(index))) << bytes << " bytes";
    ++index;
  }
}

TEST(SharedMemoryTest, MessagesOfEverySizeArriveWholeAndInOrderThroughASmallRing) {
  for (bool spin : {false, true}) {
    Segment segment = Segment::create(Channel::bytesFor(4096));
    Channel::initialize(segment.data(), 4096);
    // The writer maps the segment a second time, as a peer process would.
    Segment peer = Segment::open(::getpid(), segment.fd(), segment.size());
    std::thread writer(writeAll, Channel(peer.data()), spin);
    readAll(Channel(segment.data()), spin);
    writer.join();
  }
}

TEST(SharedMemoryTest, AnotherProcessMapsTheSegmentAndTalksThroughIt) {
  constexpr size_t kCapacity = 64 * 1024;
  Segment segment = Segment::create(2 * Channel::bytesFor(kCapacity));
  Channel::initialize(segment.data(), kCapacity);
  Channel::initialize(segment.data() + Channel::bytesFor(kCapacity), kCapacity);
  const long parent = ::getpid();
  const int fd = segment.fd();
  const size_t size = segment.size();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Echo every message back on the second channel, then exit with what went wrong, if any.
    int code = 0;
    try {
      Segment mine = Segment::open(parent, fd, size);
      Channel in(mine.data()), out(mine.data() + Channel::bytesFor(kCapacity));
      for (size_t bytes : kSizes) {
        Header header{};
        if (in.readHeader(&header, sizeof(header), within(10s)) != Wait::Ready) code = 2;
        std::vector<uint8_t> data;
        if (in.readPayload(bytes, within(10s), [&](const uint8_t* p, size_t n) {
              data.insert(data.end(), p, p + n);
            }) != Wait::Ready)
          code = 3;
        if (out.write(&header, sizeof(header), data.data(), data.size(), within(10s)) !=
            Wait::Ready)
          code = 4;
      }
    } catch (const std::exception&) {
      code = 1;
    }
    ::_exit(code);
  }
  std::thread writer(writeAll, Channel(segment.data()), false);
  readAll(Channel(segment.data() + Channel::bytesFor(kCapacity)), false);
  writer.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(SharedMemoryTest, AWaitEndsAtItsDeadlineWhenNothingComes) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Channel channel(segment.data());
  for (bool spin : {false, true}) {
    Header nothing{};
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(channel.readHeader(&nothing, sizeof(nothing), within(50ms, spin)), Wait::TimedOut);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  }
  // A full ring holds a writer back the same way.
  std::vector<uint8_t> data(4096 - Channel::kSlotBytes);
  Header header{};
  ASSERT_EQ(channel.write(&header, sizeof(header), data.data(), data.size(), within(1s)),
            Wait::Ready);
  EXPECT_EQ(channel.write(&header, sizeof(header), data.data(), 1, within(50ms)), Wait::TimedOut);
}

TEST(SharedMemoryTest, ASpinWithABudgetGivesTheCoreBackAndStillWakesOnTheMessage) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Header sent{7, 0};
  std::thread writer([&] {
    std::this_thread::sleep_for(300ms);
    Channel out(segment.data());
    EXPECT_EQ(out.write(&sent, sizeof(sent), nullptr, 0, within(10s)), Wait::Ready);
  });
  Channel in(segment.data());
  Waiting waiting = within(10s);
  waiting.spinFor = 50us;
  const auto cpuBefore = threadCpuTime();
  Header got{};
  ASSERT_EQ(in.readHeader(&got, sizeof(got), waiting), Wait::Ready);
  const auto cpu = threadCpuTime() - cpuBefore;
  writer.join();
  EXPECT_EQ(got.index, 7u);
  // Spinning the whole 300 ms would cost about that much of the core; a 50 us spin and then a
  // sleep, with a look every 10 ms, a few ms.
  EXPECT_LT(cpu, 100ms) << "the waiter held its core while nothing came";
}

TEST(SharedMemoryTest, ClosingEitherEndWakesASleepingWaiterAtTheOther) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Segment peer = Segment::open(::getpid(), segment.fd(), segment.size());
  Channel reader(segment.data()), writer(peer.data());
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    writer.close();
  });
  Header header{};
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.readHeader(&header, sizeof(header), within(60s)), Wait::Closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  closer.join();
  // Closed for good, at both ends.
  EXPECT_EQ(writer.write(&header, sizeof(header), nullptr, 0, within(1s)), Wait::Closed);
}

TEST(SharedMemoryTest, WhatWasWrittenBeforeTheCloseIsStillRead) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Segment peer = Segment::open(::getpid(), segment.fd(), segment.size());
  Channel reader(segment.data()), writer(peer.data());
  Header sent{7, 3};
  const uint8_t payload[3] = {1, 2, 3};
  ASSERT_EQ(writer.write(&sent, sizeof(sent), payload, 3, within(1s)), Wait::Ready);
  writer.close();  // a rank that sent its last message and destroyed its group
  Header got{};
  ASSERT_EQ(reader.readHeader(&got, sizeof(got), within(1s)), Wait::Ready);
  EXPECT_EQ(got.index, 7u);
  std::vector<uint8_t> data;
  ASSERT_EQ(
      reader.readPayload(3, within(1s),
                         [&](const uint8_t* p, size_t n) { data.insert(data.end(), p, p + n); }),
      Wait::Ready);
  EXPECT_EQ(data, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(reader.readHeader(&got, sizeof(got), within(1s)), Wait::Closed);
}

TEST(SharedMemoryTest, AWaitOnAProcessThatEndedEndsWithPeerEnded) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Unreaped, the child is a zombie: ended all the same.
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Header header{};
  EXPECT_EQ(Channel(segment.data()).readHeader(&header, sizeof(header), within(60s, false, child)),
            Wait::PeerEnded);
  EXPECT_TRUE(processEnded(child));
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(processEnded(child));
  EXPECT_FALSE(processEnded(::getpid()));
}

TEST(SharedMemoryTest, OpeningWhatIsNotASegmentSaysWhy) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  try {
    Segment::open(::getpid(), segment.fd(), segment.size() + 1);
    FAIL() << "a size other than the segment's was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not the"), std::string::npos) << e.what();
  }
  try {
    Segment::open(::getpid(), 1000000, 4096);
    FAIL() << "a descriptor that is not open was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/fd/1000000"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> zeros(Channel::kControlBytes);
  EXPECT_THROW(Channel{zeros.data()}, Error);  // no channel initialized there
}

// The calls that never wait, for a reader of several channels: a write that does not fit is
// refused whole, and a read finds nothing until a message is there, then all of it.
TEST(SharedMemoryTest, TryWriteTakesWholeMessagesOrNoneAndTryReadHeaderNeverWaits) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Channel writer(segment.data()), reader(segment.data());
  Header header{};
  EXPECT_FALSE(reader.tryReadHeader(&header, sizeof header));
  const std::vector<uint8_t> payload = pattern(960, 3);  // 1024 bytes with its header slot
  int written = 0;
  while (writer.tryWrite(&header, sizeof header, payload.data(), payload.size())) {
    header.bytes = ++written;
  }
  EXPECT_EQ(written, 4) << "a ring of 4096 bytes holds four such messages";
  for (int i = 0; i < written; ++i) {
    ASSERT_TRUE(reader.tryReadHeader(&header, sizeof header));
    EXPECT_EQ(header.bytes, static_cast<uint64_t>(i));
    std::vector<uint8_t> got;
    ASSERT_EQ(reader.readPayload(
                  payload.size(), within(0ms),
                  [&](const uint8_t* data, size_t n) { got.insert(got.end(), data, data + n); }),
              Wait::Ready);
    EXPECT_EQ(got, payload);
  }
  EXPECT_FALSE(reader.tryReadHeader(&header, sizeof header));
  EXPECT_TRUE(writer.tryWrite(&header, sizeof header, payload.data(), payload.size()));
}

// A payload that fits beside its header takes no slot of its own: a ring of 4096 bytes holds 64
// such messages, and a writer that saw it full finds the room the reader freed since.
TEST(SharedMemoryTest, ASmallPayloadTravelsInItsHeadersSlot) {
  Segment segment = Segment::create(Channel::bytesFor(4096));
  Channel::initialize(segment.data(), 4096);
  Channel writer(segment.data()), reader(segment.data());
  ASSERT_TRUE(Channel::travelsInline(sizeof(Header), 48));
  ASSERT_FALSE(Channel::travelsInline(sizeof(Header), 49));
  Header header{};
  int written = 0;
  for (int round = 0; round < 2; ++round) {
    written = 0;
    for (;;) {
      const std::vector<uint8_t> payload = pattern(48, static_cast<uint8_t>(written));
      header.index = static_cast<uint64_t>(written);
      if (!writer.tryWrite(&header, sizeof header, payload.data(), payload.size())) break;
      ++written;
    }
    EXPECT_EQ(written, 64) << "round " << round;
    for (int i = 0; i < written; ++i) {
      ASSERT_TRUE(reader.tryReadHeader(&header, sizeof header));
      EXPECT_EQ(header.index, static_cast<uint64_t>(i));
      std::vector<uint8_t> got;
      ASSERT_EQ(reader.readPayload(48, within(0ms),
                                   [&](const uint8_t* data, size_t n) {
                                     EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 16, 0u);
                                     got.insert(got.end(), data, data + n);
                                   }),
                Wait::Ready);
      EXPECT_EQ(got, pattern(48, static_cast<uint8_t>(i)));
    }
    EXPECT_FALSE(reader.tryReadHeader(&header, sizeof header));
  }
}

// A sleeper on a doorbell wakes at a ring; a ring with nobody armed costs nothing and is not
// kept, and a sleep with nothing rung ends at its timeout.
TEST(SharedMemoryTest, ADoorbellWakesWhoeverSleepsOnIt) {
  Segment segment = Segment::create(4096);
  Doorbell bell(segment.data());
  bell.ring();  // nobody armed
  auto start = std::chrono::steady_clock::now();
  uint32_t armed = bell.arm();
  bell.sleep(armed, 50ms);
  bell.disarm();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms) << "a ring before arm was kept";
  armed = bell.arm();
  std::thread ringer([&] {
    std::this_thread::sleep_for(20ms);
    Doorbell(segment.data()).ring();
  });
  start = std::chrono::steady_clock::now();
  bell.sleep(armed, 30s);
  bell.disarm();
  ringer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the ring did not wake the sleeper";
}

// Reads of every size around the split land whole (both halves, odd tails), and a failure in
// either half is reported, with the reader still usable after it.
TEST(SharedMemoryTest, ASplitReaderCopiesBothHalvesAndReportsEitherHalfFailing) {
  SplitReader reader;
  const long self = ::getpid();
  for (size_t bytes : {size_t{0}, size_t{1}, SplitReader::kSplitBytes - 1, SplitReader::kSplitBytes,
                       SplitReader::kSplitBytes * 3 + 13}) {
    std::vector<uint8_t> from(bytes);
    std::iota(from.begin(), from.end(), uint8_t{3});
    std::vector<uint8_t> into(bytes, 0);
    EXPECT_EQ(reader.read(self, reinterpret_cast<uintptr_t>(from.data()), into.data(), bytes), "");
    EXPECT_EQ(into, from) << bytes << " bytes";
  }
  // A mapping with a hole: the far half, then the near half, is not readable.
  const size_t page = 4096;
  const size_t bytes = SplitReader::kSplitBytes * 2;
  auto* region = static_cast<uint8_t*>(
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  std::vector<uint8_t> into(bytes);
  ASSERT_EQ(::munmap(region + bytes - page, page), 0);
  std::string far = reader.read(self, reinterpret_cast<uintptr_t>(region), into.data(), bytes);
  EXPECT_NE(far.find("Bad address"), std::string::npos) << far;
  ASSERT_EQ(::munmap(region, page), 0);
  std::string near = reader.read(self, reinterpret_cast<uintptr_t>(region), into.data(), bytes);
  EXPECT_NE(near.find("Bad address"), std::string::npos) << near;
  ::munmap(region + page, bytes - 2 * page);
  std::vector<uint8_t> from(bytes, 9);
  EXPECT_EQ(reader.read(self, reinterpret_cast<uintptr_t>(from.data()), into.data(), bytes), "");
  EXPECT_EQ(into, from);
}

// The segments this process has mapped: memfd mappings show as "/memfd:c10d-shm (deleted)".
int mappedSegments() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/memfd:c10d-shm") != std::string::npos) ++count;
  }
  return count;
}

// Rank 1 says C10D_SHM=0 for a second group: its pairs stay on TCP at both ends, ranks 0 and 2
// share memory, and every op (large ones too, which then leave the SyncMesh for Gloo's own
// algorithms on every rank alike) gives every rank the right values.
TEST(SharedMemoryGroupTest, ARankWithSharedMemoryOffKeepsTcpAtBothEndsAndOpsStayExact) {
  auto outcomes = test::runRanks({.worldSize = 3}, [](test::RankEnv& env) {
    // The default group: every rank maps its own segment and its two peers'.
    test::checkEq(3, mappedSegments(), "segments mapped for the default group");
    ProcessGroupOptions options;
    options.backend = "gloo";
    options.config = {{"C10D_SHM", env.rank == 1 ? "0" : "1"}};
    auto mixed = env.pg.newGroup({0, 1, 2}, options);
    test::checkEq(env.rank == 1 ? 3 : 5, mappedSegments(),
                  "segments mapped once rank 1 keeps TCP (ranks 0 and 2: own + the other's)");
    for (int64_t count : {int64_t{1}, int64_t{100003}, (int64_t{1} << 20) + 3}) {
      Tensor t = Tensor::empty({count}, ScalarType::Float32);
      for (int64_t i = 0; i < count; ++i) t.data<float>()[i] = static_cast<float>(env.rank + i % 7);
      mixed->allreduce(t)->wait();
      bool exact = true;
      for (int64_t i = 0; i < count; ++i) exact = exact && t.data<float>()[i] == 3 + 3 * (i % 7);
      test::check(exact, "allreduce of " + std::to_string(count) + " floats is exact");
      Tensor b = Tensor::empty({count}, ScalarType::Float32);
      for (int64_t i = 0; i < count; ++i) b.data<float>()[i] = env.rank == 1 ? i % 11 : -1;
      mixed->broadcast(b, {.rootRank = 1})->wait();
      exact = true;
      for (int64_t i = 0; i < count; ++i) exact = exact && b.data<float>()[i] == i % 11;
      test::check(exact, "broadcast of " + std::to_string(count) + " floats from rank 1 is exact");
    }
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0, 0})) << test::report(outcomes);
}

// Ranks that disagree on an algorithm would wait for messages their peers never send: the group
// refuses to form on every rank, naming the variable and both values.
TEST(SharedMemoryGroupTest, RanksThatDisagreeOnAnAlgorithmFailAtConstruction) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    for (const auto& [variable, forced] :
         std::vector<std::pair<std::string, std::string>>{{"C10D_ALLREDUCE_ALGO", "ring"},
                                                          {"C10D_BROADCAST_ALGO", "pipeline"},
                                                          {"C10D_ALLGATHER_ALGO", "bruck"}}) {
      ProcessGroupOptions options;
      options.backend = "gloo";
      options.config = {{variable, env.rank == 0 ? forced : "auto"}};
      test::expectThrows<InvalidArgument>(
          [&] {
            env.pg.newGroup({0, 1}, options);
          },
          "a group whose ranks force different algorithms",
          {variable, "'" + forced + "'", "'auto'"});
    }
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

// A send nobody receives is kept for its verdict, and holds its group's runtime: shutting the
// group down must let go of it, or the group's segments (and sockets) outlive it.
TEST(SharedMemoryGroupTest, AGroupWithAnUnansweredSendIsFreedAtShutdown) {
  auto outcomes = test::runRanks({.worldSize = 2}, [](test::RankEnv& env) {
    const int before = mappedSegments();
    auto group = env.pg.newGroup({0, 1});
    test::checkEq(before + 2, mappedSegments(), "segments mapped for the new group");
    if (env.rank == 0) {
      Tensor t = Tensor::zeros({1 << 20}, ScalarType::Float32);  // read from this rank's memory
      auto unanswered = group->send(t, 1, 5, std::chrono::milliseconds(300));
      test::expectThrows<TimeoutError>([&] { unanswered->wait(); }, "a send nobody receives",
                                       {"Timed out"});
    }
    env.store.setString("sent/" + std::to_string(env.rank), "1");
    env.store.wait({"sent/0", "sent/1"}, 30s);
    group->shutdown();
    group.reset();
    test::checkEq(before, mappedSegments(), "segments mapped once the group is gone");
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

// Point-to-point over shared memory, round after round as a pipeline's stages or a benchmark
// make them: both ranks post a receive and a send, then wait for the receive and the send, at
// sizes sent in the head and sizes read from the sender's memory. At 16 MiB an op takes longer
// than the progress thread's claim delay, so it claims sends while the caller waits on its
// receive. Every round's payload is checked.
TEST(SharedMemoryGroupTest, PointToPointRoundsBothWaysNeverStall) {
  auto outcomes = test::runRanks({.worldSize = 2, .deadline = 100s}, [](test::RankEnv& env) {
    const int peer = 1 - env.rank;
    // 16 MiB messages take milliseconds: long enough for the progress thread to claim the send.
    for (int64_t count : {int64_t{1}, int64_t{16384}, int64_t{262144}, int64_t{1} << 22}) {
      Tensor out = Tensor::zeros({count}, ScalarType::Float32);
      Tensor in = Tensor::empty({count}, ScalarType::Float32);
      for (int round = 0; round < (count > 262144 ? 60 : 300); ++round) {
        out.data<float>()[0] = static_cast<float>(round * 2 + env.rank);  // whose, which round
        if (count > 1) out.data<float>()[count - 1] += 1;                 // and the last, round + 1
        auto recv = env.pg.recv(in, peer);
        auto send = env.pg.send(out, peer);
        recv->wait();
        send->wait();
        test::check(
            in.data<float>()[0] == static_cast<float>(round * 2 + peer) &&
                (count == 1 || in.data<float>()[count - 1] == static_cast<float>(round + 1)),
            "round " + std::to_string(round) + " of " + std::to_string(count) +
                " floats arrived whole");
      }
    }
  });
  EXPECT_EQ(test::exitCodes(outcomes), (std::vector<int>{0, 0})) << test::report(outcomes);
}

}  // namespace
}  // namespace c10d::inline v1::shm
