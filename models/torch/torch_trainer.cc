#include "models/torch/torch_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/samples.h"

namespace fedsched {
namespace {

constexpr int kPixels = 784;

// The network of the header comment (examples/pytorch_fmnist.py's LeNet).
struct LeNetImpl : torch::nn::Module {
  LeNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(256, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x.view({-1, 1, 28, 28}))), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    return fc2(torch::relu(fc1(x.flatten(1))));
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(LeNet);

std::vector<int64_t> Shape(const v1::Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

}  // namespace

struct TorchTrainer::Impl {
  LeNet net;
  // The network's parameters by name (views of net's tensors).
  std::unordered_map<std::string, torch::Tensor> params;

  Impl() {
    for (const auto& item : net->named_parameters()) params.emplace(item.key(), item.value());
  }

  // Copies `global` into the parameters. Errors: INVALID_ARGUMENT naming a bad tensor.
  absl::Status Load(const v1::Model& global) {
    if (global.tensors_size() != static_cast<int>(params.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model has ", global.tensors_size(), " tensors; the torch cnn has ", params.size()));
    }
    torch::NoGradGuard no_grad;
    for (const v1::Tensor& t : global.tensors()) {
      auto it = params.find(t.name());
      if (it == params.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor \"", t.name(), "\" is not a parameter of the torch cnn"));
      }
      const std::vector<int64_t> shape = Shape(t);
      if (it->second.sizes().vec() != shape || t.data_size() != it->second.numel()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor \"", t.name(), "\" has shape [", absl::StrJoin(shape, ", "),
                         "], expected [", absl::StrJoin(it->second.sizes().vec(), ", "), "]"));
      }
      it->second.copy_(torch::from_blob(const_cast<float*>(t.data().data()), shape));
    }
    return absl::OkStatus();
  }

  // The parameters as a model in `order`'s tensor order.
  v1::Model Export(const v1::Model& order) const {
    v1::Model out;
    for (const v1::Tensor& t : order.tensors()) {
      const torch::Tensor p = params.at(t.name()).contiguous();
      v1::Tensor* o = out.add_tensors();
      o->set_name(t.name());
      *o->mutable_shape() = t.shape();
      o->mutable_data()->Add(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
    }
    return out;
  }
};

TorchTrainer::TorchTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchTrainer::~TorchTrainer() = default;

absl::StatusOr<std::unique_ptr<TorchTrainer>> TorchTrainer::Create(
    const TorchTrainerOptions& options) {
  if (options.model != "cnn") {
    return absl::InvalidArgumentError(
        absl::StrCat("torch trainer model \"", options.model, "\" is unknown; use \"cnn\""));
  }
  if (options.threads > 0) torch::set_num_threads(options.threads);
  return std::unique_ptr<TorchTrainer>(new TorchTrainer(std::make_unique<Impl>()));
}

v1::Model TorchTrainer::InitialWeights(uint64_t seed) {
  torch::manual_seed(seed);
  impl_->net = LeNet();
  impl_->params.clear();
  for (const auto& item : impl_->net->named_parameters()) {
    impl_->params.emplace(item.key(), item.value());
  }
  v1::Model order;
  for (const auto& item : impl_->net->named_parameters()) {
    v1::Tensor* t = order.add_tensors();
    t->set_name(item.key());
    for (int64_t d : item.value().sizes()) t->add_shape(d);
  }
  return impl_->Export(order);
}

absl::StatusOr<TrainResult> TorchTrainer::Train(const TrainRequest& request,
                                                SampleSource& samples) {
  if (request.global == nullptr) return absl::InvalidArgumentError("no global model");
  if (request.sample_ids.empty()) return absl::InvalidArgumentError("no sample ids");
  if (request.batch_size <= 0 || !(request.learning_rate > 0) ||
      !std::isfinite(request.learning_rate) || !(request.proximal_mu >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad hyper-parameters: batch_size ", request.batch_size, ", learning_rate ",
                     request.learning_rate, ", proximal_mu ", request.proximal_mu));
  }
  if (absl::Status s = impl_->Load(*request.global); !s.ok()) return s;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> anchored;  // (param, global copy)
  if (request.proximal_mu > 0) {
    for (auto& [name, p] : impl_->params) anchored.emplace_back(p, p.detach().clone());
  }
  const auto n = static_cast<int64_t>(request.sample_ids.size());
  TrainResult result;
  result.per_sample_losses.resize(n);
  double loss_sum = 0;
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  for (int64_t start = 0; start < n; start += request.batch_size) {
    const int64_t rows = std::min<int64_t>(request.batch_size, n - start);
    pixels.resize(rows * kPixels);
    labels.resize(rows);
    for (int64_t r = 0; r < rows; ++r) {
      absl::StatusOr<std::string_view> bytes = samples.Read(request.sample_ids[start + r]);
      if (!bytes.ok()) return bytes.status();
      int label = 0;
      if (absl::Status s = DecodeSample(*bytes, kPixels, &pixels[r * kPixels], &label); !s.ok()) {
        return s;
      }
      labels[r] = label;
    }
    const torch::Tensor x = torch::from_blob(pixels.data(), {rows, kPixels});
    const torch::Tensor y = torch::from_blob(labels.data(), {rows}, torch::kInt64);
    const torch::Tensor losses = torch::nn::functional::cross_entropy(
        impl_->net->forward(x), y,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    const torch::Tensor mean = losses.mean();
    if (!std::isfinite(mean.item<float>())) {
      return absl::InvalidArgumentError(
          absl::StrCat("training diverged: non-finite loss at step ", start / request.batch_size));
    }
    std::memcpy(&result.per_sample_losses[start], losses.detach().contiguous().data_ptr<float>(),
                rows * sizeof(float));
    loss_sum += mean.item<double>() * static_cast<double>(rows);
    impl_->net->zero_grad();
    mean.backward();
    torch::NoGradGuard no_grad;
    if (anchored.empty()) {
      for (auto& [name, p] : impl_->params) p.sub_(request.learning_rate * p.grad());
    } else {
      for (auto& [p, g] : anchored) {
        p.sub_(request.learning_rate * (p.grad() + request.proximal_mu * (p - g)));
      }
    }
  }
  result.trained = impl_->Export(*request.global);
  result.num_examples = n;
  result.mean_loss = loss_sum / static_cast<double>(n);
  return result;
}

}  // namespace fedsched
