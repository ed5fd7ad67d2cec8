// Small Fashion-MNIST files for the simulator's tests (sim/mpi, sim/torch): the first 3,000
// training and 1,000 test images, written once per test process as plain IDX files, so that a
// TrainingLearner loads in milliseconds instead of decompressing all 70,000 images.
#ifndef FEDSCHED_TESTS_SIM_SUBSET_DATA_H_
#define FEDSCHED_TESTS_SIM_SUBSET_DATA_H_

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "models/idx.h"

namespace fedsched::testing {

// Writes `d` as plain IDX files (big-endian header; PixelToUnit inverts exactly).
inline void WriteIdx(const ImageDataset& d, const std::string& images, const std::string& labels) {
  auto be32 = [](std::ofstream& f, uint32_t v) {
    const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    f.write(b, 4);
  };
  std::ofstream fi(images, std::ios::binary);
  be32(fi, 0x803);
  be32(fi, static_cast<uint32_t>(d.size));
  be32(fi, d.rows);
  be32(fi, d.cols);
  for (float p : d.pixels) fi.put(static_cast<char>(std::lround(p * 255.0f)));
  std::ofstream fl(labels, std::ios::binary);
  be32(fl, 0x801);
  be32(fl, static_cast<uint32_t>(d.size));
  fl.write(reinterpret_cast<const char*>(d.labels.data()), d.size);
}

// The subset's files in dir(): train-images, train-labels, test-images, test-labels; removed
// at exit. Register once per test binary:
//   const auto* const kSubset = ::testing::AddGlobalTestEnvironment(new SubsetData);
class SubsetData : public ::testing::Environment {
 public:
  static std::string dir() { return dir_; }
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("fedsched_sim_subset_" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    auto train = LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels, 3000);
    auto test = LoadIdxDataset(kFashionMnistTestImages, kFashionMnistTestLabels, 1000);
    ASSERT_TRUE(train.ok() && test.ok()) << train.status() << test.status();
    WriteIdx(*train, dir_ + "/train-images", dir_ + "/train-labels");
    WriteIdx(*test, dir_ + "/test-images", dir_ + "/test-labels");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

 private:
  static inline std::string dir_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SIM_SUBSET_DATA_H_
