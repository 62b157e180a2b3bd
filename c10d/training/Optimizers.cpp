// The update rules follow torch.optim's documented algorithms (the "for t = 1 to ..." boxes of
// each optimizer's page), one element at a time, computed in the parameter's own type.

#include "c10d/training/Optimizers.hpp"

#include <cmath>
#include <deque>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

namespace {

// The spec's options over their defaults; unknown names are refused.
class Options {
 public:
  Options(const OptimizerSpec& spec, std::map<std::string, double> defaults)
      : name_(spec.name), values_(std::move(defaults)) {
    for (const auto& [key, value] : spec.options) {
      auto it = values_.find(key);
      if (it == values_.end()) {
        std::string known;
        for (const auto& entry : values_) known += (known.empty() ? "" : ", ") + entry.first;
        C10D_THROW(InvalidArgument, "optimizer '", name_, "': unknown option '", key,
                   "' (options: ", known, ")");
      }
      C10D_CHECK(std::isfinite(value), InvalidArgument, "optimizer '", name_, "': option '", key,
                 "' is ", value);
      it->second = value;
    }
  }
  double get(const std::string& key) const { return values_.at(key); }
  void atLeast(const std::string& key, double minimum) const {
    C10D_CHECK(get(key) >= minimum, InvalidArgument, "optimizer '", name_, "': ", key,
               " must be >= ", minimum, ", got ", get(key));
  }
  void below(const std::string& key, double limit) const {
    C10D_CHECK(get(key) < limit, InvalidArgument, "optimizer '", name_, "': ", key, " must be < ",
               limit, ", got ", get(key));
  }

 private:
  std::string name_;
  std::map<std::string, double> values_;
};

// Per-parameter state: the step count and the optimizer's buffers (same dtype and size as the
// parameter, zero unless the optimizer fills them first).
using ParamState = OptimizerState;

template <typename Derived>
class Optimizer : public FunctionalOptimizer {
 public:
  Optimizer(std::string name, std::vector<std::string> bufferNames)
      : name_(std::move(name)), bufferNames_(std::move(bufferNames)) {}

  void step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    C10D_CHECK(params.size() == grads.size(), InvalidArgument, "optimizer '", name_,
               "': ", params.size(), " parameters but ", grads.size(), " gradients");
    if (states_.size() < params.size()) states_.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      const Tensor& g = grads[i];
      if (!g.defined()) continue;
      C10D_CHECK(p.defined() && p.device().isCPU() && p.isContiguous() &&
                     (p.dtype() == ScalarType::Float32 || p.dtype() == ScalarType::Float64),
                 InvalidArgument, "optimizer '", name_, "': parameter ", i, " is ",
                 p.defined() ? p.describe() : std::string("undefined"),
                 "; it needs a contiguous float32 or float64 CPU tensor");
      C10D_CHECK(g.dtype() == p.dtype() && g.sizes() == p.sizes() && g.device().isCPU() &&
                     g.isContiguous(),
                 InvalidArgument, "optimizer '", name_, "': gradient ", g.describe(),
                 " does not match parameter ", i, " ", p.describe());
      ParamState& state = *stateOf(i, p);
      ++state.step;
      if (p.dtype() == ScalarType::Float32) {
        apply<float>(p, g, state);
      } else {
        apply<double>(p, g, state);
      }
    }
  }

  std::vector<std::string> stateNames() const override { return bufferNames_; }

  OptimizerState* stateOf(size_t index, const Tensor& p) override {
    if (states_.size() <= index) states_.resize(index + 1);
    ParamState& state = states_[index];
    if (state.buffers.empty()) {
      for (size_t b = 0; b < bufferNames_.size(); ++b) {
        state.buffers.push_back(Tensor::zeros(p.sizes(), p.dtype()));
      }
    } else {
      C10D_CHECK(state.buffers[0].sizes() == p.sizes() && state.buffers[0].dtype() == p.dtype(),
                 InvalidArgument, "optimizer '", name_, "': parameter ", index, " is now ",
                 p.describe(), " but its state was made for ", state.buffers[0].describe());
    }
    return &state;
  }

  size_t stateBytes() const override {
    size_t bytes = 0;
    for (const ParamState& state : states_) {
      for (const Tensor& buffer : state.buffers) bytes += buffer.nbytes();
    }
    return bytes;
  }

 private:
  template <typename S>
  void apply(const Tensor& p, const Tensor& g, ParamState& state) {
    std::vector<S*> buffers;
    for (const Tensor& b : state.buffers) buffers.push_back(static_cast<S*>(b.data()));
    static_cast<Derived*>(this)->template update<S>(
        static_cast<S*>(p.data()), static_cast<const S*>(g.data()), buffers, p.numel(), state.step);
  }

  std::string name_;
  std::vector<std::string> bufferNames_;
  std::deque<ParamState> states_;  // a deque: stateOf's pointers stay valid as it grows
};

