// fedsched::Client's side of secure aggregation (docs/guides/SECURE_AGGREGATION.md "Over the
// wire"): the key steps before the download, the masked upload in place of the plain one, and the
// unmask answer after it. The app's trainer never sees any of it: it returns a plain update as
// always, and only the masked vector leaves the device.
#include "client/sdk/client_secagg.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sdk/client.h"
#include "client/sdk/client_rpc.h"
#include "common/dp_noise.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "secagg/update_vector.h"

namespace fedsched {

namespace {

// How long after the task's deadline the SDK still waits for a step's input: the unmask step
// opens when the round's uploads close (at the latest its deadline) and stays open for the
// server's step_timeout_s.
constexpr absl::Duration kGrace = absl::Seconds(120);

absl::Time TaskDeadline(const v1::Task& task) {
  return absl::FromUnixMillis(task.deadline_unix_ms()) + kGrace;
}

}  // namespace

absl::StatusOr<v1::SecAggStepResponse> Client::SecAggExchange(v1::SecAggStepRequest request,
                                                              v1::SecAggStepResponse::NextCase want,
                                                              absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    request.set_client_id(client_id_);
    request.set_session_token(token_);
  }
  bool resent = false;  // the step message went out again after a transient error
  while (true) {
    grpc::ClientContext context;
    SetUnaryDeadline(&context);
    v1::SecAggStepResponse response;
    absl::Status s = FromGrpc(rpc()->stub->SecAggStep(&context, request, &response), "SecAggStep");
    // A busy or briefly unreachable server: ask again (with the same message) until the step's
    // deadline. A message the server took before the error is then "already sent": taken.
    const bool transient = absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s);
    if (resent && absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "already sent")) {
      request.clear_message();
      resent = false;
      continue;
    }
    if (transient && clock_.Now() < deadline) {
      FEDSCHED_LOG(warn, "secure aggregation: {} (task {}); asking again", s.ToString(),
                   request.task_id());
      resent = request.message_case() != v1::SecAggStepRequest::MESSAGE_NOT_SET;
      if (!SleepFor(absl::Milliseconds(200))) return absl::CancelledError("client stopped");
      continue;
    }
    FEDSCHED_RETURN_IF_ERROR(s);
    {
      absl::MutexLock lock(&mu_);
      const auto sent = static_cast<int64_t>(request.ByteSizeLong());
      const auto received = static_cast<int64_t>(response.ByteSizeLong());
      stats_.bytes_sent += sent;
      stats_.secagg_bytes_sent += sent;
      stats_.bytes_received += received;
      stats_.secagg_bytes_received += received;
    }
    if (response.next_case() == want || response.has_done()) return response;
    if (clock_.Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("secure aggregation: no answer for step ", static_cast<int>(want),
                       " of task ", request.task_id(), " by the task's deadline"));
    }
    request.clear_message();  // sent once; from now on only asking
    const int64_t wait_ms = std::clamp<int64_t>(response.retry_after_ms(), 10, 5000);
    if (!SleepFor(absl::Milliseconds(wait_ms))) return absl::CancelledError("client stopped");
  }
}

absl::Status Client::BeginSecAgg(const v1::Task& task) {
  secagg_.reset();
  if (!task.has_secagg()) return absl::OkStatus();
  // Fresh keys and seeds every round from the OS (OpenSSL's RAND_bytes): the server must not be
  // able to predict any of them.
  FEDSCHED_ASSIGN_OR_RETURN(secagg::Bytes32 entropy, secagg::SystemEntropy());
  secagg::MemberIdentity identity{"", *signing_key_};
  {
    absl::MutexLock lock(&mu_);
    identity.client_id = client_id_;
  }
  // The advertisement is signed with the device's long-term key, bound to its identity at
  // registration, so that neither another member nor a relay can advertise in its name.
  FEDSCHED_ASSIGN_OR_RETURN(
      secagg::SecAggClient protocol,
      secagg::SecAggClient::Create(task.secagg().params(), task.secagg().index(), entropy,
                                   std::move(identity)));
  auto session = std::make_unique<SecAggSession>(SecAggSession{std::move(protocol), {}});
  v1::SecAggStepRequest request;
  request.set_task_id(task.task_id());
  FEDSCHED_ASSIGN_OR_RETURN(*request.mutable_advertise(), session->client.Advertise());
  FEDSCHED_ASSIGN_OR_RETURN(
      v1::SecAggStepResponse directory,
      SecAggExchange(request, v1::SecAggStepResponse::kKeyDirectory, TaskDeadline(task)));
  if (directory.has_done()) return absl::AbortedError("secure aggregation: the round closed");
  request.clear_advertise();
  FEDSCHED_ASSIGN_OR_RETURN(*request.mutable_share_keys(),
                            session->client.ShareKeys(directory.key_directory()));
  FEDSCHED_ASSIGN_OR_RETURN(
      v1::SecAggStepResponse routed,
      SecAggExchange(request, v1::SecAggStepResponse::kRoutedShares, TaskDeadline(task)));
  if (routed.has_done()) return absl::AbortedError("secure aggregation: the round closed");
  session->routed = std::move(*routed.mutable_routed_shares());
  secagg_ = std::move(session);
  return absl::OkStatus();
}

absl::Status Client::UploadMasked(const v1::Task& task, const v1::Model& delta,
                                  const v1::UpdateMetrics& metrics) {
  std::unique_ptr<SecAggSession> session = std::move(secagg_);
  v1::UpdateMetrics sent = metrics;
  const v1::SecAggTask& info = task.secagg();
  if (task.dp_clip_norm() <= 0 && info.example_scale() == 0) {
    // Central differential privacy: the server cannot see the norm, so the client reports the
    // bit adaptive clipping counts (under distributed DP UploadPrivatized set it with the clip).
    sent.set_dp_unclipped(UpdateL2Norm(delta) <= info.params().clip_norm());
  }
  const double weight = secagg::MaskWeight(metrics.num_examples(), info.example_scale());
  const std::vector<float> flat = secagg::FlattenUpdate(delta);
  FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggMaskedInput masked,
                            session->client.MaskInput(session->routed, flat, weight));
  FEDSCHED_RETURN_IF_ERROR(UploadPayload(task, masked.SerializeAsString(), sent));
  // Step 3: reveal the shares the server asks for, so that the sum can be unmasked.
  v1::SecAggStepRequest request;
  request.set_task_id(task.task_id());
  FEDSCHED_ASSIGN_OR_RETURN(
      v1::SecAggStepResponse asked,
      SecAggExchange(request, v1::SecAggStepResponse::kUnmaskRequest, TaskDeadline(task)));
  if (asked.has_done()) return absl::OkStatus();
  FEDSCHED_ASSIGN_OR_RETURN(*request.mutable_unmask(),
                            session->client.Unmask(asked.unmask_request()));
  absl::StatusOr<v1::SecAggStepResponse> done =
      SecAggExchange(request, v1::SecAggStepResponse::kDone, TaskDeadline(task));
  if (!done.ok()) {
    // The update was accepted; the round may still commit with the other survivors' shares.
    FEDSCHED_LOG(warn, "secure aggregation: unmask answer for task {}: {}", task.task_id(),
                 done.status().ToString());
  }
  return absl::OkStatus();
}

}  // namespace fedsched
