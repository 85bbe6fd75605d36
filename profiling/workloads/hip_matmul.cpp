// Built-in HIP workload for ROCm images without PyTorch: a naive matrix multiply and a
// device-to-host copy, so traces and counters have real kernels and copies to show.
// Built by docker/Dockerfile with hipcc. usage: hip_matmul [size] [iterations]
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                   \
  do {                                                                                \
    hipError_t err_ = (call);                                                         \
    if (err_ != hipSuccess) {                                                         \
      std::fprintf(stderr, "hip_matmul: %s: %s\n", #call, hipGetErrorString(err_));    \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

__global__ void matmul_kernel(const float* a, const float* b, float* c, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < n && col < n) {
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
  }
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  int iters = argc > 2 ? std::atoi(argv[2]) : 10;
  size_t bytes = size_t(n) * n * sizeof(float);
  std::vector<float> host(size_t(n) * n, 1.0f);
  float *a, *b, *c;
  CHECK(hipMalloc(&a, bytes));
  CHECK(hipMalloc(&b, bytes));
  CHECK(hipMalloc(&c, bytes));
  CHECK(hipMemcpy(a, host.data(), bytes, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(b, host.data(), bytes, hipMemcpyHostToDevice));
  dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
  for (int i = 0; i < iters; ++i) matmul_kernel<<<grid, block>>>(a, b, c, n);
  CHECK(hipGetLastError());
  CHECK(hipMemcpy(host.data(), c, bytes, hipMemcpyDeviceToHost));
  std::printf("hip_matmul: size=%d iters=%d c[0]=%.1f\n", n, iters, host[0]);
  CHECK(hipFree(a));
  CHECK(hipFree(b));
  CHECK(hipFree(c));
  return 0;
}