class Sgd final : public Optimizer<Sgd> {
 public:
  explicit Sgd(const Options& o)
      : Optimizer("sgd", o.get("momentum") != 0 ? std::vector<std::string>{"momentum_buffer"}
                                                : std::vector<std::string>{}),
        lr_(o.get("lr")),
        momentum_(o.get("momentum")),
        dampening_(o.get("dampening")),
        weightDecay_(o.get("weight_decay")),
        nesterov_(o.get("nesterov") != 0) {
    C10D_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0), InvalidArgument,
               "optimizer 'sgd': nesterov needs momentum > 0 and dampening 0");
  }
  template <typename S>
  void update(S* p, const S* g, const std::vector<S*>& buffers, int64_t n, int64_t step) {
    for (int64_t i = 0; i < n; ++i) {
      S d = g[i] + S(weightDecay_) * p[i];
      if (momentum_ != 0) {
        S& b = buffers[0][i];
        b = step == 1 ? d : S(momentum_) * b + S(1 - dampening_) * d;
        d = nesterov_ ? d + S(momentum_) * b : b;
      }
      p[i] -= S(lr_) * d;
    }
  }

 private:
  double lr_, momentum_, dampening_, weightDecay_;
  bool nesterov_;
};

// Adam, and AdamW when decoupled (weight decay applied to the parameter, not the gradient).
class Adam final : public Optimizer<Adam> {
 public:
  Adam(const Options& o, bool decoupled)
      : Optimizer(decoupled ? "adamw" : "adam", {"exp_avg", "exp_avg_sq"}),
        lr_(o.get("lr")),
        beta1_(o.get("beta1")),
        beta2_(o.get("beta2")),
        eps_(o.get("eps")),
        weightDecay_(o.get("weight_decay")),
        decoupled_(decoupled) {}
  template <typename S>
  void update(S* p, const S* g, const std::vector<S*>& buffers, int64_t n, int64_t step) {
    const S correction1 = S(1 - std::pow(beta1_, double(step)));
    const S correction2 = S(1 - std::pow(beta2_, double(step)));
    S* m = buffers[0];
    S* v = buffers[1];
    for (int64_t i = 0; i < n; ++i) {
      S d = g[i];
      if (decoupled_) {
        p[i] *= S(1 - lr_ * weightDecay_);
      } else {
        d += S(weightDecay_) * p[i];
      }
      m[i] = S(beta1_) * m[i] + S(1 - beta1_) * d;
      v[i] = S(beta2_) * v[i] + S(1 - beta2_) * d * d;
      S mHat = m[i] / correction1;
      S vHat = v[i] / correction2;
      p[i] -= S(lr_) * mHat / (std::sqrt(vHat) + S(eps_));
    }
  }

 private:
  double lr_, beta1_, beta2_, eps_, weightDecay_;
  bool decoupled_;
};

