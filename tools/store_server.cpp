// c10d-store-server: a standalone TCPStore server, for jobs whose ranks should not host it.

#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "c10d/core/Exception.hpp"
#include "store/TCPStore.hpp"

int main(int argc, char** argv) {
  CLI::App app{"c10d-store-server: serve a c10d TCPStore until SIGINT or SIGTERM"};
  std::string address;
  uint16_t port = 29500;
  double timeoutSeconds = 0;
  app.add_option("--address", address,
                 "address to listen on; default: every interface (IPv6 and IPv4)");
  app.add_option("--port", port, "TCP port; 0 picks a free one (printed at start)")
      ->capture_default_str();
  app.add_option("--timeout", timeoutSeconds,
                 "exit after this many seconds (0: run until signalled)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  // Block the signals before any thread starts so that only sigtimedwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    c10d::TCPStoreServerOptions options;  // the token comes from C10D_AUTH_TOKEN(_FILE)
    options.listenAddress = address;
    options.port = port;
    c10d::TCPStoreServer server(options);
    std::printf("c10d-store-server listening on %s port %u\n",
                address.empty() ? "all interfaces" : address.c_str(), server.port());
    std::fflush(stdout);
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    while (true) {
      timespec tick{0, 200 * 1000 * 1000};
      int signal = sigtimedwait(&signals, nullptr, &tick);
      if (signal > 0) {
        std::printf("c10d-store-server: signal %d, stopping\n", signal);
        break;
      }
      if (timeoutSeconds > 0 && std::chrono::steady_clock::now() >= deadline) {
        std::printf("c10d-store-server: --timeout of %g s reached, stopping\n", timeoutSeconds);
        break;
      }
    }
    server.stop();
  } catch (const c10d::Error& e) {
    std::fprintf(stderr, "c10d-store-server: %s\n", e.what());
    return 1;
  }
  return 0;
}
