// Kernels of the runtime tests, in the calling convention of compiled Kiln
// code: `void kernel(void **buffers)`, one pointer per buffer of the command.
// Compiled at test time with the system C compiler into a shared object.
#include <stdint.h>

// The collectives of libkilnrt (kiln/abi/collectives.h), which loads this code.
int64_t kiln_collective_all_reduce_mean_f32_begin(float *data, int64_t count);
void kiln_collective_wait(int64_t request);

// y = x + 1 over 4 floats. Buffers: x (input), y (output).
void add_one(void **buffers) {
  const float *x = buffers[0];
  float *y = buffers[1];
  for (int i = 0; i < 4; ++i)
    y[i] = x[i] + 1.0f;
}

// t = x * w over 4 floats. Buffers: x (input), w (parameter), t (arena).
void mul_param(void **buffers) {
  const float *x = buffers[0], *w = buffers[1];
  float *t = buffers[2];
  for (int i = 0; i < 4; ++i)
    t[i] = x[i] * w[i];
}

// y = t + b over 4 floats. Buffers: t (arena), b (parameter), y (output).
void add_param(void **buffers) {
  const float *t = buffers[0], *b = buffers[1];
  float *y = buffers[2];
  for (int i = 0; i < 4; ++i)
    y[i] = t[i] + b[i];
}

// out = flag ? 2 * n : -n over 3 elements. Buffers: n (i64 input), flag
// (bool input), out (f64 output).
void select_scale(void **buffers) {
  const int64_t *n = buffers[0];
  const uint8_t *flag = buffers[1];
  double *out = buffers[2];
  for (int i = 0; i < 3; ++i)
    out[i] = flag[i] ? 2.0 * (double)n[i] : -(double)n[i];
}

// acc += x; y = acc over 4 floats, updating the parameter in place as a
// training step does. Buffers: x (input), acc (parameter), y (output).
void accumulate(void **buffers) {
  const float *x = buffers[0];
  float *acc = buffers[1], *y = buffers[2];
  for (int i = 0; i < 4; ++i) {
    acc[i] += x[i];
    y[i] = acc[i];
  }
}

// The toy training step of the "train" bundles (TestBundles.h), on a batch
// of 3 f32 samples. Buffers: x (input), w (parameter), step and acc
// (optimizer state), loss, lr and grad_norm (outputs). The loss is the sum of
// the batch, so it tells which samples the batch holds; w accumulates every
// sample seen, through acc for the micro-batches of accumulate_step.
void toy_train_step(void **buffers) {
  const float *x = buffers[0];
  float *w = buffers[1], *step = buffers[2], *acc = buffers[3];
  float *loss = buffers[4], *lr = buffers[5], *grad_norm = buffers[6];
  float sum = x[0] + x[1] + x[2];
  *step += 1.0f;
  *lr = 0.5f / *step;
  *grad_norm = *acc + sum;
  *w += *acc + sum;
  *acc = 0.0f;
  *loss = sum;
}

// accumulate_step of the toy: acc += sum(x). Buffers: x (input), acc
// (optimizer state), loss (output).
void toy_accumulate_step(void **buffers) {
  const float *x = buffers[0];
  float *acc = buffers[1], *loss = buffers[2];
  float sum = x[0] + x[1] + x[2];
  *acc += sum;
  *loss = sum;
}

// The data-parallel toy training step of the "train-dp" bundles, on a batch
// of `batch` f32 samples, as kilnc --data-parallel makes a step: its
// "gradients" (the batch's mean and mean square) and its loss (the mean) are
// averaged over the ranks, two all-reduces in flight at once, before the
// update. Buffers: x (input), w (parameter f32[2]), step (optimizer state),
// loss, lr and grad_norm (outputs).
static void toy_dp_train_step(void **buffers, int batch) {
  const float *x = buffers[0];
  float *w = buffers[1], *step = buffers[2];
  float *loss = buffers[3], *lr = buffers[4], *grad_norm = buffers[5];
  float grad[2] = {0.0f, 0.0f}, mean;
  for (int i = 0; i < batch; ++i) {
    grad[0] += x[i];
    grad[1] += x[i] * x[i];
  }
  grad[0] /= (float)batch;
  grad[1] /= (float)batch;
  mean = grad[0];
  int64_t gradients = kiln_collective_all_reduce_mean_f32_begin(grad, 2);
  int64_t lossRequest = kiln_collective_all_reduce_mean_f32_begin(&mean, 1);
  kiln_collective_wait(lossRequest);
  kiln_collective_wait(gradients);
  w[0] += grad[0];
  w[1] += grad[1];
  *step += 1.0f;
  *lr = 0.5f / *step;
  *grad_norm = grad[1];
  *loss = mean;
}

void toy_dp_train_step_2(void **buffers) { toy_dp_train_step(buffers, 2); }
void toy_dp_train_step_4(void **buffers) { toy_dp_train_step(buffers, 4); }
