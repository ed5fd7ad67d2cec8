/* fedsched C API: the client SDK for apps that call native code through a C ABI (JNI on
 * Android, Swift on iOS, plain C on boards). It wraps fedsched::Client (client/sdk/client.h)
 * and its importance-aware sample cache (client/cache, FedCaSe SoCC 2024 section 4) behind
 * opaque handles and plain C types; no C++ type or exception crosses it.
 *
 * Use:
 *   1. fill a fedsched_client_options (config as protobuf text, your trainer and sample
 *      callbacks, your context pointer);
 *   2. fedsched_client_create() -> handle;
 *   3. fedsched_client_run() on a thread of yours: it registers, polls, downloads, calls your
 *      train callback, uploads, and returns once the server says the run is finished (or after
 *      fedsched_client_stop());
 *   4. fedsched_client_destroy().
 * A device of several jobs (docs/guides/JOBS.md "Devices and trainers") gives one train callback
 * per job name or model architecture in fedsched_client_options.trainers, and its labels in
 * fedsched_client_options.labels.
 * See examples/c_client/ for a complete program and docs/ARCHITECTURE.md ("Client SDK").
 *
 * Errors: every call that can fail returns a fedsched_code (0 = FEDSCHED_OK; the other values
 * are absl::StatusCode's numbers) and, when `error` is not NULL, fills it with the code and a
 * NUL-terminated message naming what was wrong (truncated to fit the buffer).
 *
 * Threading: a handle may be used from several threads as stated per call. Callbacks run on the
 * thread that called fedsched_client_run(), one at a time; they must not call
 * fedsched_client_run() or fedsched_client_destroy() on the same handle.
 */
#ifndef FEDSCHED_CLIENT_C_FEDSCHED_C_H_
#define FEDSCHED_CLIENT_C_FEDSCHED_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C API's version: major * 10000 + minor * 100 + patch. */
#define FEDSCHED_C_API_VERSION 200

/* Result codes: the same numbers as absl::StatusCode (and gRPC's status codes). */
typedef enum fedsched_code {
  FEDSCHED_OK = 0,
  FEDSCHED_CANCELLED = 1,
  FEDSCHED_UNKNOWN = 2,
  FEDSCHED_INVALID_ARGUMENT = 3,
  FEDSCHED_DEADLINE_EXCEEDED = 4,
  FEDSCHED_NOT_FOUND = 5,
  FEDSCHED_ALREADY_EXISTS = 6,
  FEDSCHED_PERMISSION_DENIED = 7,
  FEDSCHED_RESOURCE_EXHAUSTED = 8,
  FEDSCHED_FAILED_PRECONDITION = 9,
  FEDSCHED_ABORTED = 10,
  FEDSCHED_OUT_OF_RANGE = 11,
  FEDSCHED_UNIMPLEMENTED = 12,
  FEDSCHED_INTERNAL = 13,
  FEDSCHED_UNAVAILABLE = 14,
  FEDSCHED_DATA_LOSS = 15,
  FEDSCHED_UNAUTHENTICATED = 16
} fedsched_code;

/* An error's code and message. The caller owns it (e.g. on its stack). */
typedef struct fedsched_error {
  fedsched_code code;
  char message[512];
} fedsched_error;

/* One named float32 tensor of a model, row-major. `name` and `shape` are owned by the SDK and
 * valid for the duration of the callback that received them. `data` points to `size` floats
 * (size = product of shape; 1 for a scalar). */
typedef struct fedsched_tensor {
  const char* name;
  const int64_t* shape;
  int32_t rank;
  float* data;
  int64_t size;
} fedsched_tensor;

/* One round's local training work (TrainRequest of models/trainer.h). All pointers are owned by
 * the SDK and valid only during the train callback.
 *   global:      the downloaded global model (read-only), num_tensors tensors;
 *   trained:     the output model, pre-allocated with the same names and shapes as `global` and
 *                initialised to a copy of it: the trainer updates it in place;
 *   sample_ids:  num_samples local sample ids in training order (= batch_size * local steps;
 *                ids may repeat: the cache replicates hits); minibatch b is
 *                [b * batch_size, (b + 1) * batch_size);
 *   per_sample_losses: num_samples floats the trainer fills with each sample's loss, computed in
 *                the forward pass before the step (they drive the importance cache and never
 *                leave the device). */
