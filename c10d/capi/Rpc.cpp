// The C API's RPC: functions registered by name that take and return bytes and tensors, over
// c10d::rpc::RpcAgent. On the wire a call is an ordinary typed call of (bytes, tensors).

#include <dlpack/dlpack.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "c10d/capi/Handles.hpp"
#include "rpc/RpcAgent.hpp"

struct c10d_rpc_message {
  std::string bytes;
  std::vector<c10d::Tensor> tensors;
  std::string error;  // a function's failure text
};

struct c10d_rpc {
  std::shared_ptr<c10d::rpc::RpcAgent> agent;
  std::vector<std::string> names;  // by worker id, for c10d_rpc_worker_name's pointers
};

using Reply = std::tuple<std::string, std::vector<c10d::Tensor>>;

struct c10d_rpc_future {
  c10d::rpc::Future<Reply> call;
};

// What an async function answers through: the call's future, and whether it was answered
// (by c10d_rpc_respond, which frees this, or by the library when the function failed at once).
struct c10d_rpc_responder {
  c10d::rpc::Future<Reply> call;
  std::string name;
  std::shared_ptr<std::atomic<bool>> answered;
};

using namespace c10d;
using namespace c10d::capi;

namespace {

std::string textOf(const char* text, const char* call, const char* what) {
  C10D_CHECK(text != nullptr, InvalidArgument, call, ": ", what, " is NULL");
  return text;
}

// Registers a C function as a typed function of (bytes, tensors) -> (bytes, tensors).
void registerCFunction(rpc::RpcAgent& agent, const std::string& name, c10d_rpc_function function,
                       void* user) {
  C10D_CHECK(function != nullptr, InvalidArgument, "c10d_rpc: function '", name, "' is NULL");
  agent.registerFunction(
      name, [name, function, user](std::string bytes, std::vector<Tensor> tensors) -> Reply {
        c10d_rpc_message request{std::move(bytes), std::move(tensors), {}};
        c10d_rpc_message reply;
        c10d_status status = function(user, &request, &reply);
        C10D_CHECK(status == C10D_OK, Error, "function '", name, "' returned ",
                   c10d_status_name(status), reply.error.empty() ? "" : ": ", reply.error);
        return Reply{std::move(reply.bytes), std::move(reply.tensors)};
      });
}

// Registers a C function that replies later as a function returning a Future of its reply.
void registerCAsyncFunction(rpc::RpcAgent& agent, const std::string& name,
                            c10d_rpc_async_function function, void* user) {
  C10D_CHECK(function != nullptr, InvalidArgument, "c10d_rpc: function '", name, "' is NULL");
  agent.registerFunction(name, [name, function, user](std::string bytes,
                                                      std::vector<Tensor> tensors) {
    c10d_rpc_message request{std::move(bytes), std::move(tensors), {}};
    rpc::Future<Reply> reply;
    auto answered = std::make_shared<std::atomic<bool>>(false);
    auto* responder = new c10d_rpc_responder{reply, name, answered};
    c10d_status status = function(user, &request, responder);
    if (status != C10D_OK && !answered->exchange(true)) {
      delete responder;
      reply.setError(std::make_exception_ptr(Error(detail::concat(
          "function '", name, "' returned ", c10d_status_name(status), " without responding"))));
    }
    return reply;
  });
}

c10d_rpc_message* messageOf(Reply&& reply) {
  return new c10d_rpc_message{std::move(std::get<0>(reply)), std::move(std::get<1>(reply)), {}};
}

}  // namespace

