/* A federated-learning client written in C against fedsched's C API only (fedsched_c.h): it
 * keeps its own data (a strided partition of Fashion-MNIST read with zlib) and its own trainer
 * (multinomial logistic regression, 784 inputs x 10 classes, plain SGD), and lets the SDK do
 * registration, scheduling, the importance-aware sample cache, transfers and reconnects.
 *
 *   c_client SERVER_ADDRESS IDENTITY STATE_DIR PARTITION NUM_PARTITIONS [IMAGES_GZ LABELS_GZ]
 *
 * Use it with a server whose model is `architecture: "softmax"` (tensors dense/kernel [784, 10]
 * and dense/bias [10]); tests/integration/c_client_test.sh runs two of these against
 * fedsched-server. Exit status 0 once the server says the run is finished. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "client/c/fedsched_c.h"

enum { kPixels = 784, kClasses = 10, kSampleBytes = 1 + kPixels, kMaxSamples = 3000 };

/* The app's local data: encoded samples (label byte, then 784 pixel bytes). */
typedef struct app_data {
  unsigned char* samples; /* num_samples x kSampleBytes */
  int64_t num_samples;
} app_data;

static int read_exact(gzFile f, void* buf, unsigned len) { return gzread(f, buf, len) == (int)len; }

/* Loads every NUM_PARTITIONS-th image starting at PARTITION (at most kMaxSamples). */
static int load_partition(const char* images_path, const char* labels_path, int partition,
                          int num_partitions, app_data* out) {
  gzFile images = gzopen(images_path, "rb");
  gzFile labels = gzopen(labels_path, "rb");
  unsigned char header[16];
  unsigned char pixels[kPixels];
  unsigned char label;
  long i;
  int ok = images != NULL && labels != NULL && read_exact(images, header, 16) &&
           read_exact(labels, header, 8);
  out->samples = malloc((size_t)kMaxSamples * kSampleBytes);
  out->num_samples = 0;
  for (i = 0; ok && out->samples != NULL && out->num_samples < kMaxSamples; ++i) {
    if (!read_exact(images, pixels, kPixels) || !read_exact(labels, &label, 1)) break;
    if (i % num_partitions != partition) continue;
    out->samples[out->num_samples * kSampleBytes] = label;
    memcpy(out->samples + out->num_samples * kSampleBytes + 1, pixels, kPixels);
    out->num_samples++;
  }
  if (images != NULL) gzclose(images);
  if (labels != NULL) gzclose(labels);
  return ok && out->num_samples > 0;
}

static int64_t num_samples(void* context) { return ((app_data*)context)->num_samples; }

static fedsched_code read_sample(void* context, int64_t id, const uint8_t** data, size_t* size) {
  app_data* d = context;
  if (id < 0 || id >= d->num_samples) return FEDSCHED_OUT_OF_RANGE;
  *data = d->samples + id * kSampleBytes;
  *size = kSampleBytes;
  return FEDSCHED_OK;
}

static fedsched_tensor* find(fedsched_tensor* tensors, int32_t n, const char* name) {
  int32_t i;
  for (i = 0; i < n; ++i) {
    if (strcmp(tensors[i].name, name) == 0) return &tensors[i];
  }
  return NULL;
}

static fedsched_code fail(fedsched_error* error, fedsched_code code, const char* message) {
  snprintf(error->message, sizeof(error->message), "%s", message);
  return code;
}

/* One sample's forward pass: probabilities into prob[], returns the cross-entropy loss. */
static float forward(const float* w, const float* b, const float* x, int label, float* prob) {
  float max = -INFINITY, sum = 0.0f;
  int c, p;
  for (c = 0; c < kClasses; ++c) {
    float z = b[c];
    for (p = 0; p < kPixels; ++p) z += x[p] * w[p * kClasses + c];
    prob[c] = z;
    if (z > max) max = z;
  }
  for (c = 0; c < kClasses; ++c) {
    prob[c] = expf(prob[c] - max);
    sum += prob[c];
  }
  for (c = 0; c < kClasses; ++c) prob[c] /= sum;
  return -logf(prob[label] > 1e-12f ? prob[label] : 1e-12f);
}