class Adagrad final : public Optimizer<Adagrad> {
 public:
  explicit Adagrad(const Options& o)
      : Optimizer("adagrad", {"sum"}),
        lr_(o.get("lr")),
        lrDecay_(o.get("lr_decay")),
        weightDecay_(o.get("weight_decay")),
        initial_(o.get("initial_accumulator_value")),
        eps_(o.get("eps")) {}
  template <typename S>
  void update(S* p, const S* g, const std::vector<S*>& buffers, int64_t n, int64_t step) {
    const S lr = S(lr_ / (1 + double(step - 1) * lrDecay_));
    S* sum = buffers[0];
    for (int64_t i = 0; i < n; ++i) {
      if (step == 1) sum[i] = S(initial_);
      S d = g[i] + S(weightDecay_) * p[i];
      sum[i] += d * d;
      p[i] -= lr * d / (std::sqrt(sum[i]) + S(eps_));
    }
  }

 private:
  double lr_, lrDecay_, weightDecay_, initial_, eps_;
};

class RmsProp final : public Optimizer<RmsProp> {
 public:
  explicit RmsProp(const Options& o)
      : Optimizer("rmsprop", {"square_avg", "grad_avg", "momentum_buffer"}),
        lr_(o.get("lr")),
        alpha_(o.get("alpha")),
        eps_(o.get("eps")),
        weightDecay_(o.get("weight_decay")),
        momentum_(o.get("momentum")),
        centered_(o.get("centered") != 0) {}
  template <typename S>
  void update(S* p, const S* g, const std::vector<S*>& buffers, int64_t n, int64_t) {
    S* square = buffers[0];
    S* average = buffers[1];
    S* momentum = buffers[2];
    for (int64_t i = 0; i < n; ++i) {
      S d = g[i] + S(weightDecay_) * p[i];
      square[i] = S(alpha_) * square[i] + S(1 - alpha_) * d * d;
      S denominator;
      if (centered_) {
        average[i] = S(alpha_) * average[i] + S(1 - alpha_) * d;
        denominator = std::sqrt(square[i] - average[i] * average[i]) + S(eps_);
      } else {
        denominator = std::sqrt(square[i]) + S(eps_);
      }
      if (momentum_ > 0) {
        momentum[i] = S(momentum_) * momentum[i] + d / denominator;
        p[i] -= S(lr_) * momentum[i];
      } else {
        p[i] -= S(lr_) * d / denominator;
      }
    }
  }

 private:
  double lr_, alpha_, eps_, weightDecay_, momentum_;
  bool centered_;
};

}  // namespace

OptimizerSpec OptimizerSpec::sgd(double lr, double momentum, double dampening, double weightDecay,
                                 bool nesterov) {
  return {"sgd",
          {{"lr", lr},
           {"momentum", momentum},
           {"dampening", dampening},
           {"weight_decay", weightDecay},
           {"nesterov", nesterov ? 1.0 : 0.0}}};
}

OptimizerSpec OptimizerSpec::adam(double lr, double beta1, double beta2, double eps,
                                  double weightDecay) {
  return {"adam",
          {{"lr", lr},
           {"beta1", beta1},
           {"beta2", beta2},
           {"eps", eps},
           {"weight_decay", weightDecay}}};
}

OptimizerSpec OptimizerSpec::adamw(double lr, double beta1, double beta2, double eps,
                                   double weightDecay) {
  OptimizerSpec spec = adam(lr, beta1, beta2, eps, weightDecay);
  spec.name = "adamw";
  return spec;
}

OptimizerSpec OptimizerSpec::adagrad(double lr, double lrDecay, double weightDecay,
                                     double initialAccumulatorValue, double eps) {
  return {"adagrad",
          {{"lr", lr},
           {"lr_decay", lrDecay},
           {"weight_decay", weightDecay},
           {"initial_accumulator_value", initialAccumulatorValue},
           {"eps", eps}}};
}

