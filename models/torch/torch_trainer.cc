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

constexpr int64_t kEvalBatch = 1024;

// models/cnn.h's name of each LeNet parameter (TorchTrainerOptions.reference_layout);
// `transposed` for the Linear weights, which models/cnn.h stores [in, out] and
// torch::nn::Linear [out, in].
struct ReferenceName {
  const char* torch;
  const char* reference;
  bool transposed;
};
constexpr ReferenceName kReferenceNames[] = {
    {"conv1.weight", "conv1/kernel", false}, {"conv1.bias", "conv1/bias", false},
    {"conv2.weight", "conv2/kernel", false}, {"conv2.bias", "conv2/bias", false},
    {"fc1.weight", "fc1/kernel", true},      {"fc1.bias", "fc1/bias", false},
    {"fc2.weight", "fc2/kernel", true},      {"fc2.bias", "fc2/bias", false}};

std::vector<int64_t> Shape(const v1::Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

}  // namespace

struct TorchTrainer::Impl {
  // A parameter of the network (a view of net's tensor) under its model-side name.
  struct Slot {
    torch::Tensor param;
    bool transposed = false;  // the model's tensor is param's transpose
  };

  bool reference_layout = false;
  LeNet net;
  std::unordered_map<std::string, Slot> params;
  std::vector<std::string> order;  // model-side names in the network's parameter order

  explicit Impl(bool reference) : reference_layout(reference) { Index(); }

  // Fills params and order from net's parameters.
  void Index() {
    params.clear();
    order.clear();
    for (const auto& item : net->named_parameters()) {
      Slot slot{item.value(), false};
      std::string name = item.key();
      if (reference_layout) {
        for (const ReferenceName& r : kReferenceNames) {
          if (name == r.torch) {
            name = r.reference;
            slot.transposed = r.transposed;
          }
        }
      }
      params.emplace(name, slot);
      order.push_back(name);
    }
  }

  // The shape of `slot` as the model stores it.
  static std::vector<int64_t> ModelShape(const Slot& slot) {
    std::vector<int64_t> shape = slot.param.sizes().vec();
    if (slot.transposed) std::reverse(shape.begin(), shape.end());
    return shape;
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
      const std::vector<int64_t> expected = ModelShape(it->second);
      if (expected != shape || t.data_size() != it->second.param.numel()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name(), "\" has shape [",
                                                       absl::StrJoin(shape, ", "), "], expected [",
                                                       absl::StrJoin(expected, ", "), "]"));
      }
      const torch::Tensor blob = torch::from_blob(const_cast<float*>(t.data().data()), shape);
      it->second.param.copy_(it->second.transposed ? blob.t() : blob);
    }
    return absl::OkStatus();
  }

  // The parameters as a model in `names`' order.
  template <typename Names, typename NameOf>
  v1::Model Export(const Names& names, NameOf name_of) const {
    v1::Model out;
    for (const auto& item : names) {
      const std::string& name = name_of(item);
      const Slot& slot = params.at(name);
      const torch::Tensor p = (slot.transposed ? slot.param.t() : slot.param).contiguous();
      v1::Tensor* o = out.add_tensors();
      o->set_name(name);
      for (int64_t d : p.sizes()) o->add_shape(d);
      o->mutable_data()->Add(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
    }
    return out;
  }
  // The parameters in `model`'s tensor order.
  v1::Model ExportLike(const v1::Model& model) const {
    return Export(model.tensors(),
                  [](const v1::Tensor& t) -> const std::string& { return t.name(); });
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
  return std::unique_ptr<TorchTrainer>(
      new TorchTrainer(std::make_unique<Impl>(options.reference_layout)));
}

v1::Model TorchTrainer::InitialWeights(uint64_t seed) {
  torch::manual_seed(seed);
  impl_->net = LeNet();
  impl_->Index();
  return impl_->Export(impl_->order,
                       [](const std::string& name) -> const std::string& { return name; });
}

absl::StatusOr<EvalReport> TorchTrainer::Evaluate(const v1::Model& global) {
  if (eval_split_ == nullptr) return absl::UnimplementedError("no local eval split");
  const ImageDataset& d = *eval_split_;
  if (d.pixels_per_image() != kPixels || d.size <= 0 ||
      d.pixels.size() != static_cast<size_t>(d.size * kPixels) ||
      d.labels.size() != static_cast<size_t>(d.size)) {
    return absl::InvalidArgumentError(absl::StrCat("eval split: ", d.size, " images of ", d.rows,
                                                   " x ", d.cols, " pixels with ", d.labels.size(),
                                                   " labels; the torch cnn takes 28 x 28 images"));
  }
  if (absl::Status s = impl_->Load(global); !s.ok()) return s;
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  double loss_sum = 0;
  std::vector<int64_t> labels;
  for (int64_t start = 0; start < d.size; start += kEvalBatch) {
    const int64_t rows = std::min<int64_t>(kEvalBatch, d.size - start);
    const torch::Tensor x =
        torch::from_blob(const_cast<float*>(d.pixels.data()) + start * kPixels, {rows, kPixels});
    labels.assign(d.labels.begin() + start, d.labels.begin() + start + rows);
    const torch::Tensor y = torch::from_blob(labels.data(), {rows}, torch::kInt64);
    const torch::Tensor logits = impl_->net->forward(x);
    loss_sum +=
        torch::nn::functional::cross_entropy(
            logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  EvalReport report;
  report.num_examples = d.size;
  report.accuracy = static_cast<double>(correct) / static_cast<double>(d.size);
  report.mean_loss = loss_sum / static_cast<double>(d.size);
  return report;
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
    for (auto& [name, slot] : impl_->params) {
      anchored.emplace_back(slot.param, slot.param.detach().clone());
    }
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
      for (auto& [name, slot] : impl_->params) {
        slot.param.sub_(request.learning_rate * slot.param.grad());
      }
    } else {
      for (auto& [p, g] : anchored) {
        p.sub_(request.learning_rate * (p.grad() + request.proximal_mu * (p - g)));
      }
    }
  }
  result.trained = impl_->ExportLike(*request.global);
  result.num_examples = n;
  result.mean_loss = loss_sum / static_cast<double>(n);
  return result;
}

}  // namespace fedsched
