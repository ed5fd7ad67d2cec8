// The C API over fedsched::Client (client/c/fedsched_c.h). Every entry point catches whatever
// C++ might throw (std::bad_alloc from a container) and turns it into INTERNAL, so no exception
// unwinds into C, JNI or Swift frames, where it would be undefined behaviour.
#include "client/c/fedsched_c.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/cache_data_plan.h"
#include "client/sdk/client.h"
#include "client/sdk/state_dir.h"
#include "common/config.h"

struct fedsched_sample_reader {
  fedsched::SampleSource* source;
};

namespace fedsched {
namespace {

fedsched_code Report(const absl::Status& status, fedsched_error* error) {
  const auto code = static_cast<fedsched_code>(status.code());
  if (error != nullptr) {
    error->code = code;
    const std::string text(status.message());
    const size_t n = std::min(text.size(), sizeof(error->message) - 1);
    std::memcpy(error->message, text.data(), n);
    error->message[n] = '\0';
  }
  return code;
}

// A message the app's callback wrote, or a default naming the callback and its code.
std::string CallbackMessage(const fedsched_error& error, fedsched_code code, const char* what) {
  const size_t n = strnlen(error.message, sizeof(error.message));
  if (n > 0) return std::string(error.message, n);
  return absl::StrCat(what, " returned code ", static_cast<int>(code));
}

// Views of `model`'s tensors as fedsched_tensor (data writable; names and shapes borrowed).
std::vector<fedsched_tensor> TensorViews(v1::Model& model) {
  std::vector<fedsched_tensor> views;
  views.reserve(model.tensors_size());
  for (v1::Tensor& t : *model.mutable_tensors()) {
    views.push_back(fedsched_tensor{t.name().c_str(), t.shape().data(), t.shape_size(),
                                    t.mutable_data()->mutable_data(), t.data_size()});
  }
  return views;
}

// Adapts the app's C train callback to the SDK's Trainer interface (models/trainer.h).
class CTrainer : public Trainer {
 public:
  CTrainer(fedsched_train_fn train, void* context) : train_(train), context_(context) {}

  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    // The callback sees the global weights through a private copy, so a trainer that writes to
    // `global` despite the const cannot corrupt the SDK's model.
    v1::Model global = *request.global;
    TrainResult result;
    result.trained = global;
    result.per_sample_losses.assign(request.sample_ids.size(), 0.0f);
    std::vector<fedsched_tensor> global_views = TensorViews(global);
    std::vector<fedsched_tensor> trained_views = TensorViews(result.trained);
    fedsched_train_request c_request{global_views.data(),
                                     trained_views.data(),
                                     static_cast<int32_t>(trained_views.size()),
                                     request.sample_ids.data(),
                                     static_cast<int64_t>(request.sample_ids.size()),
                                     request.batch_size,
                                     request.learning_rate,
                                     request.proximal_mu,
                                     result.per_sample_losses.data()};
    fedsched_sample_reader reader{&samples};
    fedsched_train_result c_result{0, 0.0};
    fedsched_error error{};
    const fedsched_code code = train_(context_, &c_request, &reader, &c_result, &error);
    if (code != FEDSCHED_OK) {
      return absl::Status(static_cast<absl::StatusCode>(code),
                          CallbackMessage(error, code, "the train callback"));
    }
    if (c_result.num_examples < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the train callback reported num_examples ", c_result.num_examples));
    }
    result.num_examples = c_result.num_examples;
    result.mean_loss = c_result.mean_loss;
    return result;
  }

 private:
  const fedsched_train_fn train_;
  void* const context_;
};

// Reads every sample of the app through its callbacks (called only at creation).
absl::StatusOr<std::vector<std::string>> ReadAppSamples(const fedsched_client_options& options) {
  const int64_t n = options.num_samples(options.context);
  if (n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_samples returned ", n, "; a client needs at least one local sample"));
  }
  std::vector<std::string> samples;
  samples.reserve(n);
  for (int64_t id = 0; id < n; ++id) {
    const uint8_t* data = nullptr;
    size_t size = 0;
    const fedsched_code code = options.read_sample(options.context, id, &data, &size);
    if (code != FEDSCHED_OK) {
      return absl::Status(static_cast<absl::StatusCode>(code),
                          absl::StrCat("read_sample failed for sample ", id, " of ", n));
    }
    if (data == nullptr && size > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("read_sample gave a NULL pointer for sample ", id));
    }
    samples.emplace_back(reinterpret_cast<const char*>(data), size);
  }
  return samples;
}

