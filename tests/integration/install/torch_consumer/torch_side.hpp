#pragma once
// The only view main.cpp gets of libtorch: no ATen header here, since ATen brings its own copy
// of dlpack.h (the same v0.6 layout as Debian's, which c10d's headers include).
#include <cstdint>
#include <memory>

struct DLManagedTensor;

namespace torch_side {

// Runs libtorch's c10d::HashStore, so that both libraries' c10d code is live in this process.
bool torchStoreWorks();

// A torch CPU float tensor of count elements, all value.
class Tensor {
 public:
  Tensor(int64_t count, float value);
  ~Tensor();
  DLManagedTensor* toDLPack() const;
  float at(int64_t i) const;
  const void* data() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace torch_side
