#include "client/sdk/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/sdk/client_rpc.h"
#include "client/sdk/client_secagg.h"
#include "client/sdk/memory_usage.h"
#include "client/sdk/transfer_pacer.h"
#include "client/sdk/update_compression.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/transport.h"

namespace fedsched {

namespace {

bool IsSessionLost(const absl::Status& s) { return absl::IsUnauthenticated(s); }

// Long poll (PollTaskRequest.wait_ms): the server may hold a poll this long while there is no
// task, so the client hears of its task when the round is planned. Well under the unary
// deadline above; an older server answers at once and the retry_after_ms loop applies.
constexpr int32_t kPollWaitMs = 5000;
// Longest idle wait the client accepts from a poll answer (pace steering sends devices away for
// at most 1.5 x pacing.max_checkin_interval_s; a bigger value is a broken or hostile server).
constexpr int64_t kMaxPacedWaitMs = 3600 * 1000;
// Task ids remembered as ended by a final verdict (a server hands out one task per round).
constexpr size_t kFinalTasksKept = 64;

// Errors: INVALID_ARGUMENT naming the first empty or null trainer entry or empty label.
absl::Status CheckJobOptions(const ClientOptions& options) {
  for (const auto& [name, entry] : options.trainers) {
    if (name.empty()) return absl::InvalidArgumentError("trainers: a name is empty");
    if (entry.trainer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("trainers[\"", name, "\"] has no trainer"));
    }
  }
  for (const std::string& label : options.labels) {
    if (label.empty()) return absl::InvalidArgumentError("labels: a label is empty");
  }
  return absl::OkStatus();
}

}  // namespace

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClientClock()),
      jitter_rng_(options_.config.seed()),
      error_feedback_(std::make_unique<ErrorFeedbackStore>(options_.config.state_dir())) {}

Client::~Client() {
  Stop();
  if (heartbeat_thread_ && heartbeat_thread_->joinable()) heartbeat_thread_->join();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if ((options.trainer == nullptr && options.trainers.empty()) || options.data == nullptr) {
    return absl::InvalidArgumentError("client needs a trainer and a local data plan");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckJobOptions(options));
  v1::ClientConfig& config = options.config;
  if (config.identity().empty() && !config.state_dir().empty()) {
    // The default identity is the install's own, kept in its state dir: random, not a name
    // anyone can register first (docs/guides/SECURITY.md "Identities and admission").
    FEDSCHED_RETURN_IF_ERROR(MakePrivateDir(config.state_dir()));
    FEDSCHED_ASSIGN_OR_RETURN(*config.mutable_identity(), ReadOrCreateIdentity(config.state_dir()));
  }
  if (config.identity().empty()) {
    return absl::InvalidArgumentError("client identity is empty (and no state_dir to keep one)");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckIdentity(config.identity()));
  if (config.server_address().empty()) config.set_server_address("127.0.0.1:50051");
  if (config.backoff_initial_ms() == 0) config.set_backoff_initial_ms(200);
  if (config.backoff_max_ms() == 0) config.set_backoff_max_ms(10000);
  if (config.backoff_initial_ms() < 0 || config.backoff_max_ms() < config.backoff_initial_ms()) {
    return absl::InvalidArgumentError("need 0 < backoff_initial_ms <= backoff_max_ms");
  }
  if (config.bandwidth_kbps() < 0) return absl::InvalidArgumentError("bandwidth_kbps < 0");
  if (config.seed() == 0) config.set_seed(1);
  if (options.device.num_samples() == 0) {
    options.device.set_num_samples(options.data->source().NumSamples());
  }
  if (!(config.memory_budget_mb() >= 0) || !std::isfinite(config.memory_budget_mb())) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_budget_mb must be >= 0, got ", config.memory_budget_mb()));
  }
  if (options.device.memory_budget_bytes() == 0) {
    options.device.set_memory_budget_bytes(
        static_cast<int64_t>(config.memory_budget_mb() * kBytesPerMiB));
  }
  if (options.device.storage_budget_bytes() == 0) {
    options.device.set_storage_budget_bytes(config.storage_budget_bytes());
  }
  if (options.device.device_model().empty()) {
    options.device.set_device_model(config.device_model().empty() ? "generic"
                                                                  : config.device_model());
  }
  auto client = std::unique_ptr<Client>(new Client(std::move(options)));
  FEDSCHED_ASSIGN_OR_RETURN(v1::TransportConfig transport,
                            ResolveTransport(client->options_.config.transport()));
  {
    absl::MutexLock lock(&client->mu_);
    client->transport_ = std::move(transport);
  }
  if (!client->options_.config.state_dir().empty()) {
    FEDSCHED_RETURN_IF_ERROR(MakePrivateDir(client->options_.config.state_dir()));
  }
  FEDSCHED_RETURN_IF_ERROR(client->LoadCredential());
  if (!client->options_.config.state_dir().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(client->signing_key_,
                              ReadOrCreateSigningKey(client->options_.config.state_dir()));
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(secagg::Bytes32 seed, secagg::SystemEntropy());
    FEDSCHED_ASSIGN_OR_RETURN(client->signing_key_, secagg::SigningKey::FromSeed(seed));
  }
  FEDSCHED_RETURN_IF_ERROR(client->Connect());
  client->backoff_ = absl::Milliseconds(client->options_.config.backoff_initial_ms());
  client->task_backoff_ = client->backoff_;
  return client;
}

