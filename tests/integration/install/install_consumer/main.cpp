// An outside program linking the installed package: headers, library and DLPack all resolve.
// With --missing NAME..., those backends' libraries must fail to load (a machine without their
// runtimes): selecting one is a BackendError naming its library, and nothing else is affected.
#include <dlpack/dlpack.h>
#include <c10d/Backend.hpp>
#include <c10d/ProcessGroup.hpp>
#include <c10d/checkpoint/Checkpoint.hpp>
#include <c10d/checkpoint/Metadata.hpp>
#include <c10d/core/Exception.hpp>
#include <c10d/core/Tensor.hpp>
#include <c10d/elastic/ElasticGroup.hpp>
#include <c10d/elastic/ShardCopies.hpp>
#include <rpc/RRef.hpp>
#include <rpc/autograd/DistributedOptimizer.hpp>
#include <store/HashStore.hpp>
#include <store/PrefixStore.hpp>
#include <store/TCPStore.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace {

// Selecting backend must fail with a BackendError that names its library file.
bool refusedClearly(const std::string& backend) {
  try {
    c10d::ProcessGroup group(std::make_shared<c10d::HashStore>(), 0, 1, {.backend = backend});
  } catch (const c10d::BackendError& e) {
    std::printf("backend %s refused: %s\n", backend.c_str(), e.what());
    return std::strstr(e.what(), ("libc10d_" + backend + ".so").c_str()) != nullptr;
  }
  std::fprintf(stderr, "backend %s was created although its runtime is missing\n", backend.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  auto hash = std::make_shared<c10d::HashStore>();
  c10d::PrefixStore prefixed("consumer", hash);
  prefixed.setString("greeting", "hello");
  if (hash->getString("consumer/greeting") != "hello") return 1;

  c10d::TCPStore tcp("127.0.0.1", 0,
                     c10d::TCPStoreOptions{.isServer = true, .listenAddress = "127.0.0.1"});
  if (tcp.add("n", 41) + 1 != 42) return 2;

  c10d::Tensor t = c10d::Tensor::empty({4}, c10d::ScalarType::Int32);
  t.data<int32_t>()[3] = 7;
  c10d::Tensor back = c10d::fromDLPack(c10d::toDLPack(t));
  if (back.data<int32_t>()[3] != 7 || back.data() != t.data()) return 3;

  // c10d::rpc: a one-worker agent, a remote reference to itself, and an optimizer spec.
  auto agent = c10d::rpc::RpcAgent::create(
      hash, "solo", 0, 1, {.host = "127.0.0.1"},
      [](c10d::rpc::RpcAgent& a) { a.registerFunction("twice", [](int x) { return 2 * x; }); });
  if (agent->remote<int>("solo", "twice", 21).toHere() != 42) return 4;
  if (c10d::rpc::OptimizerSpec::adam().name != "adam") return 5;
  agent->shutdown();

  // Gloo, the backend inside libc10d itself.
  c10d::ProcessGroup gloo(std::make_shared<c10d::HashStore>(), 0, 1, {.backend = "gloo"});
  gloo.allreduce(t)->wait();
  if (t.data<int32_t>()[3] != 7) return 6;

  // A checkpoint saved and loaded by one process, and its metadata read back.
  const auto dir =
      std::filesystem::temp_directory_path() / ("c10d-consumer-" + std::to_string(::getpid()));
  c10d::checkpoint::State saved;
  saved.add("t", t);
  saved.setInt("step", 3);
  c10d::checkpoint::save(saved, dir.string(), &gloo);
  c10d::Tensor loaded = c10d::Tensor::zeros({4}, c10d::ScalarType::Int32);
  c10d::checkpoint::State into;
  into.add("t", loaded);
  c10d::checkpoint::load(into, dir.string(), &gloo);
  const bool checkpointOk = loaded.data<int32_t>()[3] == 7 && into.getInt("step") == 3 &&
                            c10d::checkpoint::readMetadata(dir.string()).tensors.size() == 1;
  std::filesystem::remove_all(dir);
  if (!checkpointOk) return 8;

  // A one-process elastic group: a committed step, then a re-formation into generation 1.
  c10d::elastic::ElasticOptions elasticOptions;
  elasticOptions.group.backend = "gloo";
  c10d::elastic::ElasticGroup elastic(std::make_shared<c10d::HashStore>(), 0, 1, elasticOptions);
  const bool committed = elastic.commit(true);
  const c10d::elastic::Reformation reformed = elastic.reform(&into);
  if (!committed || reformed.generation != 1 || reformed.step != 1 || elastic.size() != 1) return 9;
  // Its shard copies: a slice refreshed, then restored onto a fresh tensor after a reform.
  int32_t half[2] = {5, 6}, restored[2] = {0, 0};
  c10d::checkpoint::State sharded, resharded;
  sharded.addSlice("s", c10d::Tensor::fromBlob(half, c10d::ScalarType::Int32, {2}), {4},
                   c10d::checkpoint::Slice::flat(0, 2));
  resharded.addSlice("s", c10d::Tensor::fromBlob(restored, c10d::ScalarType::Int32, {2}), {4},
                     c10d::checkpoint::Slice::flat(0, 2));
  c10d::elastic::ShardCopies copies(elastic);
  elastic.commit(true);
  copies.refresh(sharded);
  copies.restore(sharded, resharded, elastic.reform());
  if (restored[0] != 5 || restored[1] != 6) return 10;

  int missing = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--missing") == 0) continue;
    if (!refusedClearly(argv[i])) return 7;
    ++missing;
  }

  std::printf(
      "consumer ok: stores, TCPStore on port %u, DLPack round trip, rpc remote, gloo allreduce, "
      "checkpoint, elastic group and shard copies; "
      "%d backend(s) without their runtime refused clearly\n",
      tcp.port(), missing);
  return 0;
}