extern "C" {

c10d_status c10d_rpc_message_new(c10d_rpc_message** out) {
  return guarded([&] {
    c10d_rpc_message*& slot = outOf(out, "c10d_rpc_message_new");
    slot = new c10d_rpc_message;
  });
}

void c10d_rpc_message_free(c10d_rpc_message* message) {
  delete message;
}

c10d_status c10d_rpc_message_set_bytes(c10d_rpc_message* message, const void* data, size_t size) {
  return guarded([&] {
    const char* call = "c10d_rpc_message_set_bytes";
    c10d_rpc_message& m = deref(message, call, "message");
    C10D_CHECK(data != nullptr || size == 0, InvalidArgument, call, ": data is NULL with size ",
               size);
    m.bytes.assign(static_cast<const char*>(data), size);
  });
}

c10d_status c10d_rpc_message_bytes(const c10d_rpc_message* message, const void** data,
                                   size_t* size) {
  return guarded([&] {
    const char* call = "c10d_rpc_message_bytes";
    const c10d_rpc_message& m = deref(message, call, "message");
    outOf(data, call) = m.bytes.data();
    outOf(size, call) = m.bytes.size();
  });
}

c10d_status c10d_rpc_message_add_tensor(c10d_rpc_message* message, DLManagedTensor* tensor) {
  return guarded([&] {
    const char* call = "c10d_rpc_message_add_tensor";
    // Ours from the first line, whatever fails after: fromDLPack calls the deleter also when it
    // refuses the tensor, and t's holder does when anything below throws.
    Tensor t = fromDLPack(tensor);
    c10d_rpc_message& m = deref(message, call, "message");
    C10D_CHECK(t.device().isCPU(), InvalidArgument, call,
               ": RPC sends CPU tensors; copy CUDA tensors to the host first");
    m.tensors.push_back(std::move(t));
  });
}

size_t c10d_rpc_message_num_tensors(const c10d_rpc_message* message) {
  return message != nullptr ? message->tensors.size() : 0;
}

c10d_status c10d_rpc_message_tensor(const c10d_rpc_message* message, size_t index,
                                    DLManagedTensor** out) {
  return guarded([&] {
    const char* call = "c10d_rpc_message_tensor";
    const c10d_rpc_message& m = deref(message, call, "message");
    C10D_CHECK(index < m.tensors.size(), InvalidArgument, call, ": index ", index,
               " is out of range; the message has ", m.tensors.size(), " tensor(s)");
    DLManagedTensor*& slot = outOf(out, call);
    slot = toDLPack(m.tensors[index]);
  });
}

c10d_status c10d_rpc_message_set_error(c10d_rpc_message* reply, const char* text) {
  return guarded([&] {
    const char* call = "c10d_rpc_message_set_error";
    deref(reply, call, "reply").error = textOf(text, call, "text");
  });
}

c10d_status c10d_rpc_init(c10d_store* store, const char* name, int rank, int world_size,
                          const c10d_rpc_function_entry* functions, size_t num_functions,
                          const c10d_rpc_options* options, c10d_rpc** out) {
  return guarded([&] {
    const char* call = "c10d_rpc_init";
    c10d_store& s = deref(store, call, "store");
    std::string worker = textOf(name, call, "name");
    outOf(out, call);
    C10D_CHECK(functions != nullptr || num_functions == 0, InvalidArgument, call,
               ": functions is NULL with ", num_functions, " functions");
    rpc::RpcOptions rpcOptions;
    const c10d_rpc_async_function_entry* asyncFunctions = nullptr;
    size_t numAsyncFunctions = 0;
    if (options != nullptr) {
      // The first version of the struct ended before async_functions.
      constexpr size_t kFirstSize = offsetof(c10d_rpc_options, async_functions);
      C10D_CHECK(
          options->struct_size == sizeof(c10d_rpc_options) || options->struct_size == kFirstSize,
          InvalidArgument, call, ": options->struct_size is ", options->struct_size,
          ", this library's is ", sizeof(c10d_rpc_options), " (or ", kFirstSize,
          " before async_functions); start from C10D_RPC_OPTIONS_INIT");
      C10D_CHECK(options->timeout_ms > 0 && options->init_timeout_ms > 0 && options->threads > 0,
                 InvalidArgument, call, ": options need positive timeout_ms (", options->timeout_ms,
                 "), init_timeout_ms (", options->init_timeout_ms, ") and threads (",
                 options->threads, ")");
      rpcOptions.timeout = std::chrono::milliseconds(options->timeout_ms);
      rpcOptions.initTimeout = std::chrono::milliseconds(options->init_timeout_ms);
      rpcOptions.threads = options->threads;
      if (options->struct_size == sizeof(c10d_rpc_options)) {
        asyncFunctions = options->async_functions;
        numAsyncFunctions = options->num_async_functions;
        C10D_CHECK(asyncFunctions != nullptr || numAsyncFunctions == 0, InvalidArgument, call,
                   ": options->async_functions is NULL with ", numAsyncFunctions, " functions");
      }
    }
    for (size_t i = 0; i < num_functions; ++i) {
      C10D_CHECK(functions[i].name != nullptr, InvalidArgument, call, ": functions[", i,
                 "].name is NULL");
    }
    for (size_t i = 0; i < numAsyncFunctions; ++i) {
      C10D_CHECK(asyncFunctions[i].name != nullptr, InvalidArgument, call,
                 ": options->async_functions[", i, "].name is NULL");
    }
    auto agent =
        rpc::RpcAgent::create(s.store, worker, rank, world_size, rpcOptions, [&](rpc::RpcAgent& a) {
          for (size_t i = 0; i < num_functions; ++i) {
            registerCFunction(a, functions[i].name, functions[i].function, functions[i].user);
          }
          for (size_t i = 0; i < numAsyncFunctions; ++i) {
            registerCAsyncFunction(a, asyncFunctions[i].name, asyncFunctions[i].function,
                                   asyncFunctions[i].user);
          }
        });
    std::vector<std::string> names(static_cast<size_t>(world_size));
    for (const rpc::WorkerInfo& info : agent->workers()) {
      names.at(static_cast<size_t>(info.id)) = info.name;
    }
    *out = new c10d_rpc{std::move(agent), std::move(names)};
  });
}

c10d_status c10d_rpc_register(c10d_rpc* agent, const char* name, c10d_rpc_function function,
                              void* user) {
  return guarded([&] {
    const char* call = "c10d_rpc_register";
    registerCFunction(*deref(agent, call, "agent").agent, textOf(name, call, "name"), function,
                      user);
  });
}

c10d_status c10d_rpc_register_async(c10d_rpc* agent, const char* name,
                                    c10d_rpc_async_function function, void* user) {
  return guarded([&] {
    const char* call = "c10d_rpc_register_async";
    registerCAsyncFunction(*deref(agent, call, "agent").agent, textOf(name, call, "name"), function,
                           user);
  });
}

c10d_status c10d_rpc_respond(c10d_rpc_responder* responder, c10d_status status,
                             const c10d_rpc_message* reply) {
  return guarded([&] {
    const char* call = "c10d_rpc_respond";
    c10d_rpc_responder& r = deref(responder, call, "responder");
    C10D_CHECK(status != C10D_OK || reply != nullptr, InvalidArgument, call,
               ": reply is NULL with C10D_OK");
    C10D_CHECK(!r.answered->exchange(true), InvalidArgument, call, ": function '", r.name,
               "' was answered already");
    std::unique_ptr<c10d_rpc_responder> owned(responder);
    if (status == C10D_OK) {
      owned->call.setValue(Reply{reply->bytes, reply->tensors});
    } else {
      const std::string text = reply != nullptr ? reply->error : std::string();
      owned->call.setError(std::make_exception_ptr(
          Error(detail::concat("function '", owned->name, "' responded ", c10d_status_name(status),
                               text.empty() ? "" : ": ", text))));
    }
  });
}

c10d_status c10d_rpc_worker_id(c10d_rpc* agent, const char* name, int* id) {
  return guarded([&] {
    const char* call = "c10d_rpc_worker_id";
    int found = deref(agent, call, "agent").agent->workerInfo(textOf(name, call, "name")).id;
    outOf(id, call) = found;
  });
}

c10d_status c10d_rpc_worker_name(c10d_rpc* agent, int id, const char** name) {
  return guarded([&] {
    const char* call = "c10d_rpc_worker_name";
    c10d_rpc& a = deref(agent, call, "agent");
    C10D_CHECK(id >= 0 && static_cast<size_t>(id) < a.names.size(), InvalidArgument, call,
               ": no worker has id ", id, "; ids are 0 to ", a.names.size() - 1);
    outOf(name, call) = a.names[static_cast<size_t>(id)].c_str();
  });
}

c10d_status c10d_rpc_worker_count(c10d_rpc* agent, int* count) {
  return guarded([&] {
    const char* call = "c10d_rpc_worker_count";
    outOf(count, call) = static_cast<int>(deref(agent, call, "agent").names.size());
  });
}

c10d_status c10d_rpc_call(c10d_rpc* agent, const char* to, const char* function,
                          const c10d_rpc_message* args, int64_t timeout_ms, c10d_rpc_future** out) {
  return guarded([&] {
    const char* call = "c10d_rpc_call";
    rpc::RpcAgent& a = *deref(agent, call, "agent").agent;
    std::string worker = textOf(to, call, "to");
    std::string name = textOf(function, call, "function");
    outOf(out, call);
    std::chrono::milliseconds timeout =
        timeout_ms < 0 ? a.options().timeout : std::chrono::milliseconds(timeout_ms);
    std::string bytes = args != nullptr ? args->bytes : std::string();
    std::vector<Tensor> tensors = args != nullptr ? args->tensors : std::vector<Tensor>{};
    *out = new c10d_rpc_future{
        a.rpcAsyncWithTimeout<Reply>(worker, name, timeout, std::move(bytes), std::move(tensors))};
  });
}

c10d_status c10d_rpc_future_on_done(c10d_rpc_future* future, c10d_rpc_callback callback,
                                    void* user) {
  return guarded([&] {
    const char* call = "c10d_rpc_future_on_done";
    rpc::Future<Reply>& f = deref(future, call, "future").call;
    C10D_CHECK(callback != nullptr, InvalidArgument, call, ": callback is NULL");
    f.addCallback([callback, user] { callback(user); });
  });
}

c10d_status c10d_rpc_future_wait(c10d_rpc_future* future, int64_t timeout_ms,
                                 c10d_rpc_message** result) {
  return guarded([&] {
    const char* call = "c10d_rpc_future_wait";
    rpc::Future<Reply>& f = deref(future, call, "future").call;
    if (timeout_ms < 0) {
      f.wait();
    } else if (!f.waitFor(std::chrono::milliseconds(timeout_ms))) {
      C10D_THROW(TimeoutError, call, ": the call did not end within ", timeout_ms,
                 " ms (it goes on, up to its own timeout)");
    }
    if (result != nullptr) *result = messageOf(f.value());
  });
}

c10d_status c10d_rpc_future_test(c10d_rpc_future* future, int* completed) {
  return guarded([&] {
    const char* call = "c10d_rpc_future_test";
    const bool done = deref(future, call, "future").call.completed();
    outOf(completed, call) = done ? 1 : 0;
  });
}

void c10d_rpc_future_free(c10d_rpc_future* future) {
  delete future;
}

c10d_status c10d_rpc_call_sync(c10d_rpc* agent, const char* to, const char* function,
                               const c10d_rpc_message* args, int64_t timeout_ms,
                               c10d_rpc_message** result) {
  c10d_rpc_future* future = nullptr;
  c10d_status status = c10d_rpc_call(agent, to, function, args, timeout_ms, &future);
  if (status != C10D_OK) return status;
  status = c10d_rpc_future_wait(future, -1, result);
  c10d_rpc_future_free(future);
  return status;
}

c10d_status c10d_rpc_shutdown(c10d_rpc* agent, int graceful) {
  return guarded(
      [&] { deref(agent, "c10d_rpc_shutdown", "agent").agent->shutdown(graceful != 0); });
}

void c10d_rpc_free(c10d_rpc* agent) {
  delete agent;
}

}  // extern "C"
