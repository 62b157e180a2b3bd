#pragma once

// A libuv loop on a thread of its own, the machinery under the TCPStore server and the RPC
// transport. Private to c10d's libraries: it includes <uv.h>, which the package does not ship.
//
// The owner makes its handles on loop(), start()s the thread, hands work to the loop with post()
// and ends it with stop(): the owner's closing step runs on the loop thread after every command
// posted before, whatever is still open is closed, the loop runs until the last close callback
// and the thread is joined, once, whoever and however many call it.
//
// Threading:
// - Until start(), the loop belongs to the thread that made it, which may init handles on it and
//   run it (uv_run(loop(), UV_RUN_NOWAIT), to finish a close). From start() on, only the loop
//   thread touches the loop and its handles; other threads reach them through post().
// - post() and stop() may be called from any thread, except stop() from the loop thread, which
//   would wait for itself (it throws InvalidArgument instead).
// - Commands run on the loop thread in the order they were posted. They must not block (every
//   handle waits while one runs) and must not throw: an exception escaping one ends the process
//   (std::terminate), as one escaping any thread would.
// - The owner never uv_stop()s or uv_loop_close()s the loop: it ends when stop() has closed every
//   handle, and the loop thread closes it.
//
// The loop thread is named (c10d/core/ThreadName.hpp) and blocks SIGPIPE for its whole life
// (c10d/core/Signals.hpp): libuv writes with write(2), which takes no MSG_NOSIGNAL.

#include <uv.h>

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {

// A libuv error code as "ECONNREFUSED (connection refused)": the name is what one searches for,
// and the parentheses keep the text from reading as one more "context: cause" step of the
// message around it.
std::string uvError(int rc);

class UvLoopThread {
 public:
  // Makes the loop and its wakeup; start() starts the thread. threadName names it (15 characters
  // are kept). owner begins the errors this object raises ("TCPStore server", "rpc transport of
  // worker 3"). A loop that cannot be made throws InitError, the type the owner raises for its
  // own failures, with why.
  template <typename InitError = Error>
  UvLoopThread(std::string threadName, std::string owner, std::type_identity<InitError> = {})
      : threadName_(std::move(threadName)), owner_(std::move(owner)) {
    std::string failure = init();
    C10D_CHECK(failure.empty(), InitError, owner_, ": ", failure);
  }

  // stop()s, if the owner has not (without a closing step of the owner's).
  ~UvLoopThread();

  UvLoopThread(const UvLoopThread&) = delete;
  UvLoopThread& operator=(const UvLoopThread&) = delete;

  // The loop, to make handles on and pass to libuv's calls (see Threading above).
  uv_loop_t* loop() { return &loop_; }

  // Starts the loop thread; commands posted before run then. Throws StateError when called a
  // second time or after stop().
  void start();

  // Runs command on the loop thread after the commands posted before it. Throws StateError
  // ("<owner> is closed") once stop() has been called.
  void post(std::function<void()> command);

  // Ends the loop. From the call on, post() throws StateError; the commands posted before run
  // first. Then, on the loop thread, closeEverything: the owner closes its handles (with the
  // close callbacks that free them) and does whatever else its shutdown needs. Then the wakeup and
  // every handle still open are closed, without a callback (a handle whose memory must be freed
  // is closeEverything's to close), and the loop runs until every close callback has run and is
  // closed. Returns once the thread has ended; rethrows what closeEverything threw, after the
  // loop has ended all the same.
  //
  // Only the first call does this: a concurrent one waits for it to finish, a later one returns
  // at once; neither runs its closeEverything. Before start(), it all happens on the calling
  // thread.
  void stop(std::function<void()> closeEverything = {});

 private:
  // Makes the loop and the wakeup; returns why it could not, or "".
  std::string init();
  // The wakeup's callback: runs what post() queued.
  void runCommands() noexcept;
  // The end of stop(), on the loop thread.
  void closeEverythingLeft(const std::function<void()>& closeEverything,
                           std::exception_ptr& failure);
  // Runs the loop until stop() has closed its handles, then closes it.
  void run();

  std::string threadName_;
  std::string owner_;
  uv_loop_t loop_;
  uv_async_t wakeup_;
  std::thread thread_;
  // The loop thread's while it runs, else none. Read by stop() before it takes a lock, so that
  // the loop thread is refused before it could wait for itself.
  std::atomic<std::thread::id> loopThreadId_{};

  // Guards commands_ and closed_, and is held across uv_async_send: once stop() has set closed_
  // no thread can still be waking a loop that is about to close (libuv aborts on a wakeup sent
  // to a closed loop).
  std::mutex mutex_;
  std::vector<std::function<void()>> commands_;
  bool closed_ = false;

  // Held for the whole of stop(), so that one caller joins and the others wait for it.
  std::mutex stopMutex_;
  bool stopped_ = false;  // under stopMutex_
};

}  // namespace c10d::inline v1::detail
