#pragma once

#include <signal.h>

namespace c10d::detail {

// Blocks SIGPIPE in the calling thread. A write(2) to a socket whose peer has gone raises
// SIGPIPE, whose default action kills the process (libuv writes with write(2), which takes no
// MSG_NOSIGNAL). Blocked in the writing thread, the write fails with EPIPE instead, and the
// process's own signal dispositions stay as the application set them. For loop threads.
inline void blockSigpipeInThisThread() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

}  // namespace c10d::detail
