// The `fedsched` Python module (pybind11): the client SDK for trainers written in Python, e.g.
// with PyTorch (docs/ARCHITECTURE.md "Python and LibTorch trainers"; examples/pytorch_fmnist.py).
//
//   class MyTrainer(fedsched.Trainer):
//       def train(self, weights, sample_ids):  # weights: {name: float32 ndarray}, read-only views
//           ...                                # self.batch_size, self.learning_rate,
//           self.proximal_mu return new_weights, per_sample_losses
//       def evaluate(self, weights):           # optional: client-side evaluation
//           return num_examples, accuracy, mean_loss
//   client = fedsched.Client(config_text, MyTrainer(), num_samples=n)
//   client.run()                               # the GIL is released while the SDK works
//
// A device of several jobs (docs/guides/JOBS.md "Devices and trainers") passes trainers by job name
// or model architecture: fedsched.Client(config_text, None, num_samples=n, trainers={"kbd":
// KbdTrainer(), "mlp": MlpTrainer()}, labels=["keyboard-en"]).
//
// Tensors cross without copies where the layout allows: the global model's tensors reach
// Python as read-only NumPy views of the downloaded model (valid during the call only: copy what
// you keep), sample ids as a read-only view; returned weights are copied once into the update.
// Errors become Python exceptions: ValueError for INVALID_ARGUMENT, RuntimeError otherwise.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"
#include "common/config.h"
#include "models/idx.h"
#include "models/named_model.h"
#include "models/partition.h"
#include "models/samples.h"

namespace py = pybind11;

namespace fedsched {
namespace {

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  if (absl::IsInvalidArgument(status)) throw py::value_error(status.ToString());
  throw std::runtime_error(status.ToString());
}

// A read-only NumPy view of `data` (shape `shape`), kept alive by `owner` (None: the caller
// guarantees the memory outlives the view).
py::array ViewOf(const float* data, const std::vector<py::ssize_t>& shape, py::handle owner) {
  py::array view(py::dtype::of<float>(), shape, {}, data, owner);
  py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return view;
}

std::vector<py::ssize_t> ShapeOf(const v1::Tensor& t) {
  return std::vector<py::ssize_t>(t.shape().begin(), t.shape().end());
}

// {name: read-only view} of `model`'s tensors in the model's order; `owner` keeps them alive.
py::dict ModelViews(const v1::Model& model, py::handle owner) {
  py::dict views;
  for (const v1::Tensor& t : model.tensors()) {
    views[py::str(t.name())] = ViewOf(t.data().data(), ShapeOf(t), owner);
  }
  return views;
}

// Copies `array` (any float-convertible array of `expected`'s shape) into `out`.
absl::Status CopyTensor(const v1::Tensor& expected, py::handle value, v1::Tensor* out) {
  auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(value);
  if (!array) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", expected.name(), "\" is not convertible to a float32 array"));
  }
  const std::vector<py::ssize_t> shape = ShapeOf(expected);
  bool same = array.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t d = 0; same && d < shape.size(); ++d) same = array.shape(d) == shape[d];
  if (!same) {
    std::vector<py::ssize_t> got(array.shape(), array.shape() + array.ndim());
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", expected.name(), "\" came back with shape [",
                     absl::StrJoin(got, ", "), "], expected [", absl::StrJoin(shape, ", "), "]"));
  }
  out->set_name(expected.name());
  *out->mutable_shape() = expected.shape();
  out->mutable_data()->Resize(static_cast<int>(array.size()), 0.0f);
  std::memcpy(out->mutable_data()->mutable_data(), array.data(), array.size() * sizeof(float));
  return absl::OkStatus();
}

// A model with `reference`'s tensors (names, shapes, order) from the dict `weights`.
absl::StatusOr<v1::Model> ModelFromDict(const v1::Model& reference, const py::dict& weights) {
  v1::Model model;
  for (const v1::Tensor& t : reference.tensors()) {
    py::str key(t.name());
    if (!weights.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("missing tensor \"", t.name(), "\""));
    }
    if (absl::Status s = CopyTensor(t, weights[key], model.add_tensors()); !s.ok()) return s;
  }
  if (static_cast<int>(py::len(weights)) != reference.tensors_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "returned ", py::len(weights), " tensors; the model has ", reference.tensors_size()));
  }
  return model;
}

