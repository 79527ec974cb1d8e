#include "xmemory/cuda_runtime_info.h"

#include <cuda_runtime.h>

namespace xmem {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error: no driver or no device
    return 0;
  }
  return n;
}

int cuda_runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}

}  // namespace xmem
