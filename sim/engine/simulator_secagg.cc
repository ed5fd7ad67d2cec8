// The simulated devices' side of secure aggregation (docs/guides/SIMULATION.md "Secure
// aggregation"; Bonawitz et al., CCS 2017, section 4, figure 4, over the SecAgg+ graph of Bell et
// al., CCS 2020, section 3). Each device of a secure-aggregation round runs secagg::SecAggClient
// through the engine's SecAggStep and uploads a masked input through FoldUpdates, the calls the SDK
// makes over RPC (client/sdk/client_secagg.cc), so the server's protocol code runs unchanged.
// Every message is a virtual-time event:
//   advertise    issue time + one round trip + its bytes at the device's bandwidth;
//   share keys   when the key directory is available (the advertise step closed) + one round
//                trip + the directory's and the shares' bytes;
//   masked input the task's download / train / upload starts when the routed shares are
//                available (+ their bytes); the upload is the masked input's size, b/8 bytes a
//                parameter (b = bits_per_element, 4 bytes at 32) plus framing, instead of the
//                model's;
//   unmask       when the unmask request is available (the uploads closed) + one round trip +
//                the request's and the answer's bytes.
// A device that is offline at a send (per the availability trace), or whose task failed, does not
// send: it drops at that step, which is how trace dropouts reach the unmasking step. The engine
// closes a step in Advance when every member answered or at the step deadline, for which a
// wake-up is scheduled; a server message becomes available only then, so after each Advance every
// waiting device asks for its next input (SecAggStep without a message).
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dp_noise.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "secagg/packing.h"
#include "secagg/update_vector.h"
#include "sim/engine/simulator.h"
#include "sim/trace/text_table.h"

