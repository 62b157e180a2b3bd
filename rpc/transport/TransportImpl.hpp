#pragma once

// Private to rpc/transport/: the Transport's state, shared by the files that run it.
// Transport.cpp owns the loop thread and the connections by peer (listen, connect, send, close,
// registering and dropping a connection, waking the loop for senders); Connection.cpp reads and
// writes one connection's bytes (Connection.hpp); Handshake.cpp runs a connection's introduction,
// its Hello frames, until it is Open.

#include <uv.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/net/SharedMemory.hpp"
#include "c10d/net/UvLoop.hpp"
#include "rpc/transport/Connection.hpp"
#include "rpc/transport/Transport.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc {

struct Transport::Impl {
  using Outgoing = detail::Outgoing;
  using Connection = detail::Connection;
  using ConnectResult = detail::ConnectResult;

  Impl(int selfId, int workers, std::optional<std::string> authToken, bool sharedMemory,
       OnFrame frameHandler, OnPeerLost lostHandler)
      : self(selfId),
        worldSize(workers),
        token(std::move(authToken)),
        host(sharedMemory ? shm::hostIdentity() : std::string()),
        onFrame(std::move(frameHandler)),
        onPeerLost(std::move(lostHandler)),
        loopThread("c10d-rpc-io", c10d::detail::concat("rpc transport of worker ", selfId),
                   std::type_identity<BackendError>{}) {}

  int self;
  int worldSize;
  std::optional<std::string> token;
  // This host's identity (c10d/net/SharedMemory.hpp), or empty: lending is off (C10D_SHM=0).
  std::string host;
  OnFrame onFrame;
  OnPeerLost onPeerLost;

  uv_check_t afterCallbacks;  // runs once the loop's callbacks are done, before it sleeps
  uv_tcp_t listener;
  bool listening = false;
  // The loop, its thread and the commands posted to it; post() refuses with StateError ("rpc
  // transport of worker <self> is closed") from the moment close() begins. After the handles
  // above: destroyed before them, it can still close them (a constructor that fails to start it).
  c10d::detail::UvLoopThread loopThread;

  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, std::shared_ptr<Connection>> peers;  // guarded by mutex
  std::map<int, std::string> lost;                   // peer -> why
  std::set<Connection*> connections;                 // loop thread only
  // Under mutex: set by close() on the loop thread, before it drops the connections. send()
  // refuses from then on, and a connection lost then is not reported to onPeerLost.
  bool closed = false;
  // Under mutex: whether the loop thread is running callbacks. Until it is done with them it
  // will pass afterCallbacks, which flushes the outboxes of `dirty`: a sender that queues a
  // frame meanwhile adds its connection there and needs no wake-up (a pipelined caller, woken
  // by the replies this thread is delivering, sends its next calls in that window).
  bool loopBusy = false;
  // Loop thread only: loopBusy as this thread last set it, so that each read in a burst does
  // not take the mutex again.
  bool loopMarkedBusy = false;
  std::vector<std::shared_ptr<Connection>> dirty;

  // ---- the loop and the connections by peer (Transport.cpp) ----

  // A command marks the loop busy as it starts, as a read does: senders meanwhile leave their
  // flush to afterCallbacks instead of posting one more wake-up.
  void post(std::function<void()> command) {
    loopThread.post([this, command = std::move(command)] {
      markBusy();
      command();
    });
  }