// A model from {name: array} in the dict's order (shapes as given).
v1::Model ModelFromArrays(const py::dict& weights) {
  v1::Model model;
  for (auto [key, value] : weights) {
    auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(value);
    if (!array)
      throw py::value_error(absl::StrCat("tensor \"", std::string(py::str(key)),
                                         "\" is not convertible to a float32 array"));
    v1::Tensor* t = model.add_tensors();
    t->set_name(std::string(py::str(key)));
    for (py::ssize_t d = 0; d < array.ndim(); ++d) t->add_shape(array.shape(d));
    t->mutable_data()->Resize(static_cast<int>(array.size()), 0.0f);
    std::memcpy(t->mutable_data()->mutable_data(), array.data(), array.size() * sizeof(float));
  }
  return model;
}

// Base class of Python trainers (`fedsched.Trainer`); the SDK calls its Python methods.
struct TrainerBase {
  virtual ~TrainerBase() = default;
  // The sample source of the call in progress (null outside train).
  SampleSource* samples = nullptr;
};

// The SDK-side Trainer that calls a Python `fedsched.Trainer` (holding the GIL only then).
class PythonTrainer : public Trainer {
 public:
  explicit PythonTrainer(py::object trainer) : trainer_(std::move(trainer)) {}
  ~PythonTrainer() override {
    py::gil_scoped_acquire gil;
    trainer_ = py::object();
  }

  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    if (request.global == nullptr) return absl::InvalidArgumentError("no global model");
    py::gil_scoped_acquire gil;
    try {
      auto& base = trainer_.cast<TrainerBase&>();
      trainer_.attr("batch_size") = request.batch_size;
      trainer_.attr("learning_rate") = request.learning_rate;
      trainer_.attr("proximal_mu") = request.proximal_mu;
      // Views of memory that lives through this call only (documented in the file comment).
      py::array ids(py::dtype::of<int64_t>(), {static_cast<py::ssize_t>(request.sample_ids.size())},
                    {}, request.sample_ids.data(), py::none());
      py::detail::array_proxy(ids.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
      base.samples = &samples;
      py::object out = trainer_.attr("train")(ModelViews(*request.global, py::none()), ids);
      base.samples = nullptr;
      auto pair = out.cast<py::tuple>();
      if (pair.size() != 2) {
        return absl::InvalidArgumentError("train must return (weights, per_sample_losses)");
      }
      TrainResult result;
      absl::StatusOr<v1::Model> trained = ModelFromDict(*request.global, pair[0].cast<py::dict>());
      if (!trained.ok()) return trained.status();
      result.trained = *std::move(trained);
      auto losses = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(pair[1]);
      if (!losses || losses.size() != static_cast<py::ssize_t>(request.sample_ids.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("train returned per_sample_losses of the wrong size; expected ",
                         request.sample_ids.size()));
      }
      result.per_sample_losses.assign(losses.data(), losses.data() + losses.size());
      double sum = 0;
      for (float l : result.per_sample_losses) sum += l;
      result.num_examples = static_cast<int64_t>(request.sample_ids.size());
      result.mean_loss = result.num_examples > 0 ? sum / result.num_examples : 0.0;
      return result;
    } catch (py::error_already_set& e) {
      trainer_.cast<TrainerBase&>().samples = nullptr;
      return absl::InternalError(absl::StrCat("Python train raised: ", e.what()));
    } catch (const std::exception& e) {
      trainer_.cast<TrainerBase&>().samples = nullptr;
      return absl::InvalidArgumentError(absl::StrCat("Python train: ", e.what()));
    }
  }

  absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) override {
    py::gil_scoped_acquire gil;
    try {
      py::object out = trainer_.attr("evaluate")(ModelViews(global, py::none()));
      if (out.is_none()) return absl::UnimplementedError("evaluate returned None");
      auto triple = out.cast<std::tuple<int64_t, double, double>>();
      return EvalReport{std::get<0>(triple), std::get<1>(triple), std::get<2>(triple)};
    } catch (py::error_already_set& e) {
      return absl::InternalError(absl::StrCat("Python evaluate raised: ", e.what()));
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("Python evaluate: ", e.what()));
    }
  }

 private:
  py::object trainer_;
};

// A SampleSource that only knows how many samples there are (the Python trainer holds them).
class CountOnlySource : public SampleSource {
 public:
  explicit CountOnlySource(int64_t n) : n_(n) {}
  int64_t NumSamples() const override { return n_; }
  absl::StatusOr<std::string_view> Read(int64_t id) override {
    return absl::FailedPreconditionError(
        "this client was created with num_samples only: the trainer holds the samples");
  }

 private:
  int64_t n_;
};