// Errors: INVALID_ARGUMENT naming the first bad entry of trainers or labels.
absl::Status CheckJobOptions(const fedsched_client_options& options) {
  if (options.num_trainers < 0 || options.num_labels < 0) {
    return absl::InvalidArgumentError("options.num_trainers and options.num_labels must be >= 0");
  }
  if ((options.num_trainers > 0 && options.trainers == nullptr) ||
      (options.num_labels > 0 && options.labels == nullptr)) {
    return absl::InvalidArgumentError("options.trainers or options.labels is NULL with a count");
  }
  for (int32_t i = 0; i < options.num_trainers; ++i) {
    const fedsched_job_trainer& t = options.trainers[i];
    if (t.name == nullptr || t.name[0] == '\0' || t.train == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.trainers[", i, "] needs a non-empty name and a train callback"));
    }
    for (int32_t j = 0; j < i; ++j) {
      if (std::strcmp(options.trainers[j].name, t.name) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("options.trainers[", i, "]: the name \"", t.name, "\" is given twice"));
      }
    }
  }
  for (int32_t i = 0; i < options.num_labels; ++i) {
    if (options.labels[i] == nullptr || options.labels[i][0] == '\0') {
      return absl::InvalidArgumentError(absl::StrCat("options.labels[", i, "] is NULL or empty"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const fedsched_client_options* options, fedsched_client** out) {
  if (out == nullptr) return absl::InvalidArgumentError("out is NULL");
  if (options == nullptr) return absl::InvalidArgumentError("options is NULL");
  if (options->config_textproto == nullptr) {
    return absl::InvalidArgumentError("options.config_textproto is NULL");
  }
  if (options->train == nullptr && options->num_trainers <= 0) {
    return absl::InvalidArgumentError("options.train is NULL and there are no options.trainers");
  }
  if (options->num_samples == nullptr || options->read_sample == nullptr) {
    return absl::InvalidArgumentError("options.num_samples and options.read_sample are required");
  }
  if (options->sample_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.sample_bytes is negative: ", options->sample_bytes));
  }
  return CheckJobOptions(*options);
}

}  // namespace
}  // namespace fedsched

struct fedsched_client {
  // Declaration order is destruction order in reverse: the client goes first, the lock last.
  std::unique_ptr<fedsched::StateDirLock> lock;
  std::unique_ptr<fedsched::CacheDataPlan> plan;
  // The default trainer (null without options.train) and the trainers per job.
  std::unique_ptr<fedsched::CTrainer> trainer;
  std::vector<std::unique_ptr<fedsched::CTrainer>> job_trainers;
  std::unique_ptr<fedsched::Client> client;
};

namespace fedsched {
namespace {

absl::StatusOr<std::unique_ptr<fedsched_client>> Create(const fedsched_client_options& options) {
  v1::ClientConfig config;
  if (absl::Status s = ParseTextConfig(options.config_textproto, "config_textproto", &config);
      !s.ok()) {
    return s;
  }
  if (config.state_dir().empty()) {
    return absl::InvalidArgumentError(
        "config_textproto: state_dir is required (the sample store, cache state and credential "
        "live there)");
  }
  auto handle = std::make_unique<fedsched_client>();
  if (absl::Status s = MakePrivateDir(config.state_dir()); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<StateDirLock>> lock = StateDirLock::Acquire(config.state_dir());
  if (!lock.ok()) return lock.status();
  handle->lock = *std::move(lock);
  absl::StatusOr<std::vector<std::string>> samples = ReadAppSamples(options);
  if (!samples.ok()) return samples.status();
  absl::StatusOr<std::unique_ptr<CacheDataPlan>> plan =
      CacheDataPlan::Create(config.state_dir(), *samples, config.storage_read_delay_us_per_kb(),
                            config.disable_cache(), config.seed(), config.storage_budget_bytes());
  if (!plan.ok()) return plan.status();
  handle->plan = *std::move(plan);
  ClientOptions client_options;
  if (options.train != nullptr) {
    handle->trainer = std::make_unique<CTrainer>(options.train, options.context);
    client_options.trainer = handle->trainer.get();
  }
  for (int32_t i = 0; i < options.num_trainers; ++i) {
    const fedsched_job_trainer& t = options.trainers[i];
    handle->job_trainers.push_back(
        std::make_unique<CTrainer>(t.train, t.context != nullptr ? t.context : options.context));
    client_options.trainers[t.name].trainer = handle->job_trainers.back().get();
  }
  for (int32_t i = 0; i < options.num_labels; ++i) {
    client_options.labels.emplace_back(options.labels[i]);
  }
  client_options.config = config;
  client_options.data = handle->plan.get();
  client_options.device.set_sample_bytes(options.sample_bytes);
  if (options.eligible != nullptr) {
    client_options.eligible = [fn = options.eligible, context = options.context] {
      return fn(context) != 0;
    };
  }
  client_options.device.set_storage_budget_bytes(config.storage_budget_bytes());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(std::move(client_options));
  if (!client.ok()) return client.status();
  handle->client = *std::move(client);
  return handle;
}

}  // namespace
}  // namespace fedsched

extern "C" {

fedsched_code fedsched_sample_read(fedsched_sample_reader* reader, int64_t id, const uint8_t** data,
                                   size_t* size, fedsched_error* error) {
  try {
    if (reader == nullptr || data == nullptr || size == nullptr) {
      return fedsched::Report(absl::InvalidArgumentError("reader, data and size are required"),
                              error);
    }
    absl::StatusOr<std::string_view> bytes = reader->source->Read(id);
    if (!bytes.ok()) return fedsched::Report(bytes.status(), error);
    *data = reinterpret_cast<const uint8_t*>(bytes->data());
    *size = bytes->size();
    return FEDSCHED_OK;
  } catch (...) {
    return fedsched::Report(absl::InternalError("fedsched_sample_read: C++ exception"), error);
  }
}

fedsched_code fedsched_client_create(const fedsched_client_options* options, fedsched_client** out,
                                     fedsched_error* error) {
  try {
    if (absl::Status s = fedsched::CheckOptions(options, out); !s.ok()) {
      return fedsched::Report(s, error);
    }
    *out = nullptr;
    absl::StatusOr<std::unique_ptr<fedsched_client>> handle = fedsched::Create(*options);
    if (!handle.ok()) return fedsched::Report(handle.status(), error);
    *out = handle->release();
    return FEDSCHED_OK;
  } catch (...) {
    return fedsched::Report(absl::InternalError("fedsched_client_create: C++ exception"), error);
  }
}

fedsched_code fedsched_client_run(fedsched_client* client, fedsched_error* error) {
  try {
    if (client == nullptr) {
      return fedsched::Report(absl::InvalidArgumentError("client is NULL"), error);
    }
    return fedsched::Report(client->client->Run(), error);
  } catch (...) {
    return fedsched::Report(absl::InternalError("fedsched_client_run: C++ exception"), error);
  }
}

void fedsched_client_stop(fedsched_client* client) {
  if (client != nullptr) client->client->Stop();
}

fedsched_client_stats fedsched_client_get_stats(const fedsched_client* client) {
  if (client == nullptr) return fedsched_client_stats{0, 0, 0, 0, 0, 0};
  const fedsched::ClientRunStats s = client->client->stats();
  return fedsched_client_stats{s.tasks_completed,   s.tasks_failed,  s.reconnects,
                               s.tasks_interrupted, s.tasks_refused, s.tasks_without_trainer};
}

void fedsched_client_destroy(fedsched_client* client) {
  try {
    delete client;
  } catch (...) {
    // A destructor that throws has nothing left to report to; the handle is gone either way.
  }
}

}  // extern "C"
