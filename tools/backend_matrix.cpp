// c10d-backend-matrix: what the process group's backend does, found by doing it. Every op runs on
// every dtype (and every reduce op on every dtype, through allreduce) with small tensors whose
// results are known; a cell is "yes" only when the op succeeded and every rank's result was
// right. Rank 0 prints a Markdown section; tools/gen_backends_md.sh assembles docs/backends.md
// from the sections of each backend, and a test checks that the document is current.
//
//   c10drun --nproc-per-node 2 c10d-backend-matrix [--device cpu|cuda]
//   C10D_BACKEND=mpi mpirun -np 2 c10d-backend-matrix
//
// A cell the backend refuses shows the first words of its error; a wrong result shows "WRONG".
// Exit status 0 unless a result was wrong (3) or the run itself failed (1).

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/common/Dispatch.hpp"
#include "c10d/Backend.hpp"
#include "c10d/Init.hpp"
#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Cuda.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Half.hpp"

namespace {

using c10d::ProcessGroup;
using c10d::ReduceOp;
using c10d::ScalarType;
using c10d::Tensor;

constexpr int64_t kCount = 4;

c10d::Device gDevice = c10d::Device::cpu();
// --device cuda without a CUDA device: tensors are host memory that only claims to be on cuda:0,
// so a backend's refusals (made before any device work) show, and what it accepts cannot run.
bool gNoDevice = false;

// Thrown by read() under gNoDevice: the op was accepted and got as far as the device.
struct AcceptedNotRun {};

// Values here are small non-negative integers, exact in every dtype (bool holds 0 and 1).
Tensor make(int64_t count, ScalarType dtype, const std::function<double(int64_t)>& value) {
  Tensor host = Tensor::empty({count}, dtype);
  c10d::dispatchByDtype(dtype, [&]<typename T>() {
    for (int64_t i = 0; i < count; ++i) {
      static_cast<T*>(host.data())[i] = static_cast<T>(static_cast<float>(value(i)));
    }
  });
  if (gDevice.isCPU()) return host;
  if (gNoDevice) {
    return Tensor::fromBlob(host.data(), dtype, {count}, gDevice, {}, host.holder());
  }
  Tensor device = Tensor::empty({count}, dtype, gDevice);
  c10d::copyTensor(device, host);
  return device;
}

Tensor filled(int64_t count, ScalarType dtype, double value) {
  return make(count, dtype, [value](int64_t) { return value; });
}

std::vector<double> read(const Tensor& tensor) {
  if (gNoDevice) throw AcceptedNotRun{};
  Tensor host = tensor;
  if (!tensor.device().isCPU()) {
    host = Tensor::empty(tensor.sizes(), tensor.dtype());
    c10d::copyTensor(host, tensor);
  }
  std::vector<double> values(static_cast<size_t>(host.numel()));
  c10d::dispatchByDtype(host.dtype(), [&]<typename T>() {
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = static_cast<double>(static_cast<float>(static_cast<const T*>(host.data())[i]));
    }
  });
  return values;
}

bool all(const Tensor& tensor, double expected) {
  for (double v : read(tensor)) {
    if (v != expected) return false;
  }
  return true;
}

// Output list of a list op: block r starts as the value its result will not hold.
std::vector<Tensor> poisonedBlocks(int count, ScalarType dtype) {
  std::vector<Tensor> blocks;
  for (int r = 0; r < count; ++r) blocks.push_back(filled(kCount, dtype, 1 - r % 2));
  return blocks;
}

// What every list op here leaves: block r holds r % 2 (rank r's value).
bool blocksAlternate(const std::vector<Tensor>& blocks) {
  for (size_t r = 0; r < blocks.size(); ++r) {
    if (!all(blocks[r], static_cast<double>(r % 2))) return false;
  }
  return true;
}

// One probe: runs the op on this rank and says whether this rank's result is right.
using Probe = std::function<bool(ProcessGroup&, ScalarType)>;

struct OpProbe {
  const char* name;
  Probe probe;
};

// In a sum over the group, bool saturates at true.
double sumOf(ScalarType dtype, double perRank, int ranks) {
  return dtype == ScalarType::Bool ? (perRank != 0 ? 1 : 0) : perRank * ranks;
}