std::string Client::endpoint() const {
  absl::MutexLock lock(&mu_);
  return endpoint_index_ == 0 ? options_.config.server_address()
                              : options_.config.fallback_addresses(endpoint_index_ - 1);
}

bool Client::MaybeFailover(const absl::Status& s) {
  const int endpoints = 1 + options_.config.fallback_addresses_size();
  if (endpoints == 1 || !(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s))) return false;
  const std::string from = endpoint();
  {
    absl::MutexLock lock(&mu_);
    endpoint_index_ = (endpoint_index_ + 1) % endpoints;
    ++stats_.failovers;
  }
  if (absl::Status c = Connect(); !c.ok()) return false;
  FEDSCHED_LOG(info, "{}: endpoint {} unreachable ({}); moving to {}", options_.config.identity(),
               from, std::string(s.message()), endpoint());
  return true;
}

absl::Status Client::Connect() {
  const v1::TransportConfig config = transport();
  const std::string address = endpoint();
  FEDSCHED_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                            MakeChannelCredentials(config));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, credentials, ClientChannelArguments(config));
  // Heartbeats get a connection of their own (a channel argument the other channel lacks gives
  // it its own subchannel), so that they never wait behind a model download or an update upload
  // on one HTTP/2 connection (docs/reports/RELIABILITY.md §8 "Soak").
  grpc::ChannelArguments heartbeat_args = ClientChannelArguments(config);
  heartbeat_args.SetString("fedsched.channel_role", "heartbeat");
  std::shared_ptr<grpc::Channel> heartbeat_channel =
      grpc::CreateCustomChannel(address, credentials, heartbeat_args);
  auto rpc = std::make_shared<ClientRpc>(ClientRpc{channel, v1::Coordinator::NewStub(channel),
                                                   v1::Coordinator::NewStub(heartbeat_channel)});
  absl::MutexLock lock(&mu_);
  rpc_ = std::move(rpc);
  return absl::OkStatus();
}

std::shared_ptr<ClientRpc> Client::rpc() const {
  absl::MutexLock lock(&mu_);
  return rpc_;
}

v1::TransportConfig Client::transport() const {
  absl::MutexLock lock(&mu_);
  return transport_;
}

void Client::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  // A poll the server holds would keep Run() for up to kPollWaitMs.
  absl::MutexLock lock(&mu_);
  if (poll_context_ != nullptr) poll_context_->TryCancel();
}

ClientRunStats Client::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool Client::SleepFor(absl::Duration d) { return clock_.SleepFor(d, &stop_); }

absl::Duration Client::NextBackoff(absl::Duration* state) {
  absl::Duration& backoff = state != nullptr ? *state : backoff_;
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  absl::Duration wait = backoff * jitter(jitter_rng_);
  backoff = std::min(backoff * 2, absl::Milliseconds(options_.config.backoff_max_ms()));
  return wait;
}

