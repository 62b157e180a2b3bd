// c10d._torch_backend: the Python face of TorchProcessGroup, imported by c10d/torch.py (which
// registers it with torch.distributed). Built against torch's pybind11 ABI so that torch's
// ProcessGroup class, registered by torch._C, is this class's base.

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "python/torch_backend/TorchProcessGroup.hpp"

namespace py = pybind11;

namespace {

// The holder Python keeps: drops its reference with the GIL released, because destroying the
// group joins our threads, and one of them may be completing a Future whose Python callback
// waits for the GIL. (torch holds its own groups the same way.)
template <typename T>
class NoGilReleaseHolder {
 public:
  NoGilReleaseHolder() = default;
  explicit NoGilReleaseHolder(T* raw)
      : impl_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(raw)) {}
  explicit NoGilReleaseHolder(c10::intrusive_ptr<T> impl) : impl_(std::move(impl)) {}
  NoGilReleaseHolder(const NoGilReleaseHolder&) = default;
  NoGilReleaseHolder(NoGilReleaseHolder&&) noexcept = default;
  NoGilReleaseHolder& operator=(const NoGilReleaseHolder&) = default;
  NoGilReleaseHolder& operator=(NoGilReleaseHolder&&) noexcept = default;
  ~NoGilReleaseHolder() {
    if (impl_ && PyGILState_Check()) {
      py::gil_scoped_release release;
      impl_.reset();
    }
  }
  T* get() const noexcept { return impl_.get(); }

 private:
  c10::intrusive_ptr<T> impl_;
};

}  // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, NoGilReleaseHolder<T>, true);

PYBIND11_MODULE(_torch_backend, module) {
  module.doc() = "c10d's collectives as a torch.distributed backend (see c10d.torch)";
  // torch's ProcessGroup must be registered before a class can derive from it.
  py::module_::import("torch.distributed");
  using torch_backend::TorchProcessGroup;
  py::class_<TorchProcessGroup, ::c10d::ProcessGroup, NoGilReleaseHolder<TorchProcessGroup>>(
      module, "ProcessGroupC10d",
      "A torch.distributed ProcessGroup whose operations are c10d's. Created by "
      "torch.distributed when backend='c10d'; see c10d.torch.")
      .def(py::init([](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string name, std::string backendSpec,
                       std::string profilerName) {
             return NoGilReleaseHolder<TorchProcessGroup>(c10::make_intrusive<TorchProcessGroup>(
                 store, rank, size, timeout, std::move(name), std::move(backendSpec),
                 std::move(profilerName)));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("name") = "torch", py::arg("backend_spec") = "",
           py::arg("profiler_name") = torch_backend::kBackendName,
           // Rendezvous blocks; other Python threads (and torch's store, when it is written in
           // Python) must go on meanwhile.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("backend_spec", &TorchProcessGroup::backendSpec,
                             "Our backend spec serving this group: 'gloo', 'cpu:gloo,cuda:nccl'");
  module.def(
      "_drain_completions",
      [](double seconds) {
        return torch_backend::drainCompletions(
            std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
      },
      py::arg("seconds"),
      "Waits (at most seconds) for torch Futures' completions still running on c10d's threads; "
      "False when the time passed. c10d.torch calls it at interpreter exit.",
      py::call_guard<py::gil_scoped_release>());
  module.attr("BACKEND_NAME") = torch_backend::kBackendName;
}