std::vector<OpProbe> opProbes() {
  return {
      {"broadcast",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor t = filled(kCount, dt, pg.rank() == 0 ? 1 : 0);
         pg.broadcast(t)->wait();
         return all(t, 1);
       }},
      {"allreduce",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor t = filled(kCount, dt, 1);
         pg.allreduce(t)->wait();
         return all(t, sumOf(dt, 1, pg.size()));
       }},
      {"allreduce_coalesced",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor a = filled(kCount, dt, 1);
         Tensor b = filled(1, dt, 1);
         pg.allreduceCoalesced({a, b})->wait();
         return all(a, sumOf(dt, 1, pg.size())) && all(b, sumOf(dt, 1, pg.size()));
       }},
      {"reduce",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor t = filled(kCount, dt, 1);
         pg.reduce(t)->wait();
         return pg.rank() != 0 || all(t, sumOf(dt, 1, pg.size()));
       }},
      {"allgather",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor in = filled(kCount, dt, pg.rank() % 2);
         std::vector<Tensor> out = poisonedBlocks(pg.size(), dt);
         pg.allgather(out, in)->wait();
         return blocksAlternate(out);
       }},
      {"allgather_into_tensor",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor in = filled(kCount, dt, pg.rank() % 2);
         Tensor out = filled(kCount * pg.size(), dt, 0);
         pg.allgatherIntoTensor(out, in)->wait();
         std::vector<double> v = read(out);
         for (size_t i = 0; i < v.size(); ++i) {
           if (v[i] != static_cast<double>((i / kCount) % 2)) return false;
         }
         return true;
       }},
      {"gather",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor in = filled(kCount, dt, pg.rank() % 2);
         std::vector<Tensor> out = poisonedBlocks(pg.rank() == 0 ? pg.size() : 0, dt);
         pg.gather(out, in)->wait();
         return blocksAlternate(out);
       }},
      {"scatter",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor out = filled(kCount, dt, 1 - pg.rank() % 2);
         std::vector<Tensor> in;
         if (pg.rank() == 0) {
           for (int r = 0; r < pg.size(); ++r) in.push_back(filled(kCount, dt, r % 2));
         }
         pg.scatter(out, in)->wait();
         return all(out, pg.rank() % 2);
       }},
      {"reduce_scatter",
       [](ProcessGroup& pg, ScalarType dt) {
         std::vector<Tensor> in;
         for (int r = 0; r < pg.size(); ++r) in.push_back(filled(kCount, dt, r % 2));
         Tensor out = filled(kCount, dt, 0);
         pg.reduceScatter(out, in)->wait();
         return all(out, sumOf(dt, pg.rank() % 2, pg.size()));
       }},
      {"reduce_scatter_tensor",
       [](ProcessGroup& pg, ScalarType dt) {
         Tensor in = make(kCount * pg.size(), dt, [](int64_t i) { return (i / kCount) % 2; });
         Tensor out = filled(kCount, dt, 0);
         pg.reduceScatterTensor(out, in)->wait();
         return all(out, sumOf(dt, pg.rank() % 2, pg.size()));
       }},
      {"alltoall",
       [](ProcessGroup& pg, ScalarType dt) {
         // Rank r sends the value r % 2 to everybody: block p of the output holds p % 2.
         std::vector<Tensor> in;
         for (int p = 0; p < pg.size(); ++p) in.push_back(filled(kCount, dt, pg.rank() % 2));
         std::vector<Tensor> out = poisonedBlocks(pg.size(), dt);
         pg.alltoall(out, in)->wait();
         return blocksAlternate(out);
       }},
      {"alltoall_base (uneven splits)",
       [](ProcessGroup& pg, ScalarType dt) {
         // Rank r sends r + 1 elements (of value r % 2) to every rank.
         const int n = pg.size();
         Tensor in = filled(static_cast<int64_t>(n) * (pg.rank() + 1), dt, pg.rank() % 2);
         std::vector<int64_t> inSplits(n, pg.rank() + 1);
         std::vector<int64_t> outSplits;
         int64_t total = 0;
         for (int p = 0; p < n; ++p) {
           outSplits.push_back(p + 1);
           total += p + 1;
         }
         Tensor out = filled(total, dt, 0);
         pg.alltoallBase(out, in, outSplits, inSplits)->wait();
         std::vector<double> v = read(out);
         size_t k = 0;
         for (int p = 0; p < n; ++p) {
           for (int i = 0; i <= p; ++i, ++k) {
             if (v[k] != p % 2) return false;
           }
         }
         return true;
       }},
      {"send / recv",
       [](ProcessGroup& pg, ScalarType dt) {
         const int n = pg.size();
         Tensor mine = filled(kCount, dt, 1);
         Tensor theirs = filled(kCount, dt, 0);
         auto recv = pg.recv(theirs, (pg.rank() - 1 + n) % n, 3);
         auto send = pg.send(mine, (pg.rank() + 1) % n, 3);
         recv->wait();
         send->wait();
         return all(theirs, 1);
       }},
      {"recv_anysource",
       [](ProcessGroup& pg, ScalarType dt) {
         const int n = pg.size();
         Tensor mine = filled(kCount, dt, 1);
         Tensor theirs = filled(kCount, dt, 0);
         auto recv = pg.recvAnysource(theirs, 4);
         auto send = pg.send(mine, (pg.rank() + 1) % n, 4);
         recv->wait();
         send->wait();
         return all(theirs, 1) && recv->sourceRank() == (pg.rank() - 1 + n) % n;
       }},
      {"batch_isend_irecv",
       [](ProcessGroup& pg, ScalarType dt) {
         const int n = pg.size();
         Tensor mine = filled(kCount, dt, 1);
         Tensor theirs = filled(kCount, dt, 0);
         auto works = pg.batchIsendIrecv({{c10d::P2POp::Recv, theirs, (pg.rank() - 1 + n) % n, 5},
                                          {c10d::P2POp::Send, mine, (pg.rank() + 1) % n, 5}});
         for (auto& w : works) w->wait();
         return all(theirs, 1);
       }},
  };
}