// `fedsched.Client`: one SDK client driven by a Python trainer.
class PyClient {
 public:
  PyClient(const std::string& config_text, py::object trainer, int64_t num_samples,
           std::optional<std::vector<std::string>> samples, int64_t sample_bytes,
           const std::map<std::string, py::object>& trainers,
           const std::vector<std::string>& labels) {
    ClientOptions options;
    AddTrainers(std::move(trainer), trainers, &options);
    options.labels = labels;
    ThrowIfError(ParseTextConfig(config_text, "fedsched.Client config", &options.config));
    if (samples.has_value()) {
      // The importance-aware sample cache (client/cache) picks each round's ids.
      std::string state_dir = options.config.state_dir();
      if (state_dir.empty()) {
        state_dir = absl::StrCat("/tmp/fedsched-py-", options.config.identity());
        options.config.set_state_dir(state_dir);
      }
      absl::StatusOr<std::unique_ptr<CacheDataPlan>> plan =
          CacheDataPlan::Create(state_dir, *samples, options.config.storage_read_delay_us_per_kb(),
                                options.config.disable_cache(), options.config.seed(),
                                options.config.storage_budget_bytes());
      ThrowIfError(plan.status());
      plan_ = *std::move(plan);
      num_samples = static_cast<int64_t>(samples->size());
      if (sample_bytes == 0 && !samples->empty()) sample_bytes = (*samples)[0].size();
    } else {
      if (num_samples <= 0) {
        throw py::value_error("give num_samples > 0 or samples (encoded samples for the cache)");
      }
      source_ = std::make_unique<CountOnlySource>(num_samples);
      plan_ = std::make_unique<UniformDataPlan>(source_.get(), options.config.seed());
    }
    options.data = plan_.get();
    options.device.set_num_samples(num_samples);
    options.device.set_sample_bytes(sample_bytes > 0 ? sample_bytes : 785);
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(options));
    ThrowIfError(client.status());
    client_ = *std::move(client);
  }

  // Participates until the server says the run is finished. Releases the GIL meanwhile. A
  // client runs once (Run leaves it stopped): afterwards the SDK client is destroyed, which
  // closes its connection at once; a server ending its run would otherwise wait seconds for it
  // at shutdown. Stats stay readable. Raises RuntimeError when called again.
  void Run() {
    if (client_ == nullptr) {
      throw std::runtime_error("this fedsched.Client has run already; make a new one");
    }
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = client_->Run();
    }
    // Taken under the GIL, which Stop and Stats hold too, so neither sees a half-destroyed
    // client; destroyed without it (it may wait for its heartbeat thread's last RPC).
    final_stats_ = client_->stats();
    std::unique_ptr<Client> finished = std::move(client_);
    {
      py::gil_scoped_release release;
      finished.reset();
    }
    ThrowIfError(status);
  }
  void Stop() {
    if (client_ != nullptr) client_->Stop();
  }
  py::dict Stats() const {
    const ClientRunStats s = client_ != nullptr ? client_->stats() : final_stats_;
    py::dict d;
    d["tasks_completed"] = s.tasks_completed;
    d["tasks_failed"] = s.tasks_failed;
    d["tasks_interrupted"] = s.tasks_interrupted;
    d["reconnects"] = s.reconnects;
    d["tasks_without_trainer"] = s.tasks_without_trainer;
    // Payload bytes (models down, updates up: compressed ones as sent).
    d["bytes_sent"] = s.bytes_sent;
    d["bytes_received"] = s.bytes_received;
    return d;
  }

 private:
  // Wraps the default `trainer` (None: none) and the named `trainers` into `options`. Raises
  // TypeError for one that is no fedsched.Trainer, ValueError for none at all or an empty name.
  void AddTrainers(py::object trainer, const std::map<std::string, py::object>& trainers,
                   ClientOptions* options) {
    const auto check = [](const py::object& t, const std::string& what) {
      if (!py::isinstance(t, py::type::of<TrainerBase>())) {
        throw py::type_error(what + " must be an instance of a fedsched.Trainer subclass");
      }
    };
    if (!trainer.is_none() || trainers.empty()) {
      check(trainer, "trainer");
      trainer_ = std::make_unique<PythonTrainer>(std::move(trainer));
      options->trainer = trainer_.get();
    }
    for (const auto& [name, t] : trainers) {
      if (name.empty()) throw py::value_error("trainers: a name is empty");
      check(t, absl::StrCat("trainers[\"", name, "\"]"));
      job_trainers_.push_back(std::make_unique<PythonTrainer>(t));
      options->trainers[name].trainer = job_trainers_.back().get();
    }
  }

  std::unique_ptr<SampleSource> source_;
  std::unique_ptr<LocalDataPlan> plan_;
  // The default trainer (null when only named ones were given) and the trainers per job.
  std::unique_ptr<PythonTrainer> trainer_;
  std::vector<std::unique_ptr<PythonTrainer>> job_trainers_;
  std::unique_ptr<Client> client_;  // null once Run has returned
  ClientRunStats final_stats_;      // the stats when Run returned
};