typedef struct fedsched_train_request {
  const fedsched_tensor* global;
  fedsched_tensor* trained;
  int32_t num_tensors;
  const int64_t* sample_ids;
  int64_t num_samples;
  int32_t batch_size;
  float learning_rate;
  /* FedProx proximal coefficient mu (Li et al., MLSys 2020): add (mu/2)||w - w_global||^2. */
  float proximal_mu;
  float* per_sample_losses;
} fedsched_train_request;

/* What the trainer reports: examples processed and the mean loss over them. */
typedef struct fedsched_train_result {
  int64_t num_examples;
  double mean_loss;
} fedsched_train_result;

/* Opaque handle through which the train callback reads sample bytes (served from the SDK's
 * importance cache in RAM on a hit, from the sample store on the device's storage on a miss). */
typedef struct fedsched_sample_reader fedsched_sample_reader;

/* Reads sample `id` through the cache: on FEDSCHED_OK *data / *size point to its bytes, valid
 * until the next read on this reader or the end of the callback. Errors: OUT_OF_RANGE for an
 * id outside [0, number of samples); DATA_LOSS / NOT_FOUND when storage fails.
 * Thread-safety: only from the train callback's thread. */
fedsched_code fedsched_sample_read(fedsched_sample_reader* reader, int64_t id, const uint8_t** data,
                                   size_t* size, fedsched_error* error);

/* The app's trainer: trains request->trained (starting from the global weights) over the
 * request's samples read through `reader`, fills request->per_sample_losses and *result.
 * Return FEDSCHED_OK, or an error code with a message written to `error` (the task is then
 * reported to the server as failed). */
typedef fedsched_code (*fedsched_train_fn)(void* context, fedsched_train_request* request,
                                           fedsched_sample_reader* reader,
                                           fedsched_train_result* result, fedsched_error* error);

/* The app's local samples, copied once into the SDK's sample store under the config's state_dir
 * the first time the client is created there (or when their count changes):
 *   num_samples(context) -> number of samples N (ids 0 .. N-1);
 *   read_sample(context, id, &data, &size) -> FEDSCHED_OK with the sample's encoded bytes, valid
 *   until the next read_sample call. The encoding is the app's own (the trainer decodes it).
 * Called only during fedsched_client_create(). */
typedef int64_t (*fedsched_num_samples_fn)(void* context);
typedef fedsched_code (*fedsched_read_sample_fn)(void* context, int64_t id, const uint8_t** data,
                                                 size_t* size);

/* Device conditions (e.g. charging, unmetered network, idle, battery above a level): returns
 * nonzero while the app lets the SDK work. While it returns 0 the client does not check in, and
 * a task in flight is interrupted at its next stage and reported to the server as interrupted
 * (fedsched_client_stats.tasks_interrupted). Called from the SDK's threads (the one running
 * fedsched_client_run and its heartbeat thread): must be thread-safe and cheap. */
typedef int (*fedsched_eligible_fn)(void* context);

/* One of the app's trainers: the train callback for the tasks of one job or one model
 * architecture (docs/guides/JOBS.md "Devices and trainers"). */
typedef struct fedsched_job_trainer {
  /* The job name (a JobSpec's name) or the model architecture (e.g. "mlp", "softmax") whose
   * tasks `train` runs; a task goes to the trainer of its job, else of its model architecture.
   * Non-empty, NUL-terminated, unique within the options; copied by fedsched_client_create. */
  const char* name;
  fedsched_train_fn train;
  /* Handed to `train` as its context; NULL = fedsched_client_options.context. */
  void* context;
} fedsched_job_trainer;

