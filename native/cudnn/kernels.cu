#include "kernels.h"

#include <cfloat>

#include "check.h"

namespace ac::cudnn {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);  // grid-stride beyond that
}

#define GRID_STRIDE(i, count) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (count); i += int64_t{blockDim.x} * gridDim.x)

__global__ void normalise_kernel(const uint8_t* x, float* y, int64_t count, int channels, int64_t hw,
                                 const float* mean, const float* std) {
  const float inv255 = 1.0f / 255.0f;
  GRID_STRIDE(i, count) {
    const int c = static_cast<int>((i / hw) % channels);
    y[i] = __fdiv_rn(__fsub_rn(__fmul_rn(static_cast<float>(x[i]), inv255), mean[c]), std[c]);
  }
}

__global__ void relu_kernel(float* y, int64_t count) {
  GRID_STRIDE(i, count) y[i] = fmaxf(y[i], 0.0f);
}

__global__ void relu_backward_kernel(float* dy, const float* y, int64_t count) {
  GRID_STRIDE(i, count) if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}

__global__ void add_relu_kernel(float* y, const float* skip, int64_t count) {
  GRID_STRIDE(i, count) y[i] = fmaxf(y[i] + skip[i], 0.0f);
}

__global__ void add_kernel(float* a, const float* b, int64_t count) {
  GRID_STRIDE(i, count) a[i] += b[i];
}

// One warp per (n, c) plane.
__global__ void global_avg_pool_kernel(const float* x, float* y, int64_t nc, int hw) {
  const int64_t plane = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (plane >= nc) return;
  float sum = 0.0f;
  for (int i = lane; i < hw; i += 32) sum += x[plane * hw + i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) y[plane] = sum / static_cast<float>(hw);
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t count, int hw) {
  GRID_STRIDE(i, count) dx[i] = dy[i / hw] / static_cast<float>(hw);
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t count, int k) {
  GRID_STRIDE(i, count) y[i] += bias[i % k];
}

__global__ void column_sums_kernel(const float* dy, float* db, int64_t n, int k) {
  GRID_STRIDE(j, k) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dy[i * k + j];
    db[j] = sum;
  }
}

// One block per row. (value, index) reductions keep the first maximum on ties, as torch.argmax.
__global__ void softmax_cross_entropy_kernel(const float* logits, const int64_t* labels, int64_t n, int k,
                                             float* loss, int* correct, float* dlogits) {
  __shared__ float s_val[kThreads];
  __shared__ int s_idx[kThreads];
  __shared__ float s_sum[kThreads];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * k;
  float best = -FLT_MAX;
  int best_i = k;
  for (int j = threadIdx.x; j < k; j += blockDim.x)
    if (x[j] > best || (x[j] == best && j < best_i)) best = x[j], best_i = j;
  s_val[threadIdx.x] = best;
  s_idx[threadIdx.x] = best_i;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float v = s_val[threadIdx.x + stride];
      const int j = s_idx[threadIdx.x + stride];
      if (v > s_val[threadIdx.x] || (v == s_val[threadIdx.x] && j < s_idx[threadIdx.x]))
        s_val[threadIdx.x] = v, s_idx[threadIdx.x] = j;
    }
    __syncthreads();
  }
  const float max = s_val[0];
  float sum = 0.0f;
  for (int j = threadIdx.x; j < k; j += blockDim.x) sum += expf(x[j] - max);
  s_sum[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s_sum[threadIdx.x] += s_sum[threadIdx.x + stride];
    __syncthreads();
  }
  const float log_sum = logf(s_sum[0]);
  const int64_t label = labels[row];
  if (threadIdx.x == 0) {
    loss[row] = (max + log_sum) - x[label];
    correct[row] = s_idx[0] == label;
  }
  if (dlogits) {
    const float scale = 1.0f / static_cast<float>(n);
    for (int j = threadIdx.x; j < k; j += blockDim.x)
      dlogits[row * k + j] = (expf(x[j] - max - log_sum) - (j == label ? 1.0f : 0.0f)) * scale;
  }
}

