// UvLoopThread (c10d/net/UvLoop.hpp): the libuv loop thread under the TCPStore server and RPC.

#include "c10d/net/UvLoop.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace c10d::inline v1 {
namespace {

using detail::UvLoopThread;

void neverCalled(uv_timer_t*) {}

TEST(UvLoopThreadTest, RunsCommandsInOrderOnItsNamedThreadWithSigpipeBlocked) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  loop.start();
  std::vector<int> order;  // loop thread only until stop()
  for (int i = 0; i < 100; ++i) loop.post([&order, i] { order.push_back(i); });
  std::promise<std::pair<std::string, bool>> seen;
  loop.post([&seen] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    seen.set_value(std::make_pair(std::string(name), sigismember(&mask, SIGPIPE) == 1));
  });
  auto [name, sigpipeBlocked] = seen.get_future().get();
  EXPECT_EQ(name, "c10d-test-loop");
  EXPECT_TRUE(sigpipeBlocked);
  loop.stop();
  std::vector<int> expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST(UvLoopThreadTest, StopRunsWhatWasPostedThenTheClosingStepThenRefusesPosts) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  std::vector<std::string> steps;
  loop.post([&steps] { steps.push_back("posted before start"); });
  loop.start();
  loop.post([&steps] { steps.push_back("posted"); });
  loop.stop([&steps] { steps.push_back("closing step"); });
  EXPECT_EQ(steps, (std::vector<std::string>{"posted before start", "posted", "closing step"}));
  try {
    loop.post([] {});
    ADD_FAILURE() << "a post after stop() was taken";
  } catch (const StateError& e) {
    EXPECT_STREQ(e.what(), "test loop is closed");
  }
  loop.stop([&steps] { steps.push_back("second closing step"); });  // returns at once
  EXPECT_EQ(steps.size(), 3u);
}

TEST(UvLoopThreadTest, ConcurrentStopsCloseOnceAndReturnAfterTheThreadHasEnded) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  loop.start();
  std::atomic<int> closingSteps{0};
  std::atomic<bool> closed{false};
  std::vector<std::thread> stoppers;
  for (int i = 0; i < 8; ++i) {
    stoppers.emplace_back([&] {
      loop.stop([&] {
        closingSteps.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others arrive meanwhile
        closed.store(true);
      });
      EXPECT_TRUE(closed.load());
    });
  }
  for (auto& stopper : stoppers) stopper.join();
  EXPECT_EQ(closingSteps.load(), 1);
}

TEST(UvLoopThreadTest, StopClosesHandlesTheOwnerLeftOpen) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  // Left open, the running timer would keep the loop alive, the stopped one keep it from closing.
  uv_timer_t running;
  uv_timer_t stopped;
  uv_timer_init(loop.loop(), &running);
  uv_timer_init(loop.loop(), &stopped);
  uv_timer_start(&running, neverCalled, 3600 * 1000, 3600 * 1000);
  loop.start();
  loop.stop();
  EXPECT_TRUE(uv_is_closing(reinterpret_cast<uv_handle_t*>(&running)));
  EXPECT_TRUE(uv_is_closing(reinterpret_cast<uv_handle_t*>(&stopped)));
}

TEST(UvLoopThreadTest, AnErrorOfTheClosingStepComesBackOnceTheLoopHasEnded) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  loop.start();
  EXPECT_THROW(loop.stop([] { throw BackendError("closing failed"); }), BackendError);
  EXPECT_THROW(loop.post([] {}), StateError);
}

TEST(UvLoopThreadTest, StopBeforeStartClosesOnTheCallingThread) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  uv_timer_t timer;
  uv_timer_init(loop.loop(), &timer);
  std::thread::id closedOn;
  loop.stop([&] {
    closedOn = std::this_thread::get_id();
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  });
  EXPECT_EQ(closedOn, std::this_thread::get_id());
  EXPECT_THROW(loop.start(), StateError);
}

TEST(UvLoopThreadTest, StopFromTheLoopThreadIsRefused) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  loop.start();
  std::promise<std::string> refusal;
  loop.post([&] {
    try {
      loop.stop();
      refusal.set_value("");
    } catch (const InvalidArgument& e) {
      refusal.set_value(e.what());
    }
  });
  EXPECT_NE(refusal.get_future().get().find("from its own loop thread"), std::string::npos);
  loop.stop();
}

TEST(UvLoopThreadTest, PostsFromManyThreadsAllRun) {
  UvLoopThread loop("c10d-test-loop", "test loop");
  loop.start();
  int ran = 0;  // loop thread only until stop()
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) loop.post([&ran] { ++ran; });
    });
  }
  for (auto& poster : posters) poster.join();
  loop.stop();
  EXPECT_EQ(ran, 4000);
}

// A post taken before stop() runs before the loop ends; one after it is refused, and never wakes
// a loop that is gone (libuv would abort).
TEST(UvLoopThreadTest, APostRacingStopEitherRunsOrIsRefused) {
  for (int round = 0; round < 50; ++round) {
    UvLoopThread loop("c10d-test-loop", "test loop");
    loop.start();
    std::atomic<int> taken{0};
    int ran = 0;  // loop thread only until stop()
    std::thread poster([&] {
      try {
        while (true) {
          loop.post([&ran] { ++ran; });
          taken.fetch_add(1);
        }
      } catch (const StateError&) {
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    loop.stop();
    poster.join();
    EXPECT_EQ(ran, taken.load());
  }
}

TEST(UvErrorTest, NamesTheCodeThenSaysWhatItMeans) {
  EXPECT_EQ(detail::uvError(UV_ECONNREFUSED), "ECONNREFUSED (connection refused)");
  EXPECT_EQ(detail::uvError(UV_EADDRINUSE), "EADDRINUSE (address already in use)");
  EXPECT_EQ(detail::uvError(-123456), "Unknown system error -123456");
}

}  // namespace
}  // namespace c10d::inline v1
