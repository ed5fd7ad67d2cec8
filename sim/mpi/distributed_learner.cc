#include "sim/mpi/distributed_learner.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched::sim::mpi {
namespace {

absl::Status FromRank(int rank, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("rank ", rank, ": ", s.message()));
}

absl::StatusOr<std::string> ReceiveReply(Transport& transport, int from) {
  FEDSCHED_ASSIGN_OR_RETURN(Transport::Message m, transport.Receive(from));
  if (m.tag != kReply) {
    return absl::InternalError(absl::StrCat("rank ", from, " sent message tag ", m.tag,
                                            " where a reply (", kReply, ") was due"));
  }
  return std::move(m.bytes);
}

// A worker's work for one kTrain message: the prefetches, then the training.
absl::StatusOr<std::vector<TrainedTask>> TrainOnWorker(TrainingLearner* learner,
                                                       const std::string& bytes) {
  if (learner == nullptr) return absl::FailedPreconditionError("training requested before setup");
  FEDSCHED_ASSIGN_OR_RETURN(TrainCommand command, DecodeTrainCommand(bytes));
  v1::Model global;
  if (!global.ParseFromString(command.global)) {
    return absl::DataLossError("sim mpi message: malformed global model");
  }
  for (const PrefetchHint& p : command.prefetches) {
    if (absl::Status s = learner->Prefetch(p.client, p.plan); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("prefetch for client ", p.client, ": ", s.message()));
    }
  }
  return learner->Train(command.tasks, global);
}

// Sends the status of `trained`, then, if OK, each trained task (wire.h).
absl::Status SendTrained(Transport& transport,
                         const absl::StatusOr<std::vector<TrainedTask>>& trained) {
  FEDSCHED_RETURN_IF_ERROR(transport.Send(0, kReply, EncodeStatus(trained.status())));
  if (!trained.ok()) return absl::OkStatus();
  for (const TrainedTask& t : *trained) {
    FEDSCHED_ASSIGN_OR_RETURN(std::string bytes, EncodeTrainedTask(t));
    FEDSCHED_RETURN_IF_ERROR(transport.Send(0, kReply, bytes));
  }
  return absl::OkStatus();
}

}  // namespace

int OwnerOf(int32_t client, int size) { return static_cast<int>(client % size); }

DistributedLearner::DistributedLearner(Transport* transport, std::unique_ptr<TrainingLearner> local,
                                       int32_t num_clients)
    : transport_(transport),
      local_(std::move(local)),
      warmed_(num_clients, false),
      deferred_(transport->size()) {}

absl::StatusOr<std::unique_ptr<DistributedLearner>> DistributedLearner::Create(
    const v1::SimConfig& config, Transport* transport, const TrainerFactory& make_trainer) {
  const std::string bytes = config.SerializeAsString();
  for (int r = 1; r < transport->size(); ++r) {
    FEDSCHED_RETURN_IF_ERROR(transport->Send(r, kSetup, bytes));
  }
  absl::StatusOr<std::unique_ptr<TrainingLearner>> local =
      TrainingLearner::Create(config, make_trainer);
  absl::Status first = local.status();
  for (int r = 1; r < transport->size(); ++r) {
    FEDSCHED_ASSIGN_OR_RETURN(std::string reply, ReceiveReply(*transport, r));
    FEDSCHED_ASSIGN_OR_RETURN(absl::Status s, DecodeStatus(reply));
    if (first.ok() && !s.ok()) first = FromRank(r, s);
  }
  FEDSCHED_RETURN_IF_ERROR(first);
  return std::unique_ptr<DistributedLearner>(
      new DistributedLearner(transport, *std::move(local), config.num_clients()));
}