void Client::HandleTask(const v1::Task& task) {
  const std::string& id = task.task_id();
  if (std::find(final_tasks_.begin(), final_tasks_.end(), id) != final_tasks_.end()) {
    // A server that offers a refused task again (an older one, or a relay) gets a failure
    // report instead of the same update, after a backoff.
    ReportTaskFailure(task, absl::FailedPreconditionError(
                                "task ended earlier with a final verdict; not run again"))
        .IgnoreError();
    SleepFor(NextBackoff(&task_backoff_));
    return;
  }
  const absl::Status status = RunTask(task);
  if (status.ok()) {
    task_backoff_ = absl::Milliseconds(options_.config.backoff_initial_ms());
    absl::MutexLock lock(&mu_);
    ++stats_.tasks_completed;
    return;
  }
  const bool is_final = IsFinalTaskVerdict(status);
  if (is_final) {
    final_tasks_.push_back(id);
    if (final_tasks_.size() > kFinalTasksKept) final_tasks_.pop_front();
  }
  {
    absl::MutexLock lock(&mu_);
    if (IsOutOfMemory(status)) {
      ++stats_.tasks_out_of_memory;
      FEDSCHED_LOG(warn, "{}: task {} {}", options_.config.identity(), id,
                   std::string(status.message()));
    } else if (IsInterruption(status)) {
      ++stats_.tasks_interrupted;
      FEDSCHED_LOG(info, "{}: task {} {}", options_.config.identity(), id,
                   std::string(status.message()));
    } else {
      ++stats_.tasks_failed;
      if (IsNoTrainer(status)) {
        ++stats_.tasks_without_trainer;
      } else if (is_final) {
        ++stats_.tasks_refused;
      }
      FEDSCHED_LOG(warn, "{}: task {} failed{}: {}", options_.config.identity(), id,
                   is_final ? " (not retried)" : "", status.ToString());
      if (IsSessionLost(status)) registered_ = false;
    }
  }
  // Never straight back to the server after a failure (a refused update, an overloaded
  // server, a local error): exponential backoff with jitter, reset by the next completed task.
  if (!absl::IsCancelled(status) && !IsInterruption(status)) SleepFor(NextBackoff(&task_backoff_));
}

bool Client::WaitForServer(absl::Duration d) {
  const std::shared_ptr<ClientRpc> current = rpc();
  grpc::Channel* channel = current == nullptr ? nullptr : current->channel.get();
  // Connected: the failure was the server's answer, so back off for the whole wait.
  if (channel == nullptr || channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    return SleepFor(d);
  }
  // Not connected (server down or restarting): wake as soon as gRPC reconnects, which it tries
  // at most every 2 s (common/transport.cc), so a restarted server gets its clients back in
  // about that time instead of after a backoff of up to backoff_max_ms. The channel's state is
  // looked at every 100 ms of the client's clock, so that a test's clock drives this wait too.
  const absl::Time until = clock_.Now() + d;
  for (absl::Time now = clock_.Now(); now < until; now = clock_.Now()) {
    if (!SleepFor(std::min(until - now, absl::Milliseconds(100)))) return false;
    if (channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) break;
  }
  return !stop_.HasBeenNotified();
}

std::string Client::CredentialPath() const {
  const std::string& dir = options_.config.state_dir();
  return dir.empty() ? std::string() : dir + "/credential";
}

absl::Status Client::LoadCredential() {
  if (!options_.credential.empty()) {
    absl::MutexLock lock(&mu_);
    credential_ = options_.credential;
    return absl::OkStatus();
  }
  const std::string path = CredentialPath();
  if (path.empty()) return absl::OkStatus();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, " (symlink?): ", std::strerror(errno)));
  }
  struct stat st;
  std::string text;
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) == 0 && st.st_size < 4096) {
    text.resize(static_cast<size_t>(st.st_size));
    if (::read(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) text.clear();
  } else {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " must be a private (0600) file under 4 KiB"));
  }
  ::close(fd);
  const std::string credential(absl::StripAsciiWhitespace(text));
  // Secrets are hex (fedsched-enroll) or "c-" and hex (issued on first use): anything else was
  // damaged, and would be refused by the server for ever (or not even serialise).
  for (const char c : credential) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
      return absl::FailedPreconditionError(absl::StrCat(
          "the credential file ", path,
          " is damaged (a credential is letters, digits and '-'); the server's operator installs "
          "it again "
          "(docs/guides/OPERATIONS.md \"Re-enrolling a device\")"));
    }
  }
  absl::MutexLock lock(&mu_);
  credential_ = credential;
  return absl::OkStatus();
}