/* SGD over the planned minibatches; per-sample losses from the forward pass before each step. */
static fedsched_code train(void* context, fedsched_train_request* req,
                           fedsched_sample_reader* reader, fedsched_train_result* result,
                           fedsched_error* error) {
  fedsched_tensor* kernel = find(req->trained, req->num_tensors, "dense/kernel");
  fedsched_tensor* bias = find(req->trained, req->num_tensors, "dense/bias");
  float* grad_w;
  float grad_b[kClasses], prob[kClasses], x[kPixels];
  double total = 0.0;
  int64_t start, k;
  (void)context;
  if (kernel == NULL || bias == NULL || kernel->size != kPixels * kClasses ||
      bias->size != kClasses) {
    return fail(error, FEDSCHED_INVALID_ARGUMENT,
                "expected a softmax model: dense/kernel [784, 10] and dense/bias [10]");
  }
  grad_w = calloc(kPixels * kClasses, sizeof(float));
  if (grad_w == NULL) return fail(error, FEDSCHED_RESOURCE_EXHAUSTED, "out of memory");
  for (start = 0; start < req->num_samples; start += req->batch_size) {
    int64_t end =
        start + req->batch_size < req->num_samples ? start + req->batch_size : req->num_samples;
    float scale = req->learning_rate / (float)(end - start);
    int c, p;
    memset(grad_w, 0, sizeof(float) * kPixels * kClasses);
    memset(grad_b, 0, sizeof(grad_b));
    for (k = start; k < end; ++k) {
      const uint8_t* bytes;
      size_t size;
      fedsched_code code = fedsched_sample_read(reader, req->sample_ids[k], &bytes, &size, error);
      if (code != FEDSCHED_OK || size != kSampleBytes) {
        free(grad_w);
        return code != FEDSCHED_OK ? code : fail(error, FEDSCHED_DATA_LOSS, "bad sample size");
      }
      for (p = 0; p < kPixels; ++p) x[p] = bytes[1 + p] / 255.0f;
      req->per_sample_losses[k] = forward(kernel->data, bias->data, x, bytes[0], prob);
      total += req->per_sample_losses[k];
      for (c = 0; c < kClasses; ++c) {
        float d = prob[c] - (c == bytes[0] ? 1.0f : 0.0f);
        grad_b[c] += d;
        for (p = 0; p < kPixels; ++p) grad_w[p * kClasses + c] += d * x[p];
      }
    }
    for (p = 0; p < kPixels * kClasses; ++p) kernel->data[p] -= scale * grad_w[p];
    for (c = 0; c < kClasses; ++c) bias->data[c] -= scale * grad_b[c];
  }
  free(grad_w);
  result->num_examples = req->num_samples;
  result->mean_loss = req->num_samples > 0 ? total / (double)req->num_samples : 0.0;
  return FEDSCHED_OK;
}

int main(int argc, char** argv) {
  const char* images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  const char* labels = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
  char config[1024];
  app_data data;
  fedsched_client_options options;
  fedsched_client* client = NULL;
  fedsched_error error;
  fedsched_client_stats stats;
  fedsched_code code;
  if (argc != 6 && argc != 8) {
    fprintf(stderr,
            "usage: %s SERVER_ADDRESS IDENTITY STATE_DIR PARTITION NUM_PARTITIONS "
            "[IMAGES_GZ LABELS_GZ]\n",
            argv[0]);
    return 2;
  }
  if (argc == 8) {
    images = argv[6];
    labels = argv[7];
  }
  if (atoi(argv[5]) <= 0 || atoi(argv[4]) < 0 || atoi(argv[4]) >= atoi(argv[5])) {
    fprintf(stderr, "c_client: PARTITION must be in [0, NUM_PARTITIONS)\n");
    return 2;
  }
  if (!load_partition(images, labels, atoi(argv[4]), atoi(argv[5]), &data)) {
    fprintf(stderr, "c_client: cannot read %s / %s\n", images, labels);
    return 1;
  }
  /* Text format of fedsched.v1.ClientConfig; the identity and paths come from the command line
   * and must not contain quotes. */
  snprintf(config, sizeof(config),
           "server_address: \"%s\" identity: \"%s\" state_dir: \"%s\" seed: %d", argv[1], argv[2],
           argv[3], 1 + atoi(argv[4]));
  memset(&options, 0, sizeof(options));
  options.config_textproto = config;
  options.context = &data;
  options.train = train;
  options.num_samples = num_samples;
  options.read_sample = read_sample;
  options.sample_bytes = kSampleBytes;
  if (fedsched_client_create(&options, &client, &error) != FEDSCHED_OK) {
    fprintf(stderr, "c_client: %s\n", error.message);
    free(data.samples);
    return 1;
  }
  printf("c_client %s: %lld local samples; C API version %d; running\n", argv[2],
         (long long)data.num_samples, FEDSCHED_C_API_VERSION);
  fflush(stdout);
  code = fedsched_client_run(client, &error);
  stats = fedsched_client_get_stats(client);
  printf("c_client %s: %s; %lld tasks completed, %lld failed (%lld refused), %lld reconnects\n",
         argv[2], code == FEDSCHED_OK ? "finished" : error.message,
         (long long)stats.tasks_completed, (long long)stats.tasks_failed,
         (long long)stats.tasks_refused, (long long)stats.reconnects);
  fedsched_client_destroy(client);
  free(data.samples);
  return code == FEDSCHED_OK ? 0 : 1;
}
