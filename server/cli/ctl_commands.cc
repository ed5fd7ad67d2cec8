#include "server/cli/ctl_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/config.h"
#include "fedsched/v1/jobs.grpc.pb.h"
#include "server/cli/job_format.h"

namespace fedsched::cli {

const char kCtlUsageText[] =
    "submits and controls a running server's jobs (docs/guides/JOBS.md).\n"
    "\n"
    "  fedsched-ctl [flags] submit FILE        submit a job (a JobSpec in text format)\n"
    "  fedsched-ctl [flags] list [--all]       running, paused and waiting jobs (--all: ended "
    "too)\n"
    "  fedsched-ctl [flags] status JOB         one job's record\n"
    "  fedsched-ctl [flags] watch JOB          a line per round as it ends, then the final state\n"
    "  fedsched-ctl [flags] cancel JOB [--reason=TEXT]\n"
    "  fedsched-ctl [flags] pause JOB\n"
    "  fedsched-ctl [flags] resume JOB\n"
    "\n"
    "Connection: --server=host:port, --token_file=<store_path>/operator_token, and for TLS --ca\n"
    "(mutual TLS: --cert and --key; a certificate listed in jobs.operator_cert_sha256 needs no\n"
    "token). --json prints JSON, one object per line (a JobRecord; watch: a WatchJobEvent).\n"
    "\n"
    "Exit codes: 0 ok; 1 other failure (server unreachable, deadline); 2 usage error or a job\n"
    "file that cannot be read or parsed; 3 no such job; 4 refused (invalid spec, name in use,\n"
    "not allowed in the job's state, too many jobs); 5 unauthenticated; 6 watch: the job failed\n"
    "or was cancelled.";

int CtlExitCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kCtlOk;
    case grpc::StatusCode::NOT_FOUND:
      return kCtlNotFound;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kCtlRefused;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kCtlUnauthenticated;
    default:
      return kCtlOther;
  }
}

namespace {

// One command's context: its options, stub and streams.
class Ctl {
 public:
  Ctl(const CtlOptions& options, const OperatorChannel& channel, std::ostream& out,
      std::ostream& err)
      : options_(options),
        channel_(channel),
        stub_(v1::JobService::NewStub(channel.channel)),
        out_(out),
        err_(err) {}

  int Submit(const std::string& path) {
    v1::SubmitJobRequest request;
    if (absl::Status s = LoadTextConfig(path, request.mutable_spec()); !s.ok()) {
      return Usage(std::string(s.message()));
    }
    v1::JobRecord job;
    grpc::ClientContext context;
    channel_.Prepare(&context, options_.deadline);
    return Record(stub_->SubmitJob(&context, request, &job), "submit " + path, job);
  }

  int List() {
    v1::ListJobsRequest request;
    request.set_include_ended(options_.all);
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    channel_.Prepare(&context, options_.deadline);
    grpc::Status s = stub_->ListJobs(&context, request, &response);
    if (!s.ok()) return Fail("list", s);
    if (options_.json) {
      for (const v1::JobRecord& job : response.jobs()) out_ << ToJsonLine(job);
    } else if (response.jobs().empty() && !options_.all) {
      out_ << "no running jobs (--all lists ended ones too)\n";
    } else {
      out_ << FormatJobTable({response.jobs().begin(), response.jobs().end()});
    }
    return kCtlOk;
  }

  // status, cancel, pause, resume: one JobRequest, one JobRecord back.
  int OnJob(const std::string& command, const std::string& name) {
    using Method = grpc::Status (v1::JobService::Stub::*)(grpc::ClientContext*,
                                                          const v1::JobRequest&, v1::JobRecord*);
    static const auto* const kMethods =
        new absl::flat_hash_map<std::string, Method>{{"status", &v1::JobService::Stub::GetJob},
                                                     {"cancel", &v1::JobService::Stub::CancelJob},
                                                     {"pause", &v1::JobService::Stub::PauseJob},
                                                     {"resume", &v1::JobService::Stub::ResumeJob}};
    v1::JobRequest request;
    request.set_name(name);
    if (command == "cancel") request.set_reason(options_.reason);
    v1::JobRecord job;
    grpc::ClientContext context;
    channel_.Prepare(&context, options_.deadline);
    grpc::Status s = (stub_.get()->*kMethods->at(command))(&context, request, &job);
    return Record(s, command + " " + name, job);
  }

  int Watch(const std::string& name) {
    v1::WatchJobRequest request;
    request.set_name(name);
    request.set_from_round(options_.from_round);
    grpc::ClientContext context;
    channel_.Prepare(&context, absl::InfiniteDuration());
    std::unique_ptr<grpc::ClientReader<v1::WatchJobEvent>> reader =
        stub_->WatchJob(&context, request);
    v1::WatchJobEvent event;
    v1::JobRecord last;
    while (reader->Read(&event)) {
      if (options_.json) {
        out_ << ToJsonLine(event);
      } else if (event.has_round()) {
        out_ << FormatRoundLine(event.round());
      } else {
        out_ << FormatJobStateLine(event.job());
      }
      out_.flush();
      if (event.has_job()) last = event.job();
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Fail("watch " + name, s);
    if (last.state() == v1::JOB_STATE_FINISHED) return kCtlOk;
    if (JobEnded(last.state())) return kCtlJobNotFinished;
    err_ << "fedsched-ctl: watch " << name << ": the stream ended before the job did\n";
    return kCtlOther;
  }

  int Usage(const std::string& message) {
    err_ << "fedsched-ctl: " << message << "\n";
    return kCtlUsage;
  }

 private:
  int Fail(const std::string& what, const grpc::Status& s) {
    err_ << "fedsched-ctl: " << what << ": " << s.error_message() << "\n";
    return CtlExitCode(s.error_code());
  }

  int Record(const grpc::Status& s, const std::string& what, const v1::JobRecord& job) {
    if (!s.ok()) return Fail(what, s);
    out_ << (options_.json ? ToJsonLine(job) : FormatJobDetail(job));
    return kCtlOk;
  }

  const CtlOptions& options_;
  const OperatorChannel& channel_;
  std::unique_ptr<v1::JobService::Stub> stub_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace

int RunCtlCommand(const std::vector<std::string>& args, const CtlOptions& options,
                  const OperatorChannel& channel, std::ostream& out, std::ostream& err) {
  Ctl ctl(options, channel, out, err);
  if (args.empty()) return ctl.Usage("no command (see --help)");
  const std::string& command = args[0];
  if (command == "list") {
    if (args.size() != 1) return ctl.Usage("list takes no operand");
    return ctl.List();
  }
  const bool known = command == "submit" || command == "status" || command == "watch" ||
                     command == "cancel" || command == "pause" || command == "resume";
  if (!known) return ctl.Usage("unknown command '" + command + "' (see --help)");
  if (args.size() != 2) {
    return ctl.Usage(command + " takes one operand: " + (command == "submit" ? "FILE" : "JOB"));
  }
  if (command == "submit") return ctl.Submit(args[1]);
  if (command == "watch") return ctl.Watch(args[1]);
  return ctl.OnJob(command, args[1]);
}

}  // namespace fedsched::cli