absl::Status Client::CredentialRefused(const absl::Status& refusal) const {
  const std::string path = CredentialPath();
  const std::string& identity = options_.config.identity();
  // The server's words for a revoked identity (Coordinator::CheckNotRevoked): no credential
  // the device holds or is given can help, so none of the re-enrolment advice applies.
  if (absl::StrContains(refusal.message(), "was revoked by the operator")) {
    return absl::PermissionDeniedError(absl::StrCat(
        identity, ": the server's operator revoked this device (", refusal.message(),
        "). Retrying or re-enrolling the device cannot help; only the operator can lift the "
        "revocation (docs/guides/OPERATIONS.md \"Revoking a device\")"));
  }
  // Coordinator::CheckSigningKey: the credential is fine, the signing key is not the bound one.
  if (absl::StrContains(refusal.message(), "bound to another signing key")) {
    return absl::PermissionDeniedError(absl::StrCat(
        identity, ": the server refuses this device's signing key (", refusal.message(), "); ",
        options_.config.state_dir().empty()
            ? "this client has no state_dir, so each handle makes a new key"
            : absl::StrCat("the key is ", options_.config.state_dir(), "/signing_key"),
        ". Retrying cannot help"));
  }
  std::string found;
  if (path.empty()) {
    found = "this client has no state_dir, so no credential file";
  } else {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      found = absl::StrCat("the credential file ", path, " is missing");
    } else {
      absl::MutexLock lock(&mu_);
      found = credential_.empty() ? absl::StrCat("the credential file ", path, " is empty")
                                  : absl::StrCat("the credential in ", path, " was refused");
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      identity, ": the server refuses this device (", refusal.message(), "); ", found,
      ". Retrying cannot help. Recovery, by the server's operator (docs/guides/OPERATIONS.md "
      "\"Re-enrolling a device\"): with an enrolment key, install the device's secret again "
      "with fedsched-enroll --key_file=KEY --identity=",
      identity, path.empty() ? "" : absl::StrCat(" --out=", path),
      "; otherwise stop the server, clear the identity's binding with fedsched-enroll "
      "--store_path=STORE --reset_identity=",
      identity, ", start the server again and then this device (it is issued a new credential)"));
}

absl::Status Client::SaveCredential(const std::string& credential) {
  const std::string path = CredentialPath();
  if (path.empty()) return absl::OkStatus();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  const std::string line = credential + "\n";
  const bool ok =
      fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot save the credential to ", path));
  return absl::OkStatus();
}

absl::Status Client::RegisterOnce() {
  v1::RegisterRequest request;
  request.set_identity(options_.config.identity());
  {
    absl::MutexLock lock(&mu_);
    request.set_credential(credential_);
  }
  *request.mutable_device() = options_.device;
  request.set_signing_public_key(signing_key_->public_key());
  // An app with the default trainer alone names none: the server offers it its config's job.
  for (const auto& [name, entry] : options_.trainers) request.add_trainers(name);
  for (const std::string& label : options_.labels) request.add_labels(label);
  v1::RegisterResponse response;
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  FEDSCHED_RETURN_IF_ERROR(
      FromGrpc(rpc()->stub->Register(&context, request, &response), "Register"));
  const v1::TransportConfig& server = response.transport();
  bool reconnect = false;
  {
    absl::MutexLock lock(&mu_);
    if (server.min_ping_interval_ms() > transport_.keepalive_time_ms()) {
      // Respect the server's minimum, or it would answer our pings with GOAWAY too_many_pings.
      transport_.set_keepalive_time_ms(server.min_ping_interval_ms());
      reconnect = true;
    }
    if (server.chunk_bytes() > 0 && server.chunk_bytes() < transport_.chunk_bytes()) {
      // The server bounds upload chunks by its own chunk size.
      transport_.set_chunk_bytes(server.chunk_bytes());
    }
  }
  if (reconnect) {
    FEDSCHED_LOG(info, "{}: keepalive raised to the server's minimum ping interval, {} ms",
                 options_.config.identity(), server.min_ping_interval_ms());
    FEDSCHED_RETURN_IF_ERROR(Connect());
  }
  if (!response.credential().empty()) {
    // Issued at this identity's first registration: without it the identity is lost.
    if (absl::Status saved = SaveCredential(response.credential()); !saved.ok()) {
      FEDSCHED_LOG(warn, "{}: {}", options_.config.identity(), saved.ToString());
    }
  }
  absl::MutexLock lock(&mu_);
  if (!response.credential().empty()) credential_ = response.credential();
  client_id_ = response.client_id();
  token_ = response.session_token();
  heartbeat_interval_ms_ = std::max<int64_t>(50, response.heartbeat_interval_ms());
  registered_ = true;
  reachable_ = true;
  FEDSCHED_LOG(info, "{} registered as {} with server {}", options_.config.identity(), client_id_,
               options_.config.server_address());
  return absl::OkStatus();
}