namespace fedsched::sim {

namespace {

using Stage = SecAggStage;

// The device's protocol randomness: derived from the run's seed, the round, the device and its
// task serial (unique per task, so a re-planned attempt of a round draws fresh keys), so that a
// run is reproducible. A live device draws it from the OS (secagg::SystemEntropy).
secagg::Bytes32 DeviceEntropy(uint64_t seed, int64_t round, round::ClientIndex index,
                              int64_t serial) {
  SplitMix64 rng(seed * 0x9E3779B97F4A7C15ULL ^
                 static_cast<uint64_t>(round) * 0xD1B54A32D192ED03ULL ^
                 (static_cast<uint64_t>(index) << 32) ^ static_cast<uint64_t>(serial));
  secagg::Bytes32 entropy{};
  for (size_t i = 0; i < entropy.size(); i += 8) {
    const uint64_t z = rng.Next();
    std::memcpy(entropy.data() + i, &z, 8);
  }
  return entropy;
}

// The serialized size of a SecAggMaskedInput of `length` elements at `bits` per element (tag,
// length varint and the elements: a packed repeated fixed32 of 4 bytes each at 32 bits, else
// packed_masked's ceil(length x bits / 8) bytes) for `round` and `sender`.
int64_t MaskedInputBytes(uint64_t round, uint32_t sender, uint64_t length, uint32_t bits) {
  v1::SecAggMaskedInput header;
  header.set_round_id(round);
  header.set_sender(sender);
  const uint64_t data = secagg::PackedBytes(length, bits);
  const uint64_t packed =
      length > 0 ? 1 + google::protobuf::io::CodedOutputStream::VarintSize64(data) + data : 0;
  return static_cast<int64_t>(header.ByteSizeLong() + packed);
}

// The device's long-term signing key (docs/guides/SECURITY.md "Secure aggregation with a malicious
// member"): a live device makes it once per install from the OS; here it is derived from the
// run's seed and the device, so a run is reproducible.
secagg::Bytes32 DeviceSigningSeed(uint64_t seed, round::ClientIndex index) {
  return secagg::Sha256Of(absl::StrCat("fedsched-sim signing key ", seed, " ", index));
}

// The bytes of the step message a request carries (as SecAggRound counts them).
int64_t MessageBytes(const v1::SecAggStepRequest& request) {
  switch (request.message_case()) {
    case v1::SecAggStepRequest::kAdvertise:
      return static_cast<int64_t>(request.advertise().ByteSizeLong());
    case v1::SecAggStepRequest::kShareKeys:
      return static_cast<int64_t>(request.share_keys().ByteSizeLong());
    case v1::SecAggStepRequest::kUnmask:
      return static_cast<int64_t>(request.unmask().ByteSizeLong());
    case v1::SecAggStepRequest::MESSAGE_NOT_SET:
      break;
  }
  return 0;
}

}  // namespace

double Simulator::TransferSeconds(int32_t client, int64_t bytes) const {
  return ComputeTaskTiming(parts_.capacity->ForClient(client), 0, bytes, 0, 0, 0).download_s;
}

absl::Status Simulator::BeginSecAgg(int64_t serial, const round::Task& task, double now) {
  SimTask& t = tasks_.at(serial);
  t.secagg = true;
  const v1::SecAggRoundParams& params = task.secagg.params();
  // The device signs its advertisement as the SDK does; the key is bound at its first round, as
  // a live device's is at its first registration.
  FEDSCHED_ASSIGN_OR_RETURN(secagg::SigningKey key, secagg::SigningKey::FromSeed(DeviceSigningSeed(
                                                        config_.server().seed(), task.index)));
  profile::ProfileBook& book = engine_->mutable_book();
  if (book.profile(task.index).signing_public_key().empty()) {
    FEDSCHED_RETURN_IF_ERROR(book.SetSigningPublicKey(task.index, key.public_key()));
  }
  absl::StatusOr<secagg::SecAggClient> client = secagg::SecAggClient::Create(
      params, task.secagg.index(),
      DeviceEntropy(config_.server().seed(), task.round, task.index, serial),
      secagg::MemberIdentity{book.profile(task.index).client_id(), std::move(key)});
  if (!client.ok()) {
    return absl::InternalError(absl::StrCat("simulator: secure aggregation of task ", task.task_id,
                                            ": ", client.status().message()));
  }
  SecAggDevice d(*std::move(client));
  d.sim_client = t.client;
  d.index = task.index;
  d.pending.set_task_id(task.task_id);
  FEDSCHED_ASSIGN_OR_RETURN(*d.pending.mutable_advertise(), d.client.Advertise());
  // The upload is the masked input: of the modelled model's parameters (b/8 bytes each) when the
  // engine's model is a stand-in (no-train mode, blob_), else of the model's.
  const int64_t model_bytes = parts_.learner->ModelBytes();
  const uint64_t length =
      blob_ != nullptr ? static_cast<uint64_t>((model_bytes + 3) / 4) : params.vector_length();
  d.masked_bytes =
      MaskedInputBytes(params.round_id(), task.secagg.index(), length, d.client.bits_per_element());
  if (model_bytes > 0) {
    t.timing.upload_s *= static_cast<double>(d.masked_bytes) / static_cast<double>(model_bytes);
  }
  const double at =
      now + config_.round_trip_s() + TransferSeconds(t.client, MessageBytes(d.pending));
  secagg_devices_.emplace(serial, std::move(d));
  return queue_.Push(at, EventKind::kSecAggSend, t.client, serial);
}

void Simulator::DropSecAgg(std::map<int64_t, SecAggDevice>::iterator it) {
  const Stage stage = it->second.stage;
  if (stage < Stage::kTraining) {  // no end event was scheduled
    tasks_.erase(it->first);
    NoteTaskEnd(it->second.sim_client);
  }
  secagg_devices_.erase(it);
}

absl::Status Simulator::OnSecAggSend(int64_t serial, double now) {
  auto it = secagg_devices_.find(serial);
  if (it == secagg_devices_.end()) return absl::OkStatus();
  SecAggDevice& d = it->second;
  const std::string task_id = d.pending.task_id();
  const round::Task* task = engine_->FindTask(task_id);
  const round::SecAggRound* open = engine_->secagg();
  const bool member = task != nullptr && open != nullptr && open->IndexOf(task_id).has_value();
  // Before its upload the device must hold its task; after it, only be online.
  const bool key_step = d.stage != Stage::kUnmask;
  if (!member || (key_step && !task->in_flight()) ||
      !parts_.availability->IsAvailable(d.sim_client, now)) {
    DropSecAgg(it);  // offline, or left behind: the device drops at this step
    return absl::OkStatus();
  }
  const int64_t bytes = MessageBytes(d.pending);
  absl::StatusOr<v1::SecAggStepResponse> next = engine_->SecAggStep(d.index, d.pending, now);
  if (!next.ok()) {
    // A step closed before the message arrived drops the device; a refused message from an
    // honest device is a fault.
    if (absl::IsInvalidArgument(next.status()) || absl::IsPermissionDenied(next.status())) {
      return absl::InternalError(
          absl::StrCat("simulator: the engine refused task ", task_id,
                       "'s secure-aggregation message: ", next.status().message()));
    }
    DropSecAgg(it);
    return absl::OkStatus();
  }
  secagg_counts_.bytes_up += bytes;
  ++secagg_counts_.round_trips;
  d.pending.clear_message();
  switch (d.stage) {
    case Stage::kAdvertise:
      d.stage = Stage::kDirectory;
      break;
    case Stage::kShareKeys:
      d.stage = Stage::kRouted;
      break;
    default:  // the unmask answer: the device is done
      ++secagg_counts_.unmask_answers;
      secagg_devices_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status Simulator::PollSecAgg(double now) {
  for (auto it = secagg_devices_.begin(); it != secagg_devices_.end();) {
    auto next = std::next(it);
    const Stage stage = it->second.stage;
    if (stage == Stage::kDirectory || stage == Stage::kRouted || stage == Stage::kUnmaskRequest) {
      FEDSCHED_RETURN_IF_ERROR(OfferNextStep(it, now));
    }
    it = next;
  }
  const double at = engine_->secagg_deadline_s();
  if (!(at > now) || at == std::numeric_limits<double>::infinity() || at == secagg_wake_s_) {
    return absl::OkStatus();
  }
  secagg_wake_s_ = at;
  return queue_.Push(at, EventKind::kRoundStart);
}

absl::Status Simulator::OfferNextStep(std::map<int64_t, SecAggDevice>::iterator it, double now) {
  SecAggDevice& d = it->second;
  const std::string task_id = d.pending.task_id();  // a copy: the device may be dropped below
  const round::Task* task = engine_->FindTask(task_id);
  if (d.stage != Stage::kUnmaskRequest && (task == nullptr || !task->in_flight())) {
    DropSecAgg(it);  // its task failed (offline, or dropped by the protocol)
    return absl::OkStatus();
  }
  v1::SecAggStepRequest ask;
  ask.set_task_id(task_id);
  absl::StatusOr<v1::SecAggStepResponse> next = engine_->SecAggStep(d.index, ask, now);
  if (!next.ok() || next->has_done()) {
    DropSecAgg(it);  // dropped at a closed step, or the round is over
    return absl::OkStatus();
  }
  // The device answers one round trip plus both messages' transfer after the server's message.
  auto answer_later = [&](int64_t in) {
    const double at =
        now + config_.round_trip_s() + TransferSeconds(d.sim_client, in + MessageBytes(d.pending));
    return queue_.Push(at, EventKind::kSecAggSend, d.sim_client, it->first);
  };
  absl::Status refused;  // the device's own refusal: it stops, failing its task
  if (d.stage == Stage::kDirectory && next->has_key_directory()) {
    const auto in = static_cast<int64_t>(next->key_directory().ByteSizeLong());
    secagg_counts_.bytes_down += in;
    absl::StatusOr<v1::SecAggShareKeys> shares = d.client.ShareKeys(next->key_directory());
    if (shares.ok()) {
      *d.pending.mutable_share_keys() = *std::move(shares);
      d.stage = Stage::kShareKeys;
      return answer_later(in);
    }
    refused = shares.status();
  } else if (d.stage == Stage::kRouted && next->has_routed_shares()) {
    const auto in = static_cast<int64_t>(next->routed_shares().ByteSizeLong());
    secagg_counts_.bytes_down += in;
    d.routed = std::move(*next->mutable_routed_shares());
    d.stage = Stage::kTraining;
    return PushTaskEnd(it->first, now + TransferSeconds(d.sim_client, in));
  } else if (d.stage == Stage::kUnmaskRequest && next->has_unmask_request()) {
    const auto in = static_cast<int64_t>(next->unmask_request().ByteSizeLong());
    secagg_counts_.bytes_down += in;
    absl::StatusOr<v1::SecAggUnmaskResponse> answer = d.client.Unmask(next->unmask_request());
    if (answer.ok()) {
      *d.pending.mutable_unmask() = *std::move(answer);
      d.stage = Stage::kUnmask;
      return answer_later(in);
    }
    refused = answer.status();  // e.g. fewer than t survived: it reveals nothing
  } else {
    return absl::OkStatus();  // not ready yet (retry_after_ms): asks again after the next Advance
  }
  const round::ClientIndex index = d.index;
  DropSecAgg(it);
  if (task == nullptr || !task->in_flight()) return absl::OkStatus();
  return engine_->FailTask(index, task_id, now,
                           absl::StrCat("secure aggregation: ", refused.message()));
}

absl::StatusOr<bool> Simulator::MaskUpdate(int64_t serial, bool secagg, double now,
                                           round::Update* update,
                                           std::optional<v1::SecAggMaskedInput>* masked) {
  if (!secagg) return true;  // a plain task uploads its delta
  auto it = secagg_devices_.find(serial);
  if (it == secagg_devices_.end()) return false;  // the device left the protocol
  SecAggDevice& d = it->second;
  const round::Task* task = engine_->FindTask(update->claim.task_id);
  const round::SecAggRound* open = engine_->secagg();
  if (d.stage != Stage::kTraining || task == nullptr || !task->in_flight() || open == nullptr ||
      !open->IndexOf(task->task_id).has_value()) {
    secagg_devices_.erase(it);  // its round is over (a straggler): nothing is uploaded
    return false;
  }
  const v1::SecAggTask& info = task->secagg;
  if (task->dp_clip_norm <= 0 && info.example_scale() == 0) {
    // Central differential privacy: the server cannot see the norm, so the device reports the
    // bit adaptive clipping counts (distributed DP: PrivatizeUpdate clipped and noised it).
    update->metrics.set_dp_unclipped(UpdateL2Norm(*update->delta) <= info.params().clip_norm());
  }
  const double weight = secagg::MaskWeight(update->claim.num_examples, info.example_scale());
  absl::StatusOr<v1::SecAggMaskedInput> input =
      d.client.MaskInput(d.routed, secagg::FlattenUpdate(*update->delta), weight);
  if (!input.ok()) {
    secagg_devices_.erase(it);
    FEDSCHED_RETURN_IF_ERROR(
        engine_->FailTask(update->claim.index, update->claim.task_id, now,
                          absl::StrCat("secure aggregation: ", input.status().message())));
    return false;
  }
  masked->emplace(*std::move(input));
  update->masked = &**masked;
  update->delta = nullptr;  // only the masked vector leaves the device
  update->upload_bytes = d.masked_bytes;
  secagg_counts_.masked_bytes += d.masked_bytes;
  d.stage = Stage::kUnmaskRequest;
  return true;
}

}  // namespace fedsched::sim