// allreduce with op on dtype: rank r contributes r % 2 + 1 (1 and 2 alternate), so every op has
// a distinct, exact expected value.
bool probeReduceOp(ProcessGroup& pg, ScalarType dt, const ReduceOp& op) {
  const int n = pg.size();
  Tensor t = filled(kCount, dt, pg.rank() % 2 + 1);
  pg.allreduce(t, {.reduceOp = op})->wait();
  std::vector<double> contributions;
  for (int r = 0; r < n; ++r) contributions.push_back(dt == ScalarType::Bool ? 1 : r % 2 + 1);
  double expected = 0;
  switch (op.kind()) {
    case ReduceOp::SUM:
    case ReduceOp::PREMUL_SUM:
    case ReduceOp::AVG:
      for (double c : contributions) expected += c;
      if (op.kind() == ReduceOp::PREMUL_SUM) expected *= op.factor();
      if (op.kind() == ReduceOp::AVG) {
        expected /= n;
        if (!c10d::isFloatingPoint(dt)) expected = std::floor(expected);
      }
      if (dt == ScalarType::Bool) expected = expected != 0;
      break;
    case ReduceOp::PRODUCT:
      expected = 1;
      for (double c : contributions) expected *= c;
      break;
    case ReduceOp::MIN:
      expected = 1;
      break;
    case ReduceOp::MAX:
      expected = n > 1 && dt != ScalarType::Bool ? 2 : 1;
      break;
    case ReduceOp::BAND:
      expected = n > 1 && dt != ScalarType::Bool ? 0 : contributions[0];
      break;
    case ReduceOp::BOR:
      expected = n > 1 && dt != ScalarType::Bool ? 3 : 1;
      break;
    case ReduceOp::BXOR: {
      int64_t x = 0;
      for (double c : contributions) x ^= static_cast<int64_t>(c);
      expected = dt == ScalarType::Bool ? (x & 1) : x;
      break;
    }
  }
  return all(t, expected);
}

// "yes", "WRONG", or the first words of the refusal (every rank agrees, or it is WRONG).
std::string cell(ProcessGroup& pg, const std::function<bool()>& run, bool& anyWrong) {
  std::string refusal;
  bool right = false;
  bool notRun = false;
  try {
    right = run();
  } catch (const AcceptedNotRun&) {
    notRun = true;
  } catch (const std::exception& e) {
    refusal = e.what();
    // Without a device, an op the backend accepted fails on the device instead.
    notRun = gNoDevice && refusal.find("does not support") == std::string::npos;
  }
  // Everybody's verdict: 0 right, 1 refused, 2 wrong, 3 accepted but not run (the worst wins).
  Tensor verdict = Tensor::empty({1}, ScalarType::Int32);
  *verdict.data<int32_t>() = notRun ? 3 : !refusal.empty() ? 1 : (right ? 0 : 2);
  // On the CPU, whatever the probe's device: the matrix's own bookkeeping must not depend on it.
  pg.allreduce(verdict, {.reduceOp = ReduceOp::MAX})->wait();
  int worst = *verdict.data<int32_t>();
  if (worst == 0) return "yes";
  if (worst == 3) return "accepted";
  if (worst == 2) {
    anyWrong = true;
    return "WRONG";
  }
  if (refusal.empty()) return "no";
  // The reason without the op's own description: from "does not support", "has no", etc.
  for (const char* marker : {"does not support", "not supported", "has no", "lacks", "cannot"}) {
    size_t at = refusal.find(marker);
    if (at != std::string::npos) {
      std::string reason = refusal.substr(at);
      size_t end = std::min<size_t>(reason.find_first_of(";(\n"), 60);
      reason = reason.substr(0, end);
      while (!reason.empty() && reason.back() == ' ') reason.pop_back();
      return "no: " + reason;
    }
  }
  return "no: " + refusal.substr(0, 60);
}

