// A rank that lets a c10d error escape main: rank 1 waits for a message nobody sends. Under a
// launcher that names an error file, the error must reach the launcher's failure summary.
#include <chrono>

#include "c10d/Init.hpp"

int main() {
  auto group = c10d::initProcessGroup();
  if (group->rank() == 1) {
    auto buffer = c10d::Tensor::zeros({4}, c10d::ScalarType::Float32);
    group->recv(buffer, 0, c10d::RecvOptions{.tag = 77, .timeout = std::chrono::milliseconds(300)})
        ->wait();
  }
  // Rank 0 stays until the launcher stops it, like a rank blocked on its peer.
  group->barrier()->wait();
  return 0;
}
