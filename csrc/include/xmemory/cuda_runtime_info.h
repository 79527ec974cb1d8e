// Runtime facts from the CUDA runtime linked into _cuda (implemented in csrc/cuda/runtime_info.cu).
#pragma once

namespace xmem {
int cuda_device_count();      // 0 when no driver or GPU is present
int cuda_runtime_version();   // e.g. 13000
}  // namespace xmem