  // Runs fn on the loop thread and returns its result (or rethrows its error).
  template <typename Fn>
  auto onLoop(Fn fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto promise = std::make_shared<std::promise<R>>();
    std::future<R> result = promise->get_future();
    post([promise, fn = std::move(fn)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn();
          promise->set_value();
        } else {
          promise->set_value(fn());
        }
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    return result.get();
  }

  // On the loop thread.
  void markBusy() {
    if (loopMarkedBusy) return;
    std::lock_guard<std::mutex> guard(mutex);
    loopBusy = true;
    loopMarkedBusy = true;
  }

  Connection* newConnection();
  void registerPeer(Connection* c, int peer);
  void drop(Connection* c, const std::string& why);
  // A sender's connection got its first queued frame: the loop flushes it after its current
  // callbacks when it is running them, else a posted command wakes it to.
  void scheduleFlush(const std::shared_ptr<Connection>& c);
  // On the loop thread, after its callbacks: writes what senders queued meanwhile.
  void flushDirty();

  // ---- a connection's bytes (Connection.cpp) ----

  void startReading(Connection* c);
  // On the sending thread, for send() (or the loop thread, for the transport's frames once a
  // connection is open): writes frame to c there and then when it can, else queues it for the
  // loop thread. Lends its large tensors when c's peer reads our memory. Throws PeerLostError
  // when c is closing, InvalidArgument for a frame that cannot be encoded.
  void writeOrQueue(const std::shared_ptr<Connection>& c, int peer, Frame frame, bool moreSoon);
  // On the loop thread: a frame of the introduction, queued before anything a sender writes.
  void sendOnLoop(Connection* c, const Frame& frame);
  // On the loop thread: writes the connection's outbox, every frame in it with one write.
  void flush(Connection* c);
  // A write counted in queuedWrites is done (written, failed or dropped).
  static void writeDone(Connection* c);
  // On the loop thread: writes what is left of frames, in order, with one libuv write. Whoever
  // queued them counted the write in queuedWrites; completing it uncounts it.
  void write(Connection* c, std::vector<Outgoing> frames);

  // ---- a connection's introduction (Handshake.cpp) ----

  // Connector, once TCP is up: its Hello to peer, with its nonce when it has a token. Answered
  // by the acceptor's Hello (acceptReply), or failed by drop().
  void introduce(Connection* c, int peer, std::shared_ptr<std::promise<ConnectResult>> pending);
  void deliver(Connection* c, Frame frame);
  // Acceptor: a connector introduces itself, with its nonce when it has a token.
  void acceptHello(Connection* c, const Frame& hello);
  // Acceptor: the connector's proof that it holds the token.
  void acceptProof(Connection* c, const Frame& hello);
  // Connector: the acceptor's reply, with its nonce and proof when it has a token.
  void acceptReply(Connection* c, const Frame& hello);
  void open(Connection* c, int peer);
  // Drops a connection whose introduction failed; a connector waiting on it fails at once.
  void refuse(Connection* c, const std::string& why);

  // ---- lending tensors to a peer on this host (Lending.cpp) ----

  // Once c is open: asks its peer to prove it is on this host, if lending is on.
  void probe(Connection* c);
  // A frame of the transport's own (Probe, Proof, Lend, Returned) on an open connection.
  void onLendingFrame(Connection* c, const Frame& frame);
  // On the loop thread: hands a frame that lends kCopyOffLoopBytes or more to the loan copier
  // (throws InvalidArgument for a loan from a peer never invited), and so every later frame of
  // c while one is there. The copier copies the tensors from the peer's memory on its own thread,
  // so that a 16 MiB argument does not stall the loop's other connections for its copy, and posts
  // the frame back to the loop, which returns the loan and delivers it (or drops c when the
  // copy failed).
  void queueForCopier(Connection* c, Frame frame);
  // Loans under kCopyOffLoopBytes in all are copied on the loop: the two hand-offs of the copier
  // cost more than their copy stalls the loop (measured: docs/performance-history.md, "Figures
  // that lived in code comments").
  static constexpr size_t kCopyOffLoopBytes = 4 << 20;
  bool copyOnLoop(Connection* c, const Frame& frame) const;
  // On the loop: copies frame's lent tensors and returns the loan; false when that failed and
  // c was dropped.
  bool takeLoanOnLoop(Connection* c, Frame& frame);
  // Stops the copier, forgetting the frames it has not copied yet. Idempotent; not on the
  // copier's thread.
  void stopCopier();
  ~Impl() { stopCopier(); }

  // The copier's thread (c10d-rpc-copy), started at the first loan, and its queue.
  void copyLoans();
  // Copies frame's lent tensors from the peer pid's memory with reader: "" or why it failed.
  std::string takeLoan(shm::SplitReader& reader, long pid, int peer, Frame& frame);
  std::mutex copyMutex;
  std::condition_variable copyChanged;
  std::deque<std::pair<std::shared_ptr<Connection>, Frame>> copyQueue;
  bool copyStopping = false;
  std::thread copier;
  std::mutex copierJoin;
  // Copies lent tensors, large ones in two halves at once: one for the copier's thread, one for
  // the loop's.
  shm::SplitReader reader;
  shm::SplitReader loopReader;
};

}  // namespace c10d::inline v1::rpc