void Client::HeartbeatLoop() {
  while (true) {
    int64_t interval_ms;
    v1::HeartbeatRequest request;
    {
      absl::MutexLock lock(&mu_);
      interval_ms = heartbeat_interval_ms_;
      request.set_client_id(client_id_);
      request.set_session_token(token_);
      if (!registered_) request.clear_client_id();
    }
    if (!SleepFor(absl::Milliseconds(interval_ms))) return;
    if (request.client_id().empty() || !Eligible()) continue;  // ineligible: away
    {
      absl::MutexLock lock(&mu_);
      if (away_) continue;  // sent away by pace steering: the server expects silence
    }
    grpc::ClientContext context;
    SetUnaryDeadline(&context);
    v1::HeartbeatResponse response;
    const std::shared_ptr<ClientRpc> current = rpc();
    const absl::Time sent = clock_.Now();
    absl::Status s =
        FromGrpc(current->heartbeat_stub->Heartbeat(&context, request, &response), "Heartbeat");
    // A heartbeat slower than its interval eats into the server's patience (missed_heartbeats
    // x interval): say so, it is the first sign of a starved server or network.
    if (const absl::Duration took = clock_.Now() - sent; took > absl::Milliseconds(interval_ms)) {
      FEDSCHED_LOG(warn, "heartbeat took {} ms (interval {} ms): {}",
                   absl::ToInt64Milliseconds(took), interval_ms, s.ok() ? "OK" : s.ToString());
    }
    if (IsSessionLost(s)) {
      absl::MutexLock lock(&mu_);
      if (token_ == request.session_token()) registered_ = false;
    }
  }
}

absl::Status Client::Run() {
  heartbeat_thread_ = std::make_unique<std::thread>([this] { HeartbeatLoop(); });
  while (!stop_.HasBeenNotified()) {
    if (WaitWhileIneligible()) continue;
    absl::StatusOr<bool> registered = EnsureRegistered();
    if (!registered.ok()) {
      Stop();
      return registered.status();
    }
    if (!*registered) continue;
    absl::StatusOr<v1::PollTaskResponse> response = PollOnce();
    if (stop_.HasBeenNotified()) break;
    if (!response.ok()) {
      OnPollFailure(response.status());
      continue;
    }
    backoff_ = absl::Milliseconds(options_.config.backoff_initial_ms());
    if (OnPollAnswer(*response)) {
      Stop();
      return absl::OkStatus();
    }
  }
  return absl::CancelledError("client stopped");
}

bool Client::WaitWhileIneligible() {
  if (!Eligible()) {
    if (!waiting_for_eligibility_) {
      FEDSCHED_LOG(info, "{}: device not eligible (the app's conditions); not checking in",
                   options_.config.identity());
    }
    waiting_for_eligibility_ = true;
    SleepFor(options_.eligibility_check_interval);
    return true;
  }
  if (waiting_for_eligibility_) {
    FEDSCHED_LOG(info, "{}: device eligible again", options_.config.identity());
    waiting_for_eligibility_ = false;
  }
  return false;
}