// {name: array} of a model file; the arrays view one heap model that the last of them frees.
py::dict LoadModel(const std::string& path) {
  absl::StatusOr<v1::Model> model = LoadModelFile(path);
  ThrowIfError(model.status());
  auto* owned = new v1::Model(*std::move(model));
  py::capsule owner(owned, [](void* p) { delete static_cast<v1::Model*>(p); });
  py::dict views = ModelViews(*owned, owner);
  for (auto item : views) {
    py::detail::array_proxy(item.second.ptr())->flags |= py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  }
  return views;
}

// (pixels float32 [n, 784] in [0, 1], labels uint8 [n]) of partition `index` of `num_partitions`
// of the IDX data set, exactly as fedsched-client partitions it (models/partition.h).
py::tuple LoadPartition(int index, int num_partitions, double alpha, int min_samples, uint64_t seed,
                        const std::string& images, const std::string& labels) {
  absl::StatusOr<ImageDataset> all = [&] {
    py::gil_scoped_release release;
    return LoadIdxDataset(images, labels);
  }();
  ThrowIfError(all.status());
  if (index < 0 || index >= num_partitions) {
    throw py::value_error(
        absl::StrCat("partition index ", index, " outside [0, ", num_partitions, ")"));
  }
  std::vector<int64_t> ids;
  if (num_partitions == 1) {
    for (int64_t i = 0; i < all->size; ++i) ids.push_back(i);
  } else {
    absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
        DirichletPartition(all->labels, num_partitions, alpha, min_samples, seed);
    ThrowIfError(parts.status());
    ids = std::move((*parts)[index]);
  }
  const int pixels = all->pixels_per_image();
  py::array_t<float> x({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(pixels)});
  py::array_t<uint8_t> y(static_cast<py::ssize_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(x.mutable_data(i, 0), all->pixels.data() + ids[i] * pixels, pixels * sizeof(float));
    *y.mutable_data(i) = all->labels[ids[i]];
  }
  return py::make_tuple(x, y);
}

}  // namespace
}  // namespace fedsched