__global__ void accumulate_batch_kernel(const float* loss, const int* correct, int64_t n, float* mean,
                                        double* loss_sum, long long* correct_sum) {
  float total = 0.0f;
  long long right = 0;
  for (int64_t i = 0; i < n; ++i) total += loss[i], right += correct[i];
  const float m = total / static_cast<float>(n);
  *mean = m;
  *loss_sum += static_cast<double>(m) * static_cast<double>(n);
  *correct_sum += right;
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t count, float lr, float momentum,
                           float weight_decay) {
  GRID_STRIDE(i, count) {
    float d = g[i];
    if (weight_decay != 0.0f) d = __fadd_rn(d, __fmul_rn(weight_decay, p[i]));
    if (momentum != 0.0f) {
      d = __fadd_rn(__fmul_rn(momentum, buf[i]), d);
      buf[i] = d;
    }
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
  }
}

}  // namespace

void normalise_u8(const uint8_t* x, float* y, int64_t n, int channels, int64_t hw, const float* mean,
                  const float* std, cudaStream_t stream) {
  const int64_t count = n * channels * hw;
  normalise_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, count, channels, hw, mean, std);
  KERNEL_CHECK("input normalisation");
}

void relu(float* y, int64_t count, cudaStream_t stream, const std::string& where) {
  relu_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, count);
  KERNEL_CHECK(where);
}

void relu_backward(float* dy, const float* y, int64_t count, cudaStream_t stream, const std::string& where) {
  relu_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dy, y, count);
  KERNEL_CHECK(where);
}

void add_relu(float* y, const float* skip, int64_t count, cudaStream_t stream, const std::string& where) {
  add_relu_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, skip, count);
  KERNEL_CHECK(where);
}

void add(float* a, const float* b, int64_t count, cudaStream_t stream, const std::string& where) {
  add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(a, b, count);
  KERNEL_CHECK(where);
}

void global_avg_pool(const float* x, float* y, int64_t nc, int hw, cudaStream_t stream, const std::string& where) {
  global_avg_pool_kernel<<<blocks_for(nc * 32), kThreads, 0, stream>>>(x, y, nc, hw);
  KERNEL_CHECK(where);
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t nc, int hw, cudaStream_t stream,
                              const std::string& where) {
  global_avg_pool_backward_kernel<<<blocks_for(nc * hw), kThreads, 0, stream>>>(dy, dx, nc * hw, hw);
  KERNEL_CHECK(where);
}

void add_bias(float* y, const float* bias, int64_t n, int k, cudaStream_t stream, const std::string& where) {
  add_bias_kernel<<<blocks_for(n * k), kThreads, 0, stream>>>(y, bias, n * k, k);
  KERNEL_CHECK(where);
}

void column_sums(const float* dy, float* db, int64_t n, int k, cudaStream_t stream, const std::string& where) {
  column_sums_kernel<<<blocks_for(k), kThreads, 0, stream>>>(dy, db, n, k);
  KERNEL_CHECK(where);
}

void softmax_cross_entropy(const float* logits, const int64_t* labels, int64_t n, int k, float* loss,
                           int* correct, float* dlogits, cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(logits, labels, n, k, loss,
                                                                                  correct, dlogits);
  KERNEL_CHECK("cross-entropy");
}

void accumulate_batch(const float* loss, const int* correct, int64_t n, float* mean, double* loss_sum,
                      long long* correct_sum, cudaStream_t stream) {
  accumulate_batch_kernel<<<1, 1, 0, stream>>>(loss, correct, n, mean, loss_sum, correct_sum);
  KERNEL_CHECK("loss and accuracy");
}

void sgd(float* params, const float* grads, float* momenta, int64_t count, float lr, float momentum,
         float weight_decay, cudaStream_t stream) {
  sgd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(params, grads, momenta, count, lr, momentum,
                                                         weight_decay);
  KERNEL_CHECK("SGD");
}

}  // namespace ac::cudnn