absl::StatusOr<bool> Client::EnsureRegistered() {
  {
    absl::MutexLock lock(&mu_);
    if (registered_) return true;
  }
  absl::Status s = RegisterOnce();
  // A registration the server finds malformed stays so: retrying cannot help.
  if (absl::IsInvalidArgument(s)) return s;
  if (absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s)) {
    // The server refuses this device's credential: retrying cannot change that, only the
    // operator can (docs/guides/OPERATIONS.md "Re-enrolling a device").
    return CredentialRefused(s);
  }
  if (!s.ok()) {
    // Loud on the 1st, 2nd, 4th, 8th... failure in a row (with the backoff, about once per
    // backoff_max_ms at worst), so a wrong address or a down server shows without flooding.
    ++register_failures_;
    if ((register_failures_ & (register_failures_ - 1)) == 0) {
      FEDSCHED_LOG(warn, "{}: cannot register with {} ({} attempts so far): {}",
                   options_.config.identity(), endpoint(), register_failures_, s.ToString());
    } else {
      FEDSCHED_LOG(debug, "{}: register failed: {}", options_.config.identity(), s.ToString());
    }
    MaybeFailover(s);
    WaitForServer(NextBackoff());
    return false;
  }
  register_failures_ = 0;
  if (ever_registered_) {
    absl::MutexLock lock(&mu_);
    ++stats_.reconnects;
  }
  ever_registered_ = true;
  backoff_ = absl::Milliseconds(options_.config.backoff_initial_ms());
  return true;
}

absl::StatusOr<v1::PollTaskResponse> Client::PollOnce() {
  v1::PollTaskRequest poll;
  {
    absl::MutexLock lock(&mu_);
    poll.set_client_id(client_id_);
    poll.set_session_token(token_);
    DescribeHeld(held_, &poll);
  }
  poll.set_wait_ms(kPollWaitMs);
  v1::PollTaskResponse response;
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  {
    absl::MutexLock lock(&mu_);
    if (stop_.HasBeenNotified()) return absl::CancelledError("client stopped");
    poll_context_ = &context;
  }
  absl::Status s = FromGrpc(rpc()->stub->PollTask(&context, poll, &response), "PollTask");
  {
    absl::MutexLock lock(&mu_);
    poll_context_ = nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    reachable_ = s.ok();
  }
  if (!s.ok()) return s;
  return response;
}

bool Client::in_contact() const {
  absl::MutexLock lock(&mu_);
  return registered_ && reachable_;
}

void Client::OnPollFailure(const absl::Status& s) {
  if (IsSessionLost(s)) {
    absl::MutexLock lock(&mu_);
    registered_ = false;
    return;
  }
  FEDSCHED_LOG(debug, "{}: poll failed: {}", options_.config.identity(), s.ToString());
  if (MaybeFailover(s)) return;  // the next endpoint at once: the session is still valid
  WaitForServer(NextBackoff());
}

bool Client::OnPollAnswer(const v1::PollTaskResponse& response) {
  switch (response.result_case()) {
    case v1::PollTaskResponse::kFinished:
      FEDSCHED_LOG(info, "{}: the run is finished", options_.config.identity());
      return true;
    case v1::PollTaskResponse::kTask:
      HandleTask(response.task());
      return false;
    default:
      WaitAsPaced(response);
      return false;
  }
}

void Client::WaitAsPaced(const v1::PollTaskResponse& response) {
  if (response.has_prefetch_plan()) {
    if (LocalDataPlan* plan = PrefetchPlanOf(response.prefetch_job()); plan != nullptr) {
      plan->Prefetch(response.prefetch_plan());
    }
  }
  const int64_t wait_ms = std::clamp<int64_t>(response.retry_after_ms(), 10, kMaxPacedWaitMs);
  bool away;
  {
    absl::MutexLock lock(&mu_);
    away = wait_ms > heartbeat_interval_ms_;  // unpaced answers are at most one interval
    away_ = away;
    if (away) ++stats_.paced_waits;
  }
  SleepFor(absl::Milliseconds(wait_ms));
  if (away) {
    absl::MutexLock lock(&mu_);
    away_ = false;
  }
}

absl::Status Client::ReportTaskFailure(const v1::Task& task, absl::Status status,
                                       int64_t peak_bytes) {
  v1::ReportFailureRequest failure;
  if (IsOutOfMemory(status)) {
    failure.set_cause(v1::FAILURE_CAUSE_OUT_OF_MEMORY);
    failure.set_peak_memory_bytes(peak_bytes);
    failure.set_memory_budget_bytes(options_.device.memory_budget_bytes());
  }
  {
    absl::MutexLock lock(&mu_);
    failure.set_client_id(client_id_);
    failure.set_session_token(token_);
  }
  failure.set_task_id(task.task_id());
  failure.set_reason(std::string(status.message()));
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::ReportFailureResponse ignored;
  rpc()->stub->ReportFailure(&context, failure, &ignored);
  return status;
}

