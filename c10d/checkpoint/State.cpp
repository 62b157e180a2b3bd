#include "c10d/checkpoint/State.hpp"

#include <cstring>
#include <sstream>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

constexpr const char* kIntPrefix = "int64:";

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Throws unless where lies inside globalShape.
void checkInside(const std::string& name, const std::vector<int64_t>& globalShape,
                 const Slice& where) {
  for (int64_t s : globalShape) {
    C10D_CHECK(s >= 0, InvalidArgument, "checkpoint::State: tensor '", name,
               "' has a negative size in its global shape ", shapeText(globalShape));
  }
  if (where.kind == Slice::Kind::Flat) {
    C10D_CHECK(where.offsets.size() == 1 && where.sizes.size() == 1, InvalidArgument,
               "checkpoint::State: tensor '", name, "': a flat slice has one offset and one size");
    const int64_t n = product(globalShape);
    C10D_CHECK(
        where.offsets[0] >= 0 && where.sizes[0] >= 0 && where.offsets[0] + where.sizes[0] <= n,
        InvalidArgument, "checkpoint::State: tensor '", name, "': slice ", where.describe(),
        " is outside its ", n, " elements (global shape ", shapeText(globalShape), ")");
    return;
  }
  C10D_CHECK(where.offsets.size() == globalShape.size() && where.sizes.size() == globalShape.size(),
             InvalidArgument, "checkpoint::State: tensor '", name, "': slice ", where.describe(),
             " has ", where.offsets.size(), " offsets and ", where.sizes.size(),
             " sizes for a global shape of ", globalShape.size(), " dimensions ",
             shapeText(globalShape));
  for (size_t d = 0; d < globalShape.size(); ++d) {
    C10D_CHECK(where.offsets[d] >= 0 && where.sizes[d] >= 0 &&
                   where.offsets[d] + where.sizes[d] <= globalShape[d],
               InvalidArgument, "checkpoint::State: tensor '", name, "': slice ", where.describe(),
               " is outside global shape ", shapeText(globalShape), " in dimension ", d);
  }
}

}  // namespace

std::string shapeText(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t d = 0; d < shape.size(); ++d) out << (d ? ", " : "") << shape[d];
  out << ']';
  return out.str();
}

std::string shapeText(ScalarType dtype, const std::vector<int64_t>& shape) {
  return std::string(c10d::name(dtype)) + shapeText(shape);
}

Slice Slice::whole(const std::vector<int64_t>& globalShape) {
  return box(std::vector<int64_t>(globalShape.size(), 0), globalShape);
}

Slice Slice::box(std::vector<int64_t> offsets, std::vector<int64_t> sizes) {
  return Slice{Kind::Box, std::move(offsets), std::move(sizes)};
}

Slice Slice::rows(int64_t first, int64_t count, const std::vector<int64_t>& globalShape) {
  C10D_CHECK(!globalShape.empty(), InvalidArgument,
             "checkpoint::Slice::rows: a tensor of no dimensions has no rows");
  Slice slice = whole(globalShape);
  slice.offsets[0] = first;
  slice.sizes[0] = count;
  return slice;
}

Slice Slice::columns(int64_t first, int64_t count, const std::vector<int64_t>& globalShape) {
  C10D_CHECK(!globalShape.empty(), InvalidArgument,
             "checkpoint::Slice::columns: a tensor of no dimensions has no columns");
  Slice slice = whole(globalShape);
  slice.offsets.back() = first;
  slice.sizes.back() = count;
  return slice;
}

Slice Slice::flat(int64_t begin, int64_t count) {
  return Slice{Kind::Flat, {begin}, {count}};
}

int64_t Slice::numel() const {
  return product(sizes);
}

