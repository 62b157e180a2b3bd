// Blocking point-to-point: rank 0 sends 1000 floats to rank 1 with send(...)->wait(), rank 1
// receives them with recv(...)->wait() and checks every value; any further ranks only join the
// final barrier. Needs at least 2 ranks. Run it with
// `c10drun --nproc-per-node 2 p2p_send_recv` (or under mpirun with MASTER_ADDR/MASTER_PORT set).
//
// Exits 0 only when every check below passed on this rank.

#include <cstdint>
#include <cstdio>

#include "ExampleUtils.hpp"

namespace {

constexpr int64_t kCount = 1000;
constexpr int kTag = 3;

// Not a simple ramp, so that a shifted or truncated buffer cannot pass by accident; exact in
// float32 because every value is a small multiple of 0.25.
float payload(int64_t i) {
  return static_cast<float>((i * 37) % 1001) * 0.25f - 100.0f;
}

void run(c10d::ProcessGroup& pg, examples::Checker& checks) {
  C10D_CHECK(pg.size() >= 2, c10d::InvalidArgument, "needs at least 2 ranks, got ", pg.size(),
             "; run with c10drun --nproc-per-node 2 (or more)");
  c10d::Tensor tensor = examples::empty({kCount}, c10d::ScalarType::Float32);
  if (pg.rank() == 0) {
    examples::fill<float>(tensor, payload);
    // send() only hands the buffer over; wait() returns once the tensor may be reused.
    pg.send(tensor, /*dstRank=*/1, kTag)->wait();
    std::printf("rank 0: sent %lld floats to rank 1\n", static_cast<long long>(kCount));
  } else if (pg.rank() == 1) {
    // A sentinel nothing sends: an element the receive did not write cannot match payload().
    examples::fill<float>(tensor, [](int64_t) { return -1.0e9f; });
    pg.recv(tensor, /*srcRank=*/0, kTag)->wait();
    if (checks.expectValues<float>(tensor, payload, "tensor received from rank 0")) {
      std::printf("rank 1: received %lld floats from rank 0, all equal to the values sent\n",
                  static_cast<long long>(kCount));
    }
  } else {
    std::printf("rank %d: not part of the exchange, only joins the final barrier\n", pg.rank());
  }
}

}  // namespace

int main() {
  return examples::runExample("p2p_send_recv", run);
}