absl::StatusOr<Client::TaskRoute> Client::RouteTask(const v1::Task& task) {
  if (options_.trainers.empty()) return TaskRoute{options_.trainer, options_.data};
  auto named = options_.trainers.find(task.job());
  if (task.job().empty() || named == options_.trainers.end()) {
    named = task.model_architecture().empty() ? options_.trainers.end()
                                              : options_.trainers.find(task.model_architecture());
  }
  if (named == options_.trainers.end()) {
    // A task naming no job comes from a server without jobs: the app's default trainer's.
    if (task.job().empty() && options_.trainer != nullptr) {
      return TaskRoute{options_.trainer, options_.data};
    }
    return NoTrainerStatus(task.job(), task.model_architecture());
  }
  const JobTrainer& entry = named->second;
  if (entry.data != nullptr) return TaskRoute{entry.trainer, entry.data};
  // Per-job data state (e.g. the cache's importance) is keyed by the job, whichever key matched.
  FEDSCHED_ASSIGN_OR_RETURN(LocalDataPlan * data,
                            options_.data->ForJob(task.job().empty() ? named->first : task.job()));
  return TaskRoute{entry.trainer, data};
}

LocalDataPlan* Client::PrefetchPlanOf(const std::string& job) {
  if (options_.trainers.empty() || job.empty()) return options_.data;
  // The job's data as RouteTask picks it for a trainer named by the job; else ForJob's, keyed
  // by the job as RouteTask keys it (a trainer matched by architecture with data of its own is
  // not known from the job's name).
  auto named = options_.trainers.find(job);
  if (named != options_.trainers.end() && named->second.data != nullptr) {
    return named->second.data;
  }
  absl::StatusOr<LocalDataPlan*> plan = options_.data->ForJob(job);
  if (!plan.ok()) {
    FEDSCHED_LOG(debug, "no prefetch for job {}: {}", job, plan.status().ToString());
    return nullptr;
  }
  return *plan;
}

absl::Status Client::RunTask(const v1::Task& task) {
  // Before anything else: a task no trainer runs is neither downloaded nor trained.
  absl::StatusOr<TaskRoute> route = RouteTask(task);
  if (!route.ok()) return ReportTaskFailure(task, route.status());
  // A compression the SDK cannot honour (with secure aggregation or update dropout): never trained.
  if (absl::Status s = CheckUploadCompression(task); !s.ok()) return ReportTaskFailure(task, s);
  if (absl::Status s = BeginSecAgg(task); !s.ok()) return ReportTaskFailure(task, s);
  int64_t download_bytes = 0;
  double download_seconds = 0;
  FEDSCHED_ASSIGN_OR_RETURN(v1::Model global, Download(task, &download_bytes, &download_seconds));
  if (!Eligible()) return ReportTaskFailure(task, InterruptedStatus("after the download"));
  v1::UpdateMetrics metrics;
  EvaluateGlobal(task, *route->trainer, global, &metrics);
  FEDSCHED_ASSIGN_OR_RETURN(TrainedTask trained, TrainTask(task, *route, global));
  if (absl::Status s = route->data->Save(); !s.ok()) {
    FEDSCHED_LOG(warn, "could not save on-device state: {}", s.ToString());
  }
  AddTaskMetrics(task, trained, download_bytes, download_seconds, &metrics);
  // Delta = trained - global, tensor by tensor (the trainer keeps names and shapes).
  v1::Model delta = std::move(trained.result.trained);
  FEDSCHED_RETURN_IF_ERROR(SubtractGlobal(global, &delta));
  absl::Status uploaded = UploadPrivatized(task, delta, metrics);
  // An interrupted upload, or one the server refused (which fails the task there already; a
  // relay passes the report on to its root), is reported as the task's failure.
  if (IsInterruption(uploaded) || IsFinalTaskVerdict(uploaded)) {
    return ReportTaskFailure(task, uploaded);
  }
  return uploaded;
}

void Client::EvaluateGlobal(const v1::Task& task, Trainer& trainer, const v1::Model& global,
                            v1::UpdateMetrics* metrics) {
  if (!task.evaluate()) return;
  absl::StatusOr<EvalReport> eval = trainer.Evaluate(global);
  if (eval.ok() && eval->num_examples > 0) {
    metrics->set_eval_examples(eval->num_examples);
    metrics->set_eval_accuracy(eval->accuracy);
    metrics->set_eval_loss(eval->mean_loss);
  } else if (!eval.ok() && !absl::IsUnimplemented(eval.status())) {
    FEDSCHED_LOG(warn, "local evaluation failed: {}", eval.status().ToString());
  }
}