std::string Slice::describe() const {
  std::ostringstream out;
  if (kind == Kind::Flat) {
    out << "flat[" << (offsets.empty() ? 0 : offsets[0]) << ':'
        << (offsets.empty() || sizes.empty() ? 0 : offsets[0] + sizes[0]) << ']';
    return out.str();
  }
  out << '[';
  for (size_t d = 0; d < offsets.size() && d < sizes.size(); ++d) {
    out << (d ? ", " : "") << offsets[d] << ':' << offsets[d] + sizes[d];
  }
  out << ']';
  return out.str();
}

void State::add(const std::string& name, const Tensor& tensor) {
  C10D_CHECK(tensor.defined(), InvalidArgument, "checkpoint::State::add: tensor '", name,
             "' is undefined");
  addSlice(name, tensor, tensor.sizes(), Slice::whole(tensor.sizes()));
}

void State::addSlice(const std::string& name, const Tensor& local, std::vector<int64_t> globalShape,
                     Slice where) {
  C10D_CHECK(!name.empty(), InvalidArgument, "checkpoint::State: a tensor needs a name");
  // '@' separates a tensor's name from its slice in the data files' keys, and "__metadata__" is
  // the safetensors header's own entry.
  C10D_CHECK(name.find('@') == std::string::npos && name != "__metadata__", InvalidArgument,
             "checkpoint::State: tensor name '", name,
             "' is reserved or holds '@' (which the data files use to name slices)");
  C10D_CHECK(local.defined(), InvalidArgument, "checkpoint::State: tensor '", name,
             "' is undefined");
  C10D_CHECK(local.isContiguous(), InvalidArgument, "checkpoint::State: tensor '", name, "' is ",
             local.describe(), "; pass a contiguous tensor (a copy of the view)");
  checkInside(name, globalShape, where);
  C10D_CHECK(local.numel() == where.numel(), InvalidArgument, "checkpoint::State: tensor '", name,
             "': slice ", where.describe(), " has ", where.numel(), " elements but the local ",
             local.describe(), " has ", local.numel());
  for (const StateTensor& t : tensors_) {
    if (t.name != name) continue;
    C10D_CHECK(t.local.dtype() == local.dtype() && t.globalShape == globalShape, InvalidArgument,
               "checkpoint::State: tensor '", name, "' was added as ",
               shapeText(t.local.dtype(), t.globalShape), " and now as ",
               shapeText(local.dtype(), globalShape));
    C10D_CHECK(!(t.slice == where), InvalidArgument, "checkpoint::State: slice ", where.describe(),
               " of tensor '", name, "' was added twice");
  }
  tensors_.push_back({name, std::move(globalShape), std::move(where), local});
}

void State::setValue(const std::string& name, std::string bytes) {
  C10D_CHECK(!name.empty(), InvalidArgument, "checkpoint::State: a value needs a name");
  values_[name] = std::move(bytes);
}

void State::setInt(const std::string& name, int64_t value) {
  setValue(name, kIntPrefix + std::to_string(value));
}

std::optional<std::string> State::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

int64_t State::getInt(const std::string& name) const {
  auto it = values_.find(name);
  C10D_CHECK(it != values_.end(), InvalidArgument, "checkpoint::State: no value '", name, "'");
  const std::string& text = it->second;
  const size_t prefix = std::strlen(kIntPrefix);
  C10D_CHECK(text.compare(0, prefix, kIntPrefix) == 0, InvalidArgument,
             "checkpoint::State: value '", name, "' was not set by setInt");
  try {
    size_t used = 0;
    int64_t parsed = std::stoll(text.substr(prefix), &used);
    if (used == text.size() - prefix) return parsed;
  } catch (const std::exception&) {
  }
  C10D_THROW(InvalidArgument, "checkpoint::State: value '", name, "' is not an integer: '", text,
             "'");
}

void State::onLoad(std::function<void(const State&)> hook) {
  hooks_.push_back(std::move(hook));
}

void State::beforeSave(std::function<void()> hook) {
  saveHooks_.push_back(std::move(hook));
}

}  // namespace c10d::inline v1::checkpoint
