// fedsched-status --job against a stand-in Coordinator service on 127.0.0.1: the request names
// the job, and a server that does not know it (NOT_FOUND) is reported as "no job NAME".
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/cli/run_tool.h"

namespace fedsched {
namespace {

using ::testing::HasSubstr;

// Answers GetStatus for job "" (the config job) and "a" only, remembering the last job asked.
class StandInCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse*) override {
    absl::MutexLock lock(&mu_);
    last_job_ = request->job();
    if (!request->job().empty() && request->job() != "a") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown job " + request->job());
    }
    return grpc::Status::OK;
  }
  std::string last_job() const {
    absl::MutexLock lock(&mu_);
    return last_job_;
  }

 private:
  mutable absl::Mutex mu_;
  std::string last_job_ ABSL_GUARDED_BY(mu_) = "(none)";
};

class StatusJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  // Runs fedsched-status against the stand-in with `args`.
  fedsched::testing::ToolOutcome Status(const std::string& args) const {
    return fedsched::testing::RunTool(
        "fedsched-status", absl::StrCat("--server=127.0.0.1:", port_, " --rounds=0 ", args));
  }

  StandInCoordinator service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(StatusJobTest, TheRequestNamesTheJob) {
  const fedsched::testing::ToolOutcome none = Status("");
  EXPECT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(service_.last_job(), "");
  const fedsched::testing::ToolOutcome a = Status("--job=a");
  EXPECT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(service_.last_job(), "a");
}

TEST_F(StatusJobTest, AnUnknownJobIsReportedByName) {
  const fedsched::testing::ToolOutcome unknown = Status("--job=nope");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no job nope"));
  EXPECT_EQ(service_.last_job(), "nope");
}

}  // namespace
}  // namespace fedsched