absl::Status DistributedLearner::SendShares(absl::Span<const TrainTask> tasks,
                                            const std::vector<std::vector<size_t>>& share,
                                            const v1::Model& global, std::vector<bool>* sent) {
  std::string global_bytes;
  for (int r = 1; r < transport_->size(); ++r) {
    if (share[r].empty() && deferred_[r].empty()) continue;
    if (global_bytes.empty()) global_bytes = global.SerializeAsString();
    TrainCommand command;
    command.global = global_bytes;
    for (size_t i : share[r]) command.tasks.push_back(tasks[i]);
    command.prefetches = std::move(deferred_[r]);
    deferred_[r].clear();
    FEDSCHED_RETURN_IF_ERROR(transport_->Send(r, kTrain, EncodeTrainCommand(command)));
    (*sent)[r] = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrainedTask>> DistributedLearner::Train(
    absl::Span<const TrainTask> tasks, const v1::Model& global) {
  const int size = transport_->size();
  std::vector<std::vector<size_t>> share(size);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const int32_t c = tasks[i].client;
    if (c < 0 || c >= static_cast<int32_t>(warmed_.size())) {
      return absl::OutOfRangeError(absl::StrCat("no simulated client ", c));
    }
    share[OwnerOf(c, size)].push_back(i);
    warmed_[c] = false;  // its next idle spell may prefetch again (TrainingLearner::TrainOne)
  }
  std::vector<bool> sent(size, false);
  FEDSCHED_RETURN_IF_ERROR(SendShares(tasks, share, global, &sent));

  std::vector<TrainedTask> out(tasks.size());
  std::vector<TrainTask> mine;
  for (size_t i : share[0]) mine.push_back(tasks[i]);
  absl::Status first;
  if (!mine.empty()) {
    absl::StatusOr<std::vector<TrainedTask>> trained = local_->Train(mine, global);
    if (trained.ok()) {
      for (size_t k = 0; k < share[0].size(); ++k) out[share[0][k]] = std::move((*trained)[k]);
    } else {
      first = trained.status();
    }
  }
  // Every rank that was sent work replies; take every reply before returning any error. Only a
  // failed receive returns at once (the job is broken then; mpirun ends it).
  for (int r = 1; r < size; ++r) {
    if (!sent[r]) continue;
    FEDSCHED_ASSIGN_OR_RETURN(std::string bytes, ReceiveReply(*transport_, r));
    absl::StatusOr<absl::Status> status = DecodeStatus(bytes);
    if (!status.ok() || !status->ok()) {
      if (first.ok()) first = FromRank(r, status.ok() ? *status : status.status());
      if (!status.ok()) return first;  // out of step with this rank: nothing more to read
      continue;
    }
    for (size_t i : share[r]) {
      FEDSCHED_ASSIGN_OR_RETURN(bytes, ReceiveReply(*transport_, r));
      absl::StatusOr<TrainedTask> task = DecodeTrainedTask(bytes);
      if (task.ok()) {
        out[i] = *std::move(task);
      } else if (first.ok()) {
        first = FromRank(r, task.status());
      }
    }
  }
  FEDSCHED_RETURN_IF_ERROR(first);
  return out;
}

absl::Status DistributedLearner::Prefetch(int32_t client, const v1::CachePlan& plan) {
  if (client < 0 || client >= static_cast<int32_t>(warmed_.size())) {
    return absl::OutOfRangeError(absl::StrCat("no simulated client ", client));
  }
  const int owner = OwnerOf(client, transport_->size());
  if (owner == 0) return local_->Prefetch(client, plan);
  // TrainingLearner::Prefetch does nothing for these; skip sending them.
  if (NumSamples(client) == 0 || warmed_[client]) return absl::OkStatus();
  warmed_[client] = true;
  deferred_[owner].push_back(PrefetchHint{client, plan});
  return absl::OkStatus();
}

absl::Status ServeTraining(Transport& transport, const TrainerFactory& make_trainer) {
  std::unique_ptr<TrainingLearner> learner;
  while (true) {
    FEDSCHED_ASSIGN_OR_RETURN(Transport::Message m, transport.Receive(0));
    std::string reply;
    switch (m.tag) {
      case kStop:
        return absl::OkStatus();
      case kSetup: {
        v1::SimConfig config;
        absl::StatusOr<std::unique_ptr<TrainingLearner>> created =
            config.ParseFromString(m.bytes)
                ? TrainingLearner::Create(config, make_trainer)
                : absl::DataLossError("sim mpi message: malformed sim config");
        if (created.ok()) learner = *std::move(created);
        reply = EncodeStatus(created.status());
        break;
      }
      case kTrain:
        FEDSCHED_RETURN_IF_ERROR(SendTrained(transport, TrainOnWorker(learner.get(), m.bytes)));
        continue;
      default:
        return absl::InternalError(
            absl::StrCat("rank ", transport.rank(), ": unexpected message tag ", m.tag));
    }
    FEDSCHED_RETURN_IF_ERROR(transport.Send(0, kReply, reply));
  }
}

absl::Status StopWorkers(Transport& transport) {
  for (int r = 1; r < transport.size(); ++r) {
    FEDSCHED_RETURN_IF_ERROR(transport.Send(r, kStop, ""));
  }
  return absl::OkStatus();
}

}  // namespace fedsched::sim::mpi