PYBIND11_MODULE(fedsched, m) {
  using namespace fedsched;
  m.doc() = "fedsched client SDK: federated training with a trainer written in Python";
  m.attr("__version__") = FEDSCHED_MODULE_VERSION;

  py::class_<TrainerBase>(m, "Trainer", py::dynamic_attr(), R"doc(
Base class of Python trainers. Implement train(weights, sample_ids) -> (weights, losses):
weights is {name: read-only float32 ndarray} of the global model (views valid during the call;
copy what you keep), sample_ids an int64 ndarray of local sample ids in training order (minibatch
b is ids[b*batch_size:(b+1)*batch_size]); return {name: float32 array of the same shape} and the
per-sample losses (float32, one per id, from the forward pass before each step). The SDK sets
self.batch_size, self.learning_rate and self.proximal_mu from the task before each call.
Optionally implement evaluate(weights) -> (num_examples, accuracy, mean_loss) on a local eval
split for client-side evaluation (EvalConfig.mode CLIENT); the default returns None.)doc")
      .def(py::init<>())
      .def("train",
           [](TrainerBase&, py::object, py::object) -> py::object {
             throw py::type_error("fedsched.Trainer subclasses must implement train");
           })
      .def("evaluate", [](TrainerBase&, py::object) { return py::none(); })
      .def(
          "read_sample",
          [](TrainerBase& self, int64_t id) {
            if (self.samples == nullptr) {
              throw std::runtime_error("read_sample works only inside train");
            }
            absl::StatusOr<std::string_view> bytes = self.samples->Read(id);
            ThrowIfError(bytes.status());
            return py::bytes(bytes->data(), bytes->size());
          },
          "Encoded bytes of local sample `id` through the sample cache (inside train only; "
          "clients created with samples=...).");

  py::class_<PyClient>(m, "Client", R"doc(
A federated-learning client (fedsched::Client). config: ClientConfig in protobuf text format
(proto/fedsched/v1/config.proto; unknown keys are errors), e.g. 'server_address: "127.0.0.1:50051"
identity: "py-0"'. trainer: a fedsched.Trainer. Either num_samples (the trainer holds the data;
each round draws a shuffled epoch) or samples: encoded samples (fedsched.encode_sample) for the
importance-aware sample cache under config.state_dir, which then picks each round's ids.
trainers: {job name or model architecture: fedsched.Trainer} for a device of several jobs
(docs/guides/JOBS.md "Devices and trainers"): the server offers the device only the jobs they name; a
task goes to the trainer of its job, else of its model architecture; a task of a job none names
is reported to the server as failed ("no trainer for job X") and never trained (counted in
stats()["tasks_without_trainer"]); each job keeps its own sample-cache state. With trainers,
trainer may be None (it then trains only tasks that name no job, from a server without jobs).
labels: strings the device declares for jobs' populations (JobPopulation.required_labels).
Raises ValueError for a bad config or an empty name or label; TypeError for a missing trainer
(None without trainers) or one that is no fedsched.Trainer.)doc")
      .def(py::init<const std::string&, py::object, int64_t,
                    std::optional<std::vector<std::string>>, int64_t,
                    const std::map<std::string, py::object>&, const std::vector<std::string>&>(),
           py::arg("config"), py::arg("trainer"), py::arg("num_samples") = 0,
           py::arg("samples") = py::none(), py::arg("sample_bytes") = 0,
           py::arg("trainers") = std::map<std::string, py::object>(),
           py::arg("labels") = std::vector<std::string>())
      .def("run", &PyClient::Run,
           "Trains until the server says the run is finished (GIL released meanwhile), then "
           "closes the connection; a client runs once (RuntimeError the second time).")
      .def("stop", &PyClient::Stop, "Asks run() to return soon (any thread).")
      .def("stats", &PyClient::Stats);

  m.def(
      "save_model",
      [](const py::dict& weights, const std::string& path) {
        const v1::Model model = ModelFromArrays(weights);
        ThrowIfError(ValidateNamedTensors(model));
        ThrowIfError(SaveModelFile(model, path));
      },
      py::arg("weights"), py::arg("path"),
      "Writes {name: array} as a model file (a serialized fedsched.v1.Model, "
      "models/named_model.h), e.g. the initial weights for model.initial_weights_path.");
  m.def("load_model", &LoadModel, py::arg("path"),
        "Reads a model file: {name: float32 ndarray} in the file's order.");
  m.def("load_partition", &LoadPartition, py::arg("index"), py::arg("num_partitions"),
        py::arg("alpha") = 0.5, py::arg("min_samples") = 10, py::arg("seed") = 42,
        py::arg("images") = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
        py::arg("labels") = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
        "(pixels float32 [n, 784] in [0, 1], labels uint8 [n]) of one Dirichlet partition, as "
        "fedsched-client makes it (num_partitions=1: the whole set, e.g. the t10k test set).");
  m.def(
      "dirichlet_partition",
      [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> labels, int num_partitions,
         double alpha, int min_samples, uint64_t seed) {
        absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
            DirichletPartition(absl::MakeConstSpan(labels.data(), labels.size()), num_partitions,
                               alpha, min_samples, seed);
        ThrowIfError(parts.status());
        py::list out;
        for (const std::vector<int64_t>& p : *parts) {
          out.append(py::array_t<int64_t>(static_cast<py::ssize_t>(p.size()), p.data()));
        }
        return out;
      },
      py::arg("labels"), py::arg("num_partitions"), py::arg("alpha") = 0.5,
      py::arg("min_samples") = 10, py::arg("seed") = 42,
      "[num_partitions] int64 arrays of sample indices: the Dirichlet label-skew partition "
      "fedsched-client uses (models/partition.h); load_partition(i, n) is x[parts[i]].");
  m.def(
      "encode_sample",
      [](py::array_t<float, py::array::c_style | py::array::forcecast> pixels, int label) {
        ImageDataset one;
        one.size = 1;
        one.rows = 1;
        one.cols = static_cast<int>(pixels.size());
        one.pixels.assign(pixels.data(), pixels.data() + pixels.size());
        one.labels = {static_cast<uint8_t>(label)};
        return py::bytes(EncodeSample(one, 0));
      },
      py::arg("pixels"), py::arg("label"),
      "Encoded bytes of one sample (models/samples.h) for Client(samples=...).");
}
