// The C API's recovery: thin calls into c10d/elastic.

#include <algorithm>
#include <memory>

#include "c10d/capi/Handles.hpp"
#include "c10d/elastic/ElasticGroup.hpp"

struct c10d_elastic {
  std::unique_ptr<c10d::elastic::ElasticGroup> elastic;
};

using namespace c10d;
using namespace c10d::capi;

namespace {

elastic::ElasticGroup& elasticOf(const c10d_elastic* e, const char* call) {
  return *deref(e, call, "elastic").elastic;
}

// The state to heal, after its buffers' CUDA work; NULL: none.
checkpoint::State* stateOf(c10d_checkpoint_state* state) {
  if (state == nullptr) return nullptr;
  waitForStreams(*state);
  return &state->state;
}

// Checked before the reform or join, so a wrong struct fails the call before it changes anything.
void checkReport(const c10d_reformation* out, const char* call) {
  if (out == nullptr) return;
  C10D_CHECK(out->struct_size == sizeof(c10d_reformation), InvalidArgument, call,
             ": out->struct_size is ", out->struct_size, ", this library's is ",
             sizeof(c10d_reformation), " (start from C10D_REFORMATION_INIT)");
}

void report(const elastic::Reformation& r, c10d_reformation* out) {
  if (out == nullptr) return;
  out->generation = r.generation;
  out->step = r.step;
  out->healed = r.healed ? 1 : 0;
  out->num_lost = r.lost.size();
  out->num_joined = r.joined.size();
  out->seconds = r.seconds;
}

}  // namespace

extern "C" {

c10d_status c10d_elastic_from_env(const c10d_elastic_options* options, c10d_elastic** out) {
  const char* call = "c10d_elastic_from_env";
  return guarded([&] {
    c10d_elastic*& result = outOf(out, call);
    elastic::ElasticOptions elastic;
    if (checkOptions(options, call)) {
      if (options->backend != nullptr) elastic.group.backend = options->backend;
      C10D_CHECK(
          options->timeout_ms >= 0 && options->join_timeout_ms >= 0 && options->min_size >= 0,
          InvalidArgument, call,
          ": options->timeout_ms, join_timeout_ms and min_size must be >= 0 (0: the "
          "default), got ",
          options->timeout_ms, ", ", options->join_timeout_ms, ", ", options->min_size);
      if (options->timeout_ms > 0) {
        elastic.group.timeout = std::chrono::milliseconds(options->timeout_ms);
      }
      if (options->group_name != nullptr) elastic.group.groupName = options->group_name;
      if (options->min_size > 0) elastic.minSize = options->min_size;
      if (options->join_timeout_ms > 0) {
        elastic.joinTimeout = std::chrono::milliseconds(options->join_timeout_ms);
      }
    }
    auto handle = std::make_unique<c10d_elastic>();
    handle->elastic = elastic::ElasticGroup::fromEnvironment(std::move(elastic));
    result = handle.release();
  });
}

void c10d_elastic_free(c10d_elastic* elastic) {
  delete elastic;
}

c10d_status c10d_elastic_group(c10d_elastic* elastic, c10d_group** out) {
  const char* call = "c10d_elastic_group";
  return guarded([&] {
    c10d_group*& result = outOf(out, call);
    result = new c10d_group{elasticOf(elastic, call).sharedGroup()};
  });
}

c10d_status c10d_elastic_commit(c10d_elastic* elastic, int ok, int* committed) {
  const char* call = "c10d_elastic_commit";
  return guarded([&] {
    int& slot = outOf(committed, call);  // before the commit, which every member makes
    slot = elasticOf(elastic, call).commit(ok != 0) ? 1 : 0;
  });
}

int c10d_elastic_joins_pending(const c10d_elastic* elastic) {
  return elastic != nullptr && elastic->elastic->joinsPending() ? 1 : 0;
}

c10d_status c10d_elastic_reform(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                c10d_reformation* out) {
  const char* call = "c10d_elastic_reform";
  return guarded([&] {
    checkReport(out, call);
    report(elasticOf(elastic, call).reform(stateOf(state)), out);
  });
}

c10d_status c10d_elastic_join(c10d_elastic* elastic, c10d_checkpoint_state* state,
                              c10d_reformation* out) {
  const char* call = "c10d_elastic_join";
  return guarded([&] {
    checkReport(out, call);
    report(elasticOf(elastic, call).join(stateOf(state)), out);
  });
}

c10d_status c10d_elastic_members(const c10d_elastic* elastic, int* ids, size_t capacity,
                                 size_t* count) {
  const char* call = "c10d_elastic_members";
  return guarded([&] {
    const std::vector<int>& members = elasticOf(elastic, call).members();
    outOf(count, call) = members.size();
    C10D_CHECK(ids != nullptr || capacity == 0, InvalidArgument, call,
               ": ids is NULL but capacity is ", capacity);
    std::copy_n(members.begin(), std::min(capacity, members.size()), ids);
  });
}

int c10d_elastic_id(const c10d_elastic* elastic) {
  return elastic == nullptr ? -1 : elastic->elastic->id();
}

int64_t c10d_elastic_step(const c10d_elastic* elastic) {
  return elastic == nullptr ? -1 : elastic->elastic->step();
}

uint64_t c10d_elastic_generation(const c10d_elastic* elastic) {
  return elastic == nullptr ? 0 : elastic->elastic->generation();
}

int64_t c10d_elastic_incarnation(const c10d_elastic* elastic) {
  return elastic == nullptr ? -1 : elastic->elastic->incarnation();
}

}  // extern "C"