std::string shortName(ScalarType dt) {
  return std::string(c10d::name(dt));
}

int run(const std::string& device) {
  std::shared_ptr<ProcessGroup> pg = c10d::initProcessGroup();
  if (device == "cuda") {
    int devices = c10d::cudaDeviceCount();
    gNoDevice = devices == 0;
    gDevice = c10d::Device::cuda(gNoDevice ? 0 : pg->rank() % devices);
  }
  const bool printing = pg->rank() == 0;
  std::shared_ptr<c10d::Backend> backend = pg->backend(gDevice.type);
  bool anyWrong = false;
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };

  line("## " + backend->name() + " on " + std::string(c10d::name(gDevice.type)) + " tensors (" +
       std::to_string(pg->size()) + " rank" + (pg->size() == 1 ? "" : "s") + ")");
  line("");
  if (gNoDevice) {
    line(
        "Without a CUDA device on the machine that generated this: \"accepted\" means the "
        "backend took the op and failed only for want of the device (its refusals come before "
        "any device work), so the cell comes from the code, not from a checked result.");
    line("");
  }
  std::string header = "| op |";
  std::string rule = "|---|";
  for (ScalarType dt : c10d::kAllScalarTypes) {
    header += " " + shortName(dt) + " |";
    rule += "---|";
  }
  line(header);
  line(rule);
  for (const OpProbe& probe : opProbes()) {
    std::string row = std::string("| ") + probe.name + " |";
    for (ScalarType dt : c10d::kAllScalarTypes) {
      row += " " +
             cell(
                 *pg, [&] { return probe.probe(*pg, dt); }, anyWrong) +
             " |";
    }
    line(row);
  }
  line("");
  line("Reduce ops, through allreduce (\"undefined\": c10d refuses the pair on every backend):");
  line("");
  line(header);
  line(rule);
  for (ReduceOp::Kind kind :
       {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
        ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::PREMUL_SUM}) {
    ReduceOp op = kind == ReduceOp::PREMUL_SUM ? ReduceOp::premulSum(2.0) : ReduceOp(kind);
    std::string row = "| " + std::string(c10d::name(kind)) + " |";
    for (ScalarType dt : c10d::kAllScalarTypes) {
      if (!c10d::supports(op, dt)) {
        row += " undefined |";
        continue;
      }
      row += " " +
             cell(
                 *pg, [&] { return probeReduceOp(*pg, dt, op); }, anyWrong) +
             " |";
    }
    line(row);
  }
  line("");
  if (printing) std::fputs(out.c_str(), stdout);
  pg->barrier()->wait();
  return anyWrong ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Probes every op x dtype (and reduce op x dtype) of the job's backend.",
               "c10d-backend-matrix"};
  std::string device = "cpu";
  app.add_option("--device", device, "Where the probes' tensors live")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  std::string hasBackend;
  app.add_option("--has-backend", hasBackend,
                 "Only say (by exit status 0 or 1) whether this build has the named backend");
  bool cudaDevices = false;
  app.add_flag("--cuda-devices", cudaDevices, "Only print the number of visible CUDA devices");
  CLI11_PARSE(app, argc, argv);
  if (!hasBackend.empty()) return c10d::isBackendRegistered(hasBackend) ? 0 : 1;
  if (cudaDevices) {
    std::printf("%d\n", c10d::cudaDeviceCount());
    return 0;
  }
  try {
    return run(device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "c10d-backend-matrix: %s\n", e.what());
    return 1;
  }
}
