// The C++ half of pytorch_store_test.py: speaks to a PyTorch TCPStore server through
// c10d::PyTorchTCPStore, checking each answer against what the Python half set before (and
// leaving keys the Python half checks after). Usage: pytorch_store_client HOST PORT v1|v2
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

#include "c10d/core/Exception.hpp"
#include "store/PrefixStore.hpp"
#include "store/PyTorchTCPStore.hpp"

using namespace std::chrono_literals;

namespace {

int checks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    std::cerr << "pytorch_store_client: FAILED: " << what << "\n";
    std::exit(1);
  }
}

c10d::Store::Bytes bytes(const std::string& text) {
  return c10d::toBytes(text);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: pytorch_store_client HOST PORT v1|v2\n";
    return 2;
  }
  auto port = static_cast<uint16_t>(std::atoi(argv[2]));
  std::string wanted = argv[3];
  try {
    c10d::PyTorchTCPStore store(argv[1], port, 10s);
    expect(store.protocol() == (wanted == "v1" ? c10d::PyTorchTCPStore::Protocol::V1
                                               : c10d::PyTorchTCPStore::Protocol::V2),
           "the probe finds protocol " + wanted);

    // What the Python side set.
    expect(store.getString("from_torch") == "hello", "get of a key PyTorch set");
    expect(store.add("counter", 2) == 7, "add continues PyTorch's counter (5 + 2)");
    expect(store.getString("counter") == "7", "a counter reads as decimal text");

    // compare_set, PyTorch's semantics.
    expect(store.compareSet("cas", {}, bytes("first")) == bytes("first"), "cas creates");
    expect(store.compareSet("cas", bytes("wrong"), bytes("x")) == bytes("first"),
           "cas with a wrong expectation returns the current value");
    expect(store.compareSet("cas", bytes("first"), bytes("second")) == bytes("second"),
           "cas with the right expectation swaps");
    expect(store.compareSet("cas_absent", bytes("e"), bytes("d")) == bytes("e"),
           "cas on an absent key with an expectation returns it");

    expect(store.check({"from_torch", "counter"}), "check of present keys");
    expect(!store.check({"from_torch", "never"}), "check with a missing key");
    store.set("doomed", bytes("x"));
    expect(store.deleteKey("doomed"), "delete of a present key");
    expect(!store.deleteKey("doomed"), "delete of a missing key");

    // A wait that times out closes the connection; the next call makes another.
    auto start = std::chrono::steady_clock::now();
    bool timedOut = false;
    try {
      store.get("never", 200ms);
    } catch (const c10d::TimeoutError& e) {
      timedOut = std::string(e.what()).find("'never'") != std::string::npos;
    }
    expect(timedOut, "get of a missing key times out naming it");
    expect(std::chrono::steady_clock::now() - start < 5s, "the timeout came in time");
    store.set("after_timeout", bytes("ok"));
    expect(store.getString("after_timeout") == "ok", "the store works after a timeout");

    store.multiSet({"m1", "m2"}, {bytes("one"), bytes("two")});
    auto values = store.multiGet({"m1", "m2"});
    expect(values.size() == 2 && values[0] == bytes("one") && values[1] == bytes("two"),
           "multiSet then multiGet");
    store.append("log", bytes("a"));
    store.append("log", bytes("b"));
    expect(store.getString("log") == "ab", "append twice");
    store.append("same", bytes("x"));
    store.append("same", bytes("x"));
    expect(store.getString("same") == "xx", "the same bytes appended twice");
    expect(store.numKeys() == 8, "numKeys counts the server's keys (8 set so far)");

    // Keys under a prefix, as the workers of torchrun use the agent store.
    c10d::PrefixStore worker("/worker/attempt_0",
                             std::make_shared<c10d::PyTorchTCPStore>(argv[1], port, 10s));
    worker.set("from_c10d", bytes("world"));
    // A set has no answer: read back on each connection, so the server has taken every request
    // before this process exits and the Python half looks.
    expect(worker.getString("from_c10d") == "world", "get under the worker prefix");
    expect(store.getString("log") == "ab", "the last request on the first connection");
  } catch (const std::exception& e) {
    std::cerr << "pytorch_store_client: FAILED with " << e.what() << "\n";
    return 1;
  }
  std::cout << "pytorch_store_client: " << checks << " checks passed (" << wanted << ")\n";
  return 0;
}
