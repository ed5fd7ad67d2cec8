// The example job files of configs/jobs (docs/guides/JOBS.md): each parses as a JobSpec (unknown
// keys are errors) and passes the server's checks at submit (jobs::ValidateJobSpec).
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/jobs/job_spec.h"

namespace fedsched {
namespace {

TEST(JobFilesTest, ExamplesParseAndPassTheSubmitChecks) {
  const char* source = std::getenv("FEDSCHED_SOURCE_DIR");
  const std::string dir = std::string(source != nullptr ? source : ".") + "/configs/jobs";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().string());
    v1::JobSpec spec;
    ASSERT_OK(LoadTextConfig(entry.path().string(), &spec));
    EXPECT_OK(jobs::ValidateJobSpec(spec));
    // Small jobs that end by themselves, at a target the server evaluates.
    EXPECT_GT(spec.num_rounds(), 0);
    EXPECT_GT(spec.target_accuracy(), 0);
    EXPECT_EQ(spec.eval().mode(), v1::EVAL_MODE_SERVER);
    EXPECT_TRUE(std::filesystem::exists(spec.eval().test_images_path()));
    ++files;
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace fedsched
