// Batch-invariant dense layer on the CPU: y = x W^T + b, every entry one sequential fused-multiply-add
// chain over the input features (the 6 x 32 micro-kernel of cpu_microkernel.h) plus the bias, so a
// row's output is bit-identical whatever the other rows of the call, their number, the tiling, the
// thread count or the ISA (AVX-512, AVX2+FMA, scalar std::fma). BLAS libraries pick kernels and
// depth splits by the row count, so an encoder row computed alone differs from the same row in a big
// batch; the sentence encoder's dense layers run here instead (embed/sentence_transformers.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "xmemory/cpu_microkernel.h"
#include "xmemory/gil.h"

namespace py = pybind11;
using f32arr = py::array_t<float, py::array::c_style | py::array::forcecast>;

namespace {

constexpr int64_t kMC = 48;  // rows per task: a depth chunk of its rows (24 KiB) and of the panel (16 KiB) fit L1 together
// Multiply-adds below which a call stays on one thread. Lower than the other kernels' kParallelWork:
// the encoder's forward keeps every core busy anyway (torch's own ops run on all threads between these
// calls), and a 26-token message's 384 x 384 layers (3.8 M multiply-adds) gain from two threads.
constexpr double kLinearParallelWork = 1e6;

#ifdef XMEM_X86
constexpr int64_t kMR12 = 12;  // rows of the AVX-512 kernel below: 24 accumulators, 2 panel loads, 1 broadcast

// 12 rows x 32 columns over depth [0, d): the same sequential FMA chain per entry as xmem::microkernel
// (so the same bits), with twice its rows for throughput on the large row counts of a bulk build.
__attribute__((target("avx512f"))) void mk12_avx512(const float* const* a, const float* panel, int64_t d, float* out,
                                                      bool accumulate) {
  __m512 c[kMR12][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMR12; ++r) {
    c[r][0] = accumulate ? _mm512_loadu_ps(out + r * xmem::kNR) : _mm512_setzero_ps();
    c[r][1] = accumulate ? _mm512_loadu_ps(out + r * xmem::kNR + 16) : _mm512_setzero_ps();
  }
  const float* bp = panel;
  for (int64_t t = 0; t < d; ++t, bp += xmem::kNR) {
    const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kMR12; ++r) {
      const __m512 x = _mm512_set1_ps(a[r][t]);
      c[r][0] = _mm512_fmadd_ps(x, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(x, b1, c[r][1]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kMR12; ++r) {
    _mm512_storeu_ps(out + r * xmem::kNR, c[r][0]);
    _mm512_storeu_ps(out + r * xmem::kNR + 16, c[r][1]);
  }
}
#endif

// packed [ceil(N / 32), K, 32]: W's rows (the N outputs) as zero-padded 32-column panels.
py::array_t<float> pack_linear_weight(f32arr w) {
  if (w.ndim() != 2) throw std::invalid_argument("pack_linear_weight: w must be [N, K]");
  const int64_t n = w.shape(0), k = w.shape(1);
  const int64_t panels = (n + xmem::kNR - 1) / xmem::kNR;
  py::array_t<float> out({panels, k, xmem::kNR});
  float* o = out.mutable_data();
  {
    xmem::GilRelease release;
    xmem::pack_panels(w.data(), n, k, o);
  }
  return out;
}

// y [M, N] = x [M, K] W^T + bias ([N] or empty), W given packed by pack_linear_weight.
py::array_t<float> rowwise_linear(f32arr x, f32arr packed, int64_t n, f32arr bias) {
  if (x.ndim() != 2) throw std::invalid_argument("rowwise_linear: x must be [M, K]");
  if (packed.ndim() != 3 || packed.shape(2) != xmem::kNR) throw std::invalid_argument("rowwise_linear: packed must be [P, K, 32]");
  const int64_t m = x.shape(0), k = x.shape(1), panels = packed.shape(0);
  if (packed.shape(1) != k) throw std::invalid_argument("rowwise_linear: x's K differs from the packed weight's");
  if (n < 0 || (n + xmem::kNR - 1) / xmem::kNR != panels) throw std::invalid_argument("rowwise_linear: n does not match the packed panels");
  if (bias.size() != 0 && (bias.ndim() != 1 || bias.shape(0) != n)) throw std::invalid_argument("rowwise_linear: bias must be [N] or empty");
  py::array_t<float> y({m, n});
  if (m == 0 || n == 0) return y;
  const float *X = x.data(), *W = packed.data(), *B = bias.size() ? bias.data() : nullptr;
  float* Y = y.mutable_data();
  {
    xmem::GilRelease release;
    const xmem::Isa isa = xmem::cpu_isa();
    const int64_t blocks = (m + kMC - 1) / kMC, tasks = blocks * panels;
    const bool parallel = double(m) * double(n) * double(k) > kLinearParallelWork;
#pragma omp parallel if (parallel)
    {
      std::vector<float> acc(static_cast<size_t>((kMC + 12) * xmem::kNR));
      const float* a[12];
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t p = task % panels, r0 = (task / panels) * kMC, rows = std::min(kMC, m - r0);
        const int64_t c0 = p * xmem::kNR, nc = std::min(xmem::kNR, n - c0);
        const float* panel = W + p * k * xmem::kNR;
        for (int64_t t0 = 0; t0 < k; t0 += xmem::kKC) {
          const int64_t kc = std::min(xmem::kKC, k - t0);
          int64_t g = 0;
#ifdef XMEM_X86
          if (isa == xmem::Isa::Avx512) {
            for (; g + kMR12 <= rows; g += kMR12) {
              for (int64_t r = 0; r < kMR12; ++r) a[r] = X + (r0 + g + r) * k + t0;
              mk12_avx512(a, panel + t0 * xmem::kNR, kc, acc.data() + g * xmem::kNR, t0 > 0);
            }
          }
#endif
          for (; g < rows; g += xmem::kMR) {
            for (int64_t r = 0; r < xmem::kMR; ++r) a[r] = X + (r0 + std::min(g + r, rows - 1)) * k + t0;
            xmem::microkernel(isa, a, panel + t0 * xmem::kNR, kc, acc.data() + g * xmem::kNR, t0 > 0);
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* yr = Y + (r0 + r) * n + c0;
          const float* ar = acc.data() + r * xmem::kNR;
          if (B) {
            for (int64_t c = 0; c < nc; ++c) yr[c] = ar[c] + B[c0 + c];
          } else {
            std::memcpy(yr, ar, sizeof(float) * nc);
          }
        }
      }
    }
  }
  return y;
}

}  // namespace

void register_linear(py::module_& m) {
  m.def("pack_linear_weight", &pack_linear_weight, py::arg("w"), "W [N, K] as [ceil(N/32), K, 32] panels (ops/linear)");
  m.def("rowwise_linear", &rowwise_linear, py::arg("x"), py::arg("packed"), py::arg("n"), py::arg("bias"),
        "batch-invariant x W^T + b, one FMA chain per entry (ops/linear)");
}
