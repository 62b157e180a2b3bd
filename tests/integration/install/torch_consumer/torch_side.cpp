// libtorch's half of the process: its own c10d (a HashStore), its tensors and its DLPack export.
// Apart from main.cpp because libtorch's c10d:: and ours cannot both be named in one file.
#include "torch_side.hpp"

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

namespace torch_side {

bool torchStoreWorks() {
  c10d::HashStore store;
  store.set("key", std::vector<uint8_t>{4, 2});
  return store.get("key") == std::vector<uint8_t>{4, 2};
}

struct Tensor::Impl {
  at::Tensor tensor;
};

Tensor::Tensor(int64_t count, float value)
    : impl_(new Impl{at::full({count}, value, at::kFloat)}) {}
Tensor::~Tensor() = default;
DLManagedTensor* Tensor::toDLPack() const {
  return at::toDLPack(impl_->tensor);
}
float Tensor::at(int64_t i) const {
  return impl_->tensor.data_ptr<float>()[i];
}
const void* Tensor::data() const {
  return impl_->tensor.data_ptr();
}

}  // namespace torch_side
