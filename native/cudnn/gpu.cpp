#include "gpu.h"

namespace ac::cudnn {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper

int parse_device(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0) {
    const std::string index = device.substr(5);
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos) return std::stoi(index);
  }
  throw std::runtime_error("--device " + device + ": the cudnn program runs on a CUDA GPU only (cuda or cuda:N)");
}

}  // namespace

Gpu::Gpu(const std::string& device, ConvSettings settings) : index_(parse_device(device)), settings_(settings) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw NoGpu("--device " + device + " but this process sees no CUDA GPU (cudaGetDeviceCount: " +
                (err == cudaSuccess ? std::string("0 devices") : std::string(cudaGetErrorString(err))) + ")");
  }
  if (index_ >= count)
    throw NoGpu("--device " + device + " but this process sees " + std::to_string(count) + " CUDA GPU(s)");
  CUDA_CHECK(cudaSetDevice(index_), "device");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "device");
  const cudnnStatus_t status = cudnnCreate(&cudnn_);
  if (status != CUDNN_STATUS_SUCCESS)
    throw NoGpu("--device " + device + " but cuDNN cannot use a GPU here (cudnnCreate: " +
                cudnnGetErrorString(status) + "); this process sees no usable CUDA GPU");
  CUDNN_CHECK(cudnnSetStream(cudnn_, stream_), "device");
  CUBLAS_CHECK(cublasCreate(&cublas_), "device");
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_), "device");
  CUBLAS_CHECK(cublasSetMathMode(cublas_, settings_.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "device");
  cublas_workspace_ = Buffer<char>(kCublasWorkspaceBytes, "cuBLAS workspace");
  CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.get(), cublas_workspace_.bytes()), "device");
}

Gpu::~Gpu() {
  for (auto& [shape, desc] : tensors_) cudnnDestroyTensorDescriptor(desc);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* Gpu::workspace(size_t bytes, const std::string& layer) {
  if (bytes > workspace_.bytes()) {
    CUDA_CHECK(cudaStreamSynchronize(stream_), layer);  // the old workspace may still be in use
    workspace_ = Buffer<char>();
    workspace_ = Buffer<char>(bytes, layer + ": convolution workspace");
    ++workspace_generation_;
  }
  return workspace_.get();
}

void Gpu::free_workspace() {
  if (!workspace_.get()) return;
  CUDA_CHECK(cudaStreamSynchronize(stream_), "freeing the convolution workspace");
  workspace_ = Buffer<char>();
  ++workspace_generation_;
}

cudnnTensorDescriptor_t Gpu::tensor(const Shape& shape) {
  auto it = tensors_.find(shape);
  if (it != tensors_.end()) return it->second;
  cudnnTensorDescriptor_t desc = nullptr;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc), "tensor " + shape.str());
  tensors_[shape] = desc;
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, shape.n, shape.c, shape.h,
                                         shape.w),
              "tensor " + shape.str());
  return desc;
}

}  // namespace ac::cudnn
