// Own CUDA kernels, for what cuDNN and cuBLAS do not provide. Each launches on the given stream and checks the
// launch (KERNEL_CHECK) naming `where`.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace ac::cudnn {

// uint8 N×C×H×W -> float32: (x / 255 - mean[c]) / std[c], in eager's float operations (x × (1/255), as torch's
// division by a scalar is done on the GPU, then minus, then true division).
void normalise_u8(const uint8_t* x, float* y, int64_t n, int channels, int64_t hw, const float* mean,
                  const float* std, cudaStream_t stream);

// In place y = max(y, 0); and dy = y > 0 ? dy : 0 (torch's threshold_backward on the ReLU's output).
void relu(float* y, int64_t count, cudaStream_t stream, const std::string& where);
void relu_backward(float* dy, const float* y, int64_t count, cudaStream_t stream, const std::string& where);

// In place y = max(y + skip, 0): a bottleneck's residual add and final ReLU.
void add_relu(float* y, const float* skip, int64_t count, cudaStream_t stream, const std::string& where);
// In place a += b.
void add(float* a, const float* b, int64_t count, cudaStream_t stream, const std::string& where);

// Global average pool N×C×H×W -> N×C, and its backward (each input gets dy / (H·W)).
void global_avg_pool(const float* x, float* y, int64_t nc, int hw, cudaStream_t stream, const std::string& where);
void global_avg_pool_backward(const float* dy, float* dx, int64_t nc, int hw, cudaStream_t stream,
                              const std::string& where);

// y[n, k] += bias[k] for an N×K row-major matrix.
void add_bias(float* y, const float* bias, int64_t n, int k, cudaStream_t stream, const std::string& where);
// db[k] = Σ_n dy[n, k] (the bias gradient), in a fixed order.
void column_sums(const float* dy, float* db, int64_t n, int k, cudaStream_t stream, const std::string& where);

// Per row of N×K logits: loss[i] = logsumexp(row) - row[label]; correct[i] = argmax(row) == label (the first
// maximum, as torch.argmax); with dlogits, also (softmax(row) - onehot(label)) / N, the gradient of the mean.
void softmax_cross_entropy(const float* logits, const int64_t* labels, int64_t n, int k, float* loss,
                           int* correct, float* dlogits, cudaStream_t stream);

// One thread, fixed order: mean = Σ loss / n (the batch's cross-entropy, float as torch's mean); phase sums
// loss_sum += mean × n (double) and correct_sum += Σ correct.
void accumulate_batch(const float* loss, const int* correct, int64_t n, float* mean, double* loss_sum,
                      long long* correct_sum, cudaStream_t stream);

// torch.optim.SGD (no dampening, no Nesterov) over one flat array: d = g + wd·p; buf = momentum·buf + d;
// p -= lr·buf (momentum 0: p -= lr·d, buf unused).
void sgd(float* params, const float* grads, float* momenta, int64_t count, float lr, float momentum,
         float weight_decay, cudaStream_t stream);

}  // namespace ac::cudnn
