// The statements' de-duplication, its sequential part (construct/semantic.py::match_duplicates):
// within a block of new rows, row i merges into the most similar earlier row kept so far when the
// cosine exceeds the threshold, else it is kept. Candidates are screened on the block's BLAS gram
// (float32 entries, compared in float64) and re-scored exactly where they can decide: each cosine the sum, left to right, of
// the float64 products of the float32 entries (exact_cosines), the largest winning, the first of
// equals. The Python loop did this one row at a time with a NumPy call or four per row.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

double exact_cosine(const float* a, const float* b, int64_t d) {
  double acc = 0.0;
  for (int64_t k = 0; k < d; ++k) acc += double(a[k]) * double(b[k]);  // each product exact in double
  return acc;
}

// inner [m, m] float32 the block's gram, rows [m, d] float32, best / arg [m] each row's best
// against earlier blocks (-inf / -1 none), base: the target index of the block's first kept row.
// Returns target [m] int64: where each row merges (arg, or base + its position among the block's
// kept rows), -1 when kept.
py::array_t<int64_t> dedup_block(const F32& inner, const F32& rows, const F64& best, const I64& arg, double threshold,
                                 double tie_tol, int64_t base) {
  const int64_t m = rows.ndim() == 2 ? rows.shape(0) : -1;
  if (m < 0 || inner.ndim() != 2 || inner.shape(0) != m || inner.shape(1) != m || best.ndim() != 1 ||
      best.shape(0) != m || arg.ndim() != 1 || arg.shape(0) != m)
    throw py::value_error("dedup_block: expected inner [m, m], rows [m, d], best [m], arg [m]");
  const int64_t d = rows.shape(1);
  const float* g = inner.data();
  const float* x = rows.data();
  const double* bst = best.data();
  const int64_t* ag = arg.data();
  py::array_t<int64_t> target(m);
  int64_t* out = target.mutable_data();
  std::vector<int64_t> local;  // the block's rows kept so far
  local.reserve(size_t(m));
  {
    xmem::GilRelease release;
    for (int64_t i = 0; i < m; ++i) {
      double b = bst[i];
      int64_t t = ag[i];
      if (!local.empty()) {
        const float* gi = g + i * m;
        float mx = gi[local[0]];
        for (int64_t l : local) {
          if (std::isnan(gi[l])) {  // the max is NaN then, and the screen below fails
            mx = gi[l];
            break;
          }
          mx = std::max(mx, gi[l]);
        }
        // the screen, in float64 (ops/dedup/reference.py): the best gram entry against the larger of
        // the best so far and the threshold, less tie_tol (a NaN entry fails it)
        const double top = double(mx), bar = threshold > b ? threshold : b;
        if (top >= bar - tie_tol) {
          const double floor = top - tie_tol;  // the candidates: entries within tie_tol of the best
          double w = 0.0;
          int64_t k = -1;
          for (size_t p = 0; p < local.size(); ++p) {
            if (!(double(gi[local[p]]) >= floor)) continue;
            const double e = exact_cosine(x + i * d, x + local[p] * d, d);
            if (k < 0 || e > w) w = e, k = int64_t(p);  // the first of equals
          }
          if (k >= 0 && w > b) b = w, t = base + k;
        }
      }
      if (t >= 0 && b > threshold) {
        out[i] = t;
      } else {
        out[i] = -1;
        local.push_back(i);
      }
    }
  }
  return target;
}

}  // namespace

void register_dedup(py::module_& m) {
  m.def("dedup_block", &dedup_block, py::arg("inner"), py::arg("rows"), py::arg("best"), py::arg("arg"),
        py::arg("threshold"), py::arg("tie_tol"), py::arg("base"),
        "The de-duplication's sequential rule over one block of new rows: each row's target, -1 when kept");
}