absl::StatusOr<Client::TrainedTask> Client::TrainTask(const v1::Task& task, const TaskRoute& route,
                                                      const v1::Model& global) {
  LocalDataPlan& data = *route.data;
  Trainer& trainer = *route.trainer;
  absl::StatusOr<std::vector<int64_t>> ids =
      data.PlanRound(task.cache_plan(), task.batch_size(), task.local_steps());
  TrainRequest request;
  request.global = &global;
  request.batch_size = task.batch_size();
  request.learning_rate = task.learning_rate();
  request.proximal_mu = task.proximal_mu();
  if (!ids.ok()) return ReportTaskFailure(task, ids.status());
  request.sample_ids = *std::move(ids);
  // Resource fit (docs/guides/RESOURCE_FIT.md): the trainer's accounting decides before training; a
  // trainer without one is measured (resident-set growth) and judged after.
  const int64_t budget = options_.device.memory_budget_bytes();
  int64_t peak = trainer.PeakMemoryBytes(request);
  if (budget > 0 && peak > budget) {
    return ReportTaskFailure(task, OutOfMemoryStatus(peak, budget), peak);
  }
  const ResidentSet rss_before = ReadResidentSet(/*reset_peak=*/peak == 0);
  const absl::Time train_start = clock_.Now();
  absl::StatusOr<TrainResult> result = trainer.Train(request, data.source());
  if (!result.ok()) return ReportTaskFailure(task, result.status());
  if (peak == 0) {
    const ResidentSet rss_after = ReadResidentSet(/*reset_peak=*/false);
    peak = std::max<int64_t>(
        0, std::max(rss_after.peak_bytes, rss_after.current_bytes) - rss_before.current_bytes);
    if (budget > 0 && peak > budget) {
      return ReportTaskFailure(task, OutOfMemoryStatus(peak, budget), peak);
    }
  }
  if (!Eligible()) return ReportTaskFailure(task, InterruptedStatus("after training"));
  data.ReportLosses(request.sample_ids, result->per_sample_losses, task.batch_size());
  TrainedTask trained;
  trained.io = data.TakeCounters();
  trained.train_seconds = absl::ToDoubleSeconds(clock_.Now() - train_start);
  trained.peak_bytes = peak;
  trained.result = *std::move(result);
  return trained;
}

void Client::AddTaskMetrics(const v1::Task& task, const TrainedTask& trained,
                            int64_t download_bytes, double download_seconds,
                            v1::UpdateMetrics* out) const {
  const TrainResult& result = trained.result;
  const RoundIoCounters& io = trained.io;
  double sum_sq = 0;
  for (float loss : result.per_sample_losses) sum_sq += static_cast<double>(loss) * loss;
  const double n = static_cast<double>(result.per_sample_losses.size());
  v1::UpdateMetrics& metrics = *out;
  metrics.set_num_examples(result.num_examples);
  metrics.set_train_seconds(trained.train_seconds);
  metrics.set_download_seconds(download_seconds);
  metrics.set_download_bytes(download_bytes);
  metrics.set_mean_loss(result.mean_loss);
  // Oort's utility |B| sqrt(mean squared loss) (OSDI 2021, section 4); noised in UploadPrivatized.
  metrics.set_statistical_utility(n > 0 ? n * std::sqrt(sum_sq / n) : 0.0);
  metrics.set_cache_hits(io.cache_hits);
  metrics.set_cache_misses(io.cache_misses);
  metrics.set_storage_bytes_read(io.storage_bytes_read);
  metrics.set_io_seconds(io.io_seconds);
  metrics.set_local_steps(task.local_steps());
  metrics.set_peak_memory_bytes(trained.peak_bytes);
  metrics.set_cache_storage_bytes(io.cache_bytes);
  metrics.set_compute_seconds(std::max(0.0, trained.train_seconds - io.io_seconds));
  metrics.set_memory_budget_bytes(options_.device.memory_budget_bytes());
  metrics.set_storage_budget_bytes(options_.device.storage_budget_bytes());
}

}  // namespace fedsched
