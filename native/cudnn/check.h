// Error checking: every cuDNN, cuBLAS and CUDA call goes through one of these macros with the layer (or step) it
// serves, so a failure reads "layer3.2.conv2: cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM". Allocation
// failures become OutOfMemory (the program's `oom` record, exit code 3); everything else GpuError.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace ac::cudnn {

class GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OutOfMemory : public GpuError {
 public:
  using GpuError::GpuError;
};

// "cudnnConvolutionForward(handle, ...)" -> "cudnnConvolutionForward": the call's name without its arguments.
inline std::string call_name(const char* call) {
  const std::string s(call);
  return s.substr(0, s.find('('));
}

inline std::string failure(const std::string& where, const char* call, const std::string& status) {
  return where + ": " + call_name(call) + ": " + status;
}

inline void check_cuda(cudaError_t err, const char* call, const std::string& where) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that the error record can still be written
  const std::string message = failure(where, call, std::string(cudaGetErrorName(err)) + " (" +
                                                       cudaGetErrorString(err) + ")");
  if (err == cudaErrorMemoryAllocation) throw OutOfMemory(message);
  throw GpuError(message);
}

inline void check_cudnn(cudnnStatus_t status, const char* call, const std::string& where) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string message = failure(where, call, cudnnGetErrorString(status));
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)  // the latter: cuDNN 8's ALLOC_FAILED
    throw OutOfMemory(message);
  throw GpuError(message);
}

inline void check_cublas(cublasStatus_t status, const char* call, const std::string& where) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const std::string message = failure(where, call, cublasGetStatusString(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(message);
  throw GpuError(message);
}

}  // namespace ac::cudnn

#define CUDA_CHECK(call, where) ::ac::cudnn::check_cuda((call), #call, (where))
#define CUDNN_CHECK(call, where) ::ac::cudnn::check_cudnn((call), #call, (where))
#define CUBLAS_CHECK(call, where) ::ac::cudnn::check_cublas((call), #call, (where))
// A kernel launch: configuration errors show at once, faults inside the kernel at the next synchronising call.
#define KERNEL_CHECK(where) ::ac::cudnn::check_cuda(cudaGetLastError(), "kernel launch", (where))
