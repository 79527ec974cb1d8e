// Error checking shared by the CUDA launchers: a failed launch becomes a C++ exception
// with the file, line and CUDA error string (pybind11 turns it into a RuntimeError).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

#define XMEM_CUDA_CHECK(expr)                                                           \
  do {                                                                                  \
    cudaError_t err__ = (expr);                                                         \
    if (err__ != cudaSuccess) {                                                         \
      throw std::runtime_error(std::string("CUDA error at ") + __FILE__ + ":" +         \
                               std::to_string(__LINE__) + ": " + cudaGetErrorString(err__)); \
    }                                                                                   \
  } while (0)
