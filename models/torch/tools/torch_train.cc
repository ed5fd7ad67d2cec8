// fedsched-torch-train: one local training pass of the LibTorch trainer outside a client, for
// comparing it with other trainers (tests/python/test_torch_parity.py) and for exporting its
// initial weights as a model file for ModelConfig.initial_weights_path.
//   fedsched-torch-train --export_initial=init.pb [--seed=1]
//   fedsched-torch-train --weights=in.pb --ids=ids.txt --out=out.pb --losses_out=losses.txt
//       [--batch_size=32 --learning_rate=0.05 --proximal_mu=0]
// --ids holds whitespace-separated indices into the data set of --images / --labels (default:
// the Fashion-MNIST training set, all 60,000 images).
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "models/idx.h"
#include "models/named_model.h"
#include "models/samples.h"
#include "models/torch/torch_trainer.h"

ABSL_FLAG(std::string, export_initial, "", "Write the initial weights to this model file.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initial weights.");
ABSL_FLAG(std::string, weights, "", "Global model file to train from.");
ABSL_FLAG(std::string, ids, "", "File of training-set sample indices, in training order.");
ABSL_FLAG(std::string, out, "", "Trained model file to write.");
ABSL_FLAG(std::string, losses_out, "", "Per-sample losses, one per line (optional).");
ABSL_FLAG(int32_t, batch_size, 32, "Minibatch size.");
ABSL_FLAG(double, learning_rate, 0.05, "SGD learning rate.");
ABSL_FLAG(double, proximal_mu, 0, "FedProx mu.");
ABSL_FLAG(std::string, images, "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "");
ABSL_FLAG(std::string, labels, "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz", "");

namespace fedsched {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "fedsched-torch-train: %s\n", s.ToString().c_str());
  return 1;
}

int Run() {
  absl::StatusOr<std::unique_ptr<TorchTrainer>> trainer = TorchTrainer::Create({});
  if (!trainer.ok()) return Fail(trainer.status());
  if (!absl::GetFlag(FLAGS_export_initial).empty()) {
    const v1::Model initial = (*trainer)->InitialWeights(absl::GetFlag(FLAGS_seed));
    absl::Status s = SaveModelFile(initial, absl::GetFlag(FLAGS_export_initial));
    return s.ok() ? 0 : Fail(s);
  }
  absl::StatusOr<v1::Model> global = LoadModelFile(absl::GetFlag(FLAGS_weights));
  if (!global.ok()) return Fail(global.status());
  absl::StatusOr<ImageDataset> data =
      LoadIdxDataset(absl::GetFlag(FLAGS_images), absl::GetFlag(FLAGS_labels));
  if (!data.ok()) return Fail(data.status());
  std::vector<int64_t> all(data->size);
  std::iota(all.begin(), all.end(), 0);
  absl::StatusOr<std::unique_ptr<InMemorySampleSource>> source =
      InMemorySampleSource::Create(*data, std::move(all));
  if (!source.ok()) return Fail(source.status());
  TrainRequest request;
  request.global = &*global;
  std::ifstream ids(absl::GetFlag(FLAGS_ids));
  for (int64_t id; ids >> id;) request.sample_ids.push_back(id);
  request.batch_size = absl::GetFlag(FLAGS_batch_size);
  request.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  request.proximal_mu = static_cast<float>(absl::GetFlag(FLAGS_proximal_mu));
  absl::StatusOr<TrainResult> result = (*trainer)->Train(request, **source);
  if (!result.ok()) return Fail(result.status());
  if (absl::Status s = SaveModelFile(result->trained, absl::GetFlag(FLAGS_out)); !s.ok()) {
    return Fail(s);
  }
  if (!absl::GetFlag(FLAGS_losses_out).empty()) {
    std::ofstream losses(absl::GetFlag(FLAGS_losses_out));
    for (float l : result->per_sample_losses) losses << l << "\n";
  }
  std::printf("trained %lld examples, mean loss %.6f\n",
              static_cast<long long>(result->num_examples), result->mean_loss);
  return 0;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fedsched::Run();
}
