// A tour of c10d::rpc, torch.distributed.rpc's tutorial in C++: rpc_sync, rpc_async with then,
// remote and to_here, a remote exception, an RRef passed to a third worker, and a method run on
// an RRef's owner. Worker 0 makes the calls; the others serve them.
//
//   c10drun --nproc-per-node 3 rpc_tour
//
// Exits 0 only when every result is what worker 0 computed itself.

#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "c10d/Init.hpp"
#include "rpc/RpcAgent.hpp"

namespace {

using c10d::rpc::RpcAgent;
using c10d::rpc::RRef;

struct Counter {
  int hits = 0;
  MSGPACK_DEFINE(hits);
};

void registerFunctions(RpcAgent& agent) {
  agent.registerFunction("add", [](int a, int b) { return a + b; });
  agent.registerFunction("square", [](int x) { return x * x; });
  agent.registerFunction("linspace", [](double from, double to, int n) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) out.push_back(from + (to - from) * i / (n - 1));
    return out;
  });
  agent.registerFunction("divide", [](int a, int b) {
    if (b == 0) throw std::domain_error("division by zero");
    return a / b;
  });
  // Called on a third worker with a reference it does not own: fetches from the owner.
  agent.registerFunction("sum", [](RRef<std::vector<double>> values) {
    std::vector<double> v = values.toHere();
    return std::accumulate(v.begin(), v.end(), 0.0);
  });
  agent.registerFunction("counter", [] { return Counter{}; });
  agent.registerMethod<Counter>("hit", [](Counter& c) { return ++c.hits; });
}

int failures = 0;

template <typename T>
void check(const char* what, const T& got, const T& expected) {
  if (got == expected) {
    std::printf("checked: %s\n", what);
  } else {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

void tour(RpcAgent& agent) {
  const std::string callee = "worker1";
  const std::string third = "worker2";

  check("rpc_sync: add(2, 3) on worker1 is 5", agent.rpcSync<int>(callee, "add", 2, 3), 5);

  auto chained = agent.rpcAsync<int>(callee, "square", 7).then([](c10d::rpc::Future<int> f) {
    return f.value() + 1;
  });
  check("rpc_async + then: square(7) + 1 is 50", chained.value(), 50);

  RRef<std::vector<double>> points =
      agent.remote<std::vector<double>>(callee, "linspace", 0.0, 1.0, 5);
  check("remote + to_here: linspace(0, 1, 5) lives on worker1",
        points.owner().name == callee && !points.isOwner(), true);
  check("to_here returns {0, 0.25, 0.5, 0.75, 1}", points.toHere(),
        std::vector<double>{0, 0.25, 0.5, 0.75, 1});

  std::string error;
  try {
    agent.rpcSync<int>(callee, "divide", 1, 0);
  } catch (const c10d::RemoteError& e) {
    error = e.what();
  }
  check("a remote exception names the worker and the function",
        error.find("function 'divide' on worker 'worker1'") != std::string::npos &&
            error.find("division by zero") != std::string::npos,
        true);

  check("an RRef passed to a third worker: worker2 sums worker1's values to 2.5",
        agent.rpcSync<double>(third, "sum", points), 2.5);

  RRef<Counter> counter = agent.remote<Counter>(third, "counter");
  counter.rpcSync<int>("hit");
  check("a method run twice on the RRef's owner", counter.rpcSync<int>("hit"), 2);
}

}  // namespace

int main() {
  try {
    c10d::InitOptions init;
    c10d::WorldInfo world = c10d::detectWorld(init);
    C10D_CHECK(world.worldSize >= 3, c10d::InvalidArgument,
               "rpc_tour passes a reference to a third worker: it needs 3+ ranks, got ",
               world.worldSize);
    auto store = c10d::connectStore(init, world);
    auto agent = RpcAgent::create(store, "worker" + std::to_string(world.rank), world.rank,
                                  world.worldSize, {}, registerFunctions);
    if (world.rank == 0) tour(*agent);
    agent->shutdown();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_tour: %s\n", e.what());
    return 1;
  }
}
