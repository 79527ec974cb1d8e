// Seeded spherical k-means on the CPU: many independent runs (the theme stage's split proposals, each a
// run over one CSR segment of unit rows) in one call, OpenMP across runs. Every sum has one fixed order
// (sum4 / dot4 for totals, products and norms, centre sums row by row in row order), so every ISA gives
// the same labels (ops/kmeans/reference.py is the float64 reference, written in the same order).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "xmemory/cpu_microkernel.h"
#include "xmemory/gil.h"

namespace py = pybind11;
using f64arr = py::array_t<double, py::array::c_style | py::array::forcecast>;
using i64arr = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

namespace {

// spherical_kmeans' inputs (see ops/kmeans/__init__.py): run q clusters segment SEG[q] into K[q]
// clusters from first centre FIRST[q] and uniforms U[UO[q] : UO[q] + K[q] - 1]; its labels go to
// OUT[LO[q] : LO[q] + n], OK[q] false when its seeding weights were all zero.
struct KmeansRuns {
  const double *X, *U;
  const int64_t *O, *SEG, *K, *FIRST, *UO, *LO;
  int64_t *OUT;
  uint8_t* OK;
  int64_t R, d, iters;
  double work;
};

#define XMEM_PER_ISA_BODY "kmeans_runs.inc"
#include "per_isa.inc"

// (labels [sum of the runs' segment lengths] int64, ok [R] bool). Arguments as KmeansRuns; the
// dispatcher (ops/kmeans/__init__.py) has checked them, the bounds are checked again here.
py::tuple spherical_kmeans(f64arr x, i64arr offsets, i64arr segment, i64arr k, i64arr first, f64arr uniforms,
                           int64_t iters) {
  if (x.ndim() != 2) throw std::invalid_argument("spherical_kmeans: x must be [N, d]");
  const int64_t d = x.shape(1), nseg = offsets.shape(0) - 1, R = segment.shape(0);
  const int64_t* O = offsets.data();
  if (nseg < 0 || O[0] != 0 || O[nseg] != x.shape(0)) throw std::invalid_argument("spherical_kmeans: bad offsets");
  if (k.shape(0) != R || first.shape(0) != R) throw std::invalid_argument("spherical_kmeans: k and first must be [R]");
  std::vector<int64_t> uo(R + 1, 0), lo(R + 1, 0);
  double work = 0.0;
  for (int64_t q = 0; q < R; ++q) {
    const int64_t s = segment.data()[q], kq = k.data()[q];
    if (s < 0 || s >= nseg) throw std::invalid_argument("spherical_kmeans: segment out of range");
    const int64_t n = O[s + 1] - O[s];
    if (kq < 1 || kq > n || first.data()[q] < 0 || first.data()[q] >= n)
      throw std::invalid_argument("spherical_kmeans: k or first out of range");
    uo[q + 1] = uo[q] + kq - 1;
    lo[q + 1] = lo[q] + n;
    work += double(n) * double(kq) * double(d) * double(iters + 1);
  }
  if (uniforms.shape(0) != uo[R]) throw std::invalid_argument("spherical_kmeans: uniforms must hold sum(k - 1) values");
  py::array_t<int64_t> labels(lo[R]);
  py::array_t<bool> ok(R);
  const KmeansRuns in{x.data(), uniforms.data(), O, segment.data(), k.data(), first.data(), uo.data(), lo.data(),
                      labels.mutable_data(), reinterpret_cast<uint8_t*>(ok.mutable_data()), R, d, iters, work};
  {
    xmem::GilRelease release;
    switch (xmem::cpu_isa()) {
#ifdef XMEM_X86
      case xmem::Isa::Avx512: isa_avx512::kmeans_runs(in); break;
      case xmem::Isa::Avx2: isa_avx2::kmeans_runs(in); break;
#endif
      default: isa_base::kmeans_runs(in);
    }
  }
  return py::make_tuple(labels, ok);
}

}  // namespace

void register_kmeans(py::module_& m) {
  m.def("spherical_kmeans", &spherical_kmeans, py::arg("x"), py::arg("offsets"), py::arg("segment"), py::arg("k"),
        py::arg("first"), py::arg("uniforms"), py::arg("iters"),
        "seeded spherical k-means, many runs over CSR segments (ops/kmeans)");
}