OptimizerSpec OptimizerSpec::rmsprop(double lr, double alpha, double eps, double weightDecay,
                                     double momentum, bool centered) {
  return {"rmsprop",
          {{"lr", lr},
           {"alpha", alpha},
           {"eps", eps},
           {"weight_decay", weightDecay},
           {"momentum", momentum},
           {"centered", centered ? 1.0 : 0.0}}};
}

void addOptimizerState(checkpoint::State& state, FunctionalOptimizer& optimizer, size_t index,
                       const Tensor& param, const std::string& name,
                       const std::vector<int64_t>& globalShape, const checkpoint::Slice& where,
                       int64_t offset) {
  OptimizerState* mine = optimizer.stateOf(index, param);
  C10D_CHECK(mine != nullptr, InvalidArgument,
             "checkpoint: this optimizer does not expose its "
             "state (FunctionalOptimizer::stateOf), so '",
             name, "' cannot be saved");
  const std::vector<std::string> names = optimizer.stateNames();
  const int64_t count = where.numel();
  for (size_t b = 0; b < names.size(); ++b) {
    const Tensor& buffer = mine->buffers.at(b);
    Tensor view =
        Tensor::fromBlob(static_cast<char*>(buffer.data()) + offset * buffer.elementSize(),
                         buffer.dtype(), {count}, buffer.device(), {}, buffer.holder());
    state.addSlice(name + "." + names[b], view, globalShape, where);
  }
  // The step travels as a tensor so that every holder of a slice of the parameter saves (and
  // loads) it like the rest; the hook gives the loaded count back to the optimizer.
  Tensor step = Tensor::zeros({}, ScalarType::Int64);
  *step.data<int64_t>() = mine->step;
  state.add(name + ".step", step);
  state.beforeSave([mine, step] { *step.data<int64_t>() = mine->step; });
  state.onLoad([mine, step](const checkpoint::State&) { mine->step = *step.data<int64_t>(); });
}

std::unique_ptr<FunctionalOptimizer> makeOptimizer(const OptimizerSpec& spec) {
  // Defaults are the OptimizerSpec factories' (torch.optim's); lr has none for SGD there, so it
  // must be given.
  if (spec.name == "sgd") {
    C10D_CHECK(spec.options.count("lr") != 0, InvalidArgument, "optimizer 'sgd' needs an lr");
    Options o(spec, OptimizerSpec::sgd(0).options);
    o.atLeast("lr", 0);
    o.atLeast("momentum", 0);
    o.atLeast("weight_decay", 0);
    return std::make_unique<Sgd>(o);
  }
  if (spec.name == "adam" || spec.name == "adamw") {
    bool decoupled = spec.name == "adamw";
    Options o(spec, (decoupled ? OptimizerSpec::adamw() : OptimizerSpec::adam()).options);
    o.atLeast("lr", 0);
    o.atLeast("eps", 0);
    o.atLeast("beta1", 0);
    o.below("beta1", 1);
    o.atLeast("beta2", 0);
    o.below("beta2", 1);
    o.atLeast("weight_decay", 0);
    return std::make_unique<Adam>(o, decoupled);
  }
  if (spec.name == "adagrad") {
    Options o(spec, OptimizerSpec::adagrad().options);
    o.atLeast("lr", 0);
    o.atLeast("lr_decay", 0);
    o.atLeast("weight_decay", 0);
    o.atLeast("initial_accumulator_value", 0);
    o.atLeast("eps", 0);
    return std::make_unique<Adagrad>(o);
  }
  if (spec.name == "rmsprop") {
    Options o(spec, OptimizerSpec::rmsprop().options);
    o.atLeast("lr", 0);
    o.atLeast("alpha", 0);
    o.atLeast("eps", 0);
    o.atLeast("weight_decay", 0);
    o.atLeast("momentum", 0);
    return std::make_unique<RmsProp>(o);
  }
  C10D_THROW(InvalidArgument, "unknown optimizer '", spec.name,
             "' (optimizers: sgd, adam, adamw, adagrad, rmsprop)");
}

}  // namespace c10d::inline v1
