// Synthetic data for the models tests.
#ifndef FEDSCHED_TESTS_CLIENT_MODELS_TEST_DATA_H_
#define FEDSCHED_TESTS_CLIENT_MODELS_TEST_DATA_H_

#include <cstdint>
#include <fstream>

#include "models/idx.h"
#include "models/rng.h"

namespace fedsched::testing {

// `n` 28 x 28 images of 10 classes (label i % 10): each class has a fixed random prototype;
// images are the prototype plus noise, quantised to multiples of 1/255 like real IDX data, so
// that they survive EncodeSample / DecodeSample exactly. Learnable but not trivially.
inline ImageDataset SyntheticDataset(int64_t n, uint64_t seed, double noise = 0.25) {
  Rng rng(seed);
  constexpr int kPixels = 784;
  std::vector<float> prototypes(kNumClasses * kPixels);
  for (float& p : prototypes) p = static_cast<float>(rng.Uniform());
  ImageDataset ds;
  ds.size = n;
  ds.rows = 28;
  ds.cols = 28;
  ds.labels.resize(n);
  ds.pixels.resize(n * kPixels);
  for (int64_t i = 0; i < n; ++i) {
    const int label = static_cast<int>(i % kNumClasses);
    ds.labels[i] = static_cast<uint8_t>(label);
    for (int j = 0; j < kPixels; ++j) {
      double v = prototypes[label * kPixels + j] + noise * rng.Normal();
      v = v < 0 ? 0 : (v > 1 ? 1 : v);
      ds.pixels[i * kPixels + j] = PixelToUnit(static_cast<uint8_t>(v * 255.0 + 0.5));
    }
  }
  return ds;
}

// True if the Fashion-MNIST files of the Debian package are installed.
inline bool HaveFashionMnist() {
  for (const char* path : {kFashionMnistTrainImages, kFashionMnistTrainLabels,
                           kFashionMnistTestImages, kFashionMnistTestLabels}) {
    if (!std::ifstream(path).good()) return false;
  }
  return true;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_CLIENT_MODELS_TEST_DATA_H_