/* Everything fedsched_client_create() needs. Zero-initialise it, then set the fields. */
typedef struct fedsched_client_options {
  /* fedsched.v1.ClientConfig in protobuf text format (server_address, identity, state_dir,
   * transport / TLS, backoff, bandwidth_kbps, storage_budget_bytes, ...; docs in
   * proto/fedsched/v1/config.proto). Unknown fields are errors. state_dir is required: the
   * sample store, the cache's importance state, the registration credential and the install's
   * identity live there (created 0700 if missing). Without an identity the client uses the one
   * in <state_dir>/identity, made at random when missing (docs/guides/SECURITY.md). */
  const char* config_textproto;
  /* Opaque pointer handed back to every callback. */
  void* context;
  /* The default trainer. Required unless `trainers` is given. It trains every task when there
   * are no `trainers`, else only tasks that name no job (from a server without jobs). */
  fedsched_train_fn train;
  fedsched_num_samples_fn num_samples;
  fedsched_read_sample_fn read_sample;
  /* Bytes of one encoded sample (reported to the server for cache planning; 0 = unknown). */
  int64_t sample_bytes;
  /* Optional (NULL = always eligible); see fedsched_eligible_fn. */
  fedsched_eligible_fn eligible;
  /* Optional: num_trainers trainers by job or model architecture (since API version 200). The
   * server then offers this device only the jobs they name; a task of a job none of them (and
   * not its model architecture) names is reported to the server as failed ("no trainer for job
   * X") and never trained (fedsched_client_stats.tasks_without_trainer). Each job keeps its own
   * sample-cache state under state_dir. NULL / 0 (default): `train` trains every task and the
   * device names no trainers (the server offers it only the job of its own config). */
  const fedsched_job_trainer* trainers;
  int32_t num_trainers;
  /* Optional: num_labels NUL-terminated, non-empty labels the device declares for jobs'
   * populations (JobPopulation.required_labels), copied by fedsched_client_create. NULL / 0:
   * none. */
  const char* const* labels;
  int32_t num_labels;
} fedsched_client_options;

typedef struct fedsched_client fedsched_client;

/* Creates a client: parses the config, copies the app's samples into the sample store (first
 * run) and opens the importance cache. On success *out is a new handle the caller owns (free it
 * with fedsched_client_destroy). Errors: INVALID_ARGUMENT (NULL options, out or callback, bad
 * config text, missing state_dir, a read_sample failure names the id, a trainer entry with a
 * NULL or empty or repeated name or a NULL train, a NULL or empty label, a negative count),
 * FAILED_PRECONDITION (state_dir unsafe: a symlink or another user's), INTERNAL (file system). */
fedsched_code fedsched_client_create(const fedsched_client_options* options, fedsched_client** out,
                                     fedsched_error* error);

/* Participates until the server reports the run finished (FEDSCHED_OK) or fedsched_client_stop
 * is called (FEDSCHED_CANCELLED). Survives disconnects and server restarts. Errors of a single
 * task (including a failing train callback) are reported to the server, not returned; after a
 * failed task the client backs off (exponential, with jitter), and a task whose update the
 * server refused is never trained again. Blocks; call it from one thread at a time. */
fedsched_code fedsched_client_run(fedsched_client* client, fedsched_error* error);

/* Asks fedsched_client_run to return soon. Safe from any thread, including a signal-free
 * watchdog; a no-op when run is not active. */
void fedsched_client_stop(fedsched_client* client);

/* Counters of the client's life so far. Safe from any thread. */
typedef struct fedsched_client_stats {
  int64_t tasks_completed;
  int64_t tasks_failed;
  int64_t reconnects;
  /* Tasks given up because the eligible callback turned 0 mid-task. */
  int64_t tasks_interrupted;
  /* Tasks ended by a final verdict, e.g. the server refused the update: never trained or
   * uploaded again (also counted in tasks_failed). */
  int64_t tasks_refused;
  /* Tasks of a job no trainer of the app runs: reported failed, never trained (also counted in
   * tasks_failed; since API version 200). */
  int64_t tasks_without_trainer;
} fedsched_client_stats;
fedsched_client_stats fedsched_client_get_stats(const fedsched_client* client);

/* Frees the handle (NULL is allowed). fedsched_client_run must have returned. */
void fedsched_client_destroy(fedsched_client* client);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FEDSCHED_CLIENT_C_FEDSCHED_C_H_ */
