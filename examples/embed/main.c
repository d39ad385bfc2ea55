/* Trains the MLP example's bundle from C through Kiln's C API, with its own
 * data loop: a synthetic classification set (a fixed random linear teacher
 * labels random features), a checkpoint of every parameter and optimizer
 * state after training, and a second session restored from it that must
 * compute the same loss. Exits 0 when the loss fell to under half its first
 * value and the restored session agrees.
 *
 *   embed BUNDLE.kiln CHECKPOINT */
#include <kiln/runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kFeatures = 32, kClasses = 10, kBatch = 32, kSteps = 200 };

static int check(kiln_status_t status, const char *what) {
  if (status == KILN_OK)
    return 0;
  fprintf(stderr, "embed: %s: %s: %s\n", what, kiln_status_name(status),
          kiln_status_message());
  return 1;
}

/* A small deterministic generator (xorshift64*), uniform in [-1, 1). */
static uint64_t state = 0x9E3779B97F4A7C15ull;
static float uniform(void) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  uint64_t bits = state * 2685821657736338717ull;
  return (float)((bits >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

static float teacher[kFeatures][kClasses];

/* One batch: features and the teacher's argmax class. */
static void make_batch(float *input, int64_t *labels) {
  for (int i = 0; i < kBatch; ++i) {
    float best = -1e30f;
    for (int f = 0; f < kFeatures; ++f)
      input[i * kFeatures + f] = uniform();
    for (int c = 0; c < kClasses; ++c) {
      float score = 0;
      for (int f = 0; f < kFeatures; ++f)
        score += input[i * kFeatures + f] * teacher[f][c];
      if (score > best) {
        best = score;
        labels[i] = c;
      }
    }
  }
}

/* The outputs of `entry`, each in a buffer of its own; the loss is "loss". */
typedef struct {
  kiln_tensor_t tensors[8];
  size_t count;
  float *loss;
} outputs_t;

static int prepare_outputs(const kiln_bundle_t *bundle, const char *entry,
                           outputs_t *out) {
  size_t index;
  kiln_entry_point_info_t info;
  if (check(kiln_bundle_find_entry_point(bundle, entry, &index), entry) ||
      check(kiln_bundle_get_entry_point(bundle, index, &info), entry))
    return 1;
  if (info.output_count > 8) {
    fprintf(stderr, "embed: %s has too many outputs\n", entry);
    return 1;
  }
  out->count = info.output_count;
  out->loss = NULL;
  for (size_t i = 0; i < info.output_count; ++i) {
    kiln_tensor_info_t t;
    if (check(kiln_bundle_get_entry_point_output(bundle, index, i, &t),
              "output"))
      return 1;
    kiln_tensor_t *tensor = &out->tensors[i];
    tensor->name = t.name;
    tensor->element_type = t.element_type;
    tensor->rank = t.rank;
    tensor->shape = t.shape;
    tensor->byte_size = t.byte_size;
    tensor->data = aligned_alloc(64, (t.byte_size + 63) / 64 * 64);
    if (strcmp(t.name, "loss") == 0)
      out->loss = tensor->data;
  }
  if (!out->loss) {
    fprintf(stderr, "embed: %s has no output 'loss'\n", entry);
    return 1;
  }
  return 0;
}

static int run(kiln_session_t *session, const char *entry, float *input,
               int64_t *labels, outputs_t *out, float *loss) {
  static const int64_t input_shape[] = {kBatch, kFeatures};
  static const int64_t label_shape[] = {kBatch};
  kiln_tensor_t inputs[2] = {{"input", KILN_ELEMENT_TYPE_F32, 2, input_shape,
                              input, sizeof(float) * kBatch * kFeatures},
                             {"labels", KILN_ELEMENT_TYPE_I64, 1, label_shape,
                              labels, sizeof(int64_t) * kBatch}};
  if (check(
          kiln_session_run(session, entry, inputs, 2, out->tensors, out->count),
          entry))
    return 1;
  *loss = *out->loss;
  return 0;
}

/* Writes (or reads back into `session`) every parameter: name, size, bytes. */
static int save_checkpoint(const kiln_bundle_t *bundle, kiln_session_t *session,
                           const char *path) {
  kiln_bundle_info_t info;
  FILE *file = fopen(path, "wb");
  if (!file || check(kiln_bundle_get_info(bundle, &info), "bundle info")) {
    fprintf(stderr, "embed: cannot write %s\n", path);
    return 1;
  }
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t p;
    if (check(kiln_bundle_get_parameter(bundle, i, &p), "parameter"))
      return 1;
    void *data = malloc(p.tensor.byte_size);
    if (check(kiln_session_get_parameter(session, p.tensor.name, data,
                                         p.tensor.byte_size),
              p.tensor.name))
      return 1;
    uint64_t size = p.tensor.byte_size;
    fwrite(&size, sizeof size, 1, file);
    fwrite(data, 1, p.tensor.byte_size, file);
    free(data);
  }
  return fclose(file) != 0;
}

static int load_checkpoint(const kiln_bundle_t *bundle, kiln_session_t *session,
                           const char *path) {
  kiln_bundle_info_t info;
  FILE *file = fopen(path, "rb");
  if (!file || check(kiln_bundle_get_info(bundle, &info), "bundle info")) {
    fprintf(stderr, "embed: cannot read %s\n", path);
    return 1;
  }
  for (size_t i = 0; i < info.parameter_count; ++i) {
    kiln_parameter_info_t p;
    uint64_t size = 0;
    if (check(kiln_bundle_get_parameter(bundle, i, &p), "parameter") ||
        fread(&size, sizeof size, 1, file) != 1 || size != p.tensor.byte_size) {
      fprintf(stderr, "embed: %s does not match the bundle\n", path);
      return 1;
    }
    void *data = malloc(size);
    if (fread(data, 1, size, file) != size ||
        check(kiln_session_set_parameter(session, p.tensor.name, data, size),
              p.tensor.name))
      return 1;
    free(data);
  }
  fclose(file);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: embed BUNDLE.kiln CHECKPOINT\n");
    return 2;
  }
  for (int f = 0; f < kFeatures; ++f)
    for (int c = 0; c < kClasses; ++c)
      teacher[f][c] = uniform();

  kiln_bundle_t *bundle = NULL;
  kiln_session_t *session = NULL;
  if (check(kiln_bundle_open(argv[1], &bundle), argv[1]) ||
      check(kiln_session_create(bundle, NULL, &session), "session"))
    return 1;
  outputs_t train, eval;
  if (prepare_outputs(bundle, "train_step", &train) ||
      prepare_outputs(bundle, "eval_step", &eval))
    return 1;

  float *input = aligned_alloc(64, sizeof(float) * kBatch * kFeatures);
  int64_t *labels = aligned_alloc(64, sizeof(int64_t) * kBatch);
  float first = 0, last = 0;
  for (int step = 0; step < kSteps; ++step) {
    make_batch(input, labels);
    float loss;
    if (run(session, "train_step", input, labels, &train, &loss))
      return 1;
    if (step == 0)
      first = loss;
    last = loss;
    if (step % 40 == 0 || step == kSteps - 1)
      printf("step %d loss %.6f\n", step + 1, loss);
  }
  if (save_checkpoint(bundle, session, argv[2]))
    return 1;

  /* A held-out batch, evaluated by the trained session and by a new one
   * restored from the checkpoint. */
  make_batch(input, labels);
  float trained, restored;
  kiln_session_t *second = NULL;
  if (run(session, "eval_step", input, labels, &eval, &trained) ||
      check(kiln_session_create(bundle, NULL, &second), "session") ||
      load_checkpoint(bundle, second, argv[2]) ||
      run(second, "eval_step", input, labels, &eval, &restored))
    return 1;
  printf("held-out loss %.6f, restored from %s %.6f\n", trained, argv[2],
         restored);
  kiln_session_release(second);
  kiln_session_release(session);
  kiln_bundle_release(bundle);
  if (!(last < 0.5f * first)) {
    fprintf(stderr, "embed: the loss did not fall (%.6f -> %.6f)\n", first,
            last);
    return 1;
  }
  if (trained != restored) {
    fprintf(stderr, "embed: the restored session computes another loss\n");
    return 1;
  }
  printf("ok: loss %.6f -> %.6f\n", first, last);
  return 0;
}
