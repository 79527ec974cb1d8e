// Rows added into per-group sums in row order (ops/rows.py add_rows_in_order): for i = 0..m-1,
// sums[group[i]] += x[rows[i]], every element one float64 add in that order, the bits of
// np.add.at(sums, group, x[rows]) (the theme stage's f(P) state and a memory's theme sums rest on them).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

template <typename T>
void add(double* s, int64_t d, const int64_t* g, const T* x, const int64_t* r, int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    double* row = s + g[i] * d;
    const T* xi = x + r[i] * d;
    for (int64_t j = 0; j < d; ++j) row[j] += static_cast<double>(xi[j]);
  }
}

// sums float64 [k, d] (C-contiguous, written in place), group int64 [m] in [0, k), x float32 or
// float64 [N, d] (C-contiguous), rows int64 [m] in [0, N).
void add_rows(py::array sums, const py::array_t<int64_t, py::array::c_style>& group, const py::array& x,
              const py::array_t<int64_t, py::array::c_style>& rows) {
  const auto bad = [](const std::string& what) { throw py::value_error("add_rows: " + what); };
  if (!py::isinstance<py::array_t<double>>(sums) || sums.ndim() != 2 || !(sums.flags() & py::array::c_style) ||
      !sums.writeable())
    bad("sums: expected a writable C-contiguous float64 [k, d] array");
  if (x.ndim() != 2 || x.shape(1) != sums.shape(1) || !(x.flags() & py::array::c_style))
    bad("x: expected a C-contiguous [N, d] array with the sums' d");
  if (group.ndim() != 1 || rows.ndim() != 1 || group.shape(0) != rows.shape(0)) bad("group and rows: expected [m] each");
  const int64_t k = sums.shape(0), n = x.shape(0), d = sums.shape(1), m = group.shape(0);
  const int64_t* g = group.data();
  const int64_t* r = rows.data();
  for (int64_t i = 0; i < m; ++i) {
    if (g[i] < 0 || g[i] >= k) bad("a group outside 0.." + std::to_string(k - 1));
    if (r[i] < 0 || r[i] >= n) bad("a row outside 0.." + std::to_string(n - 1));
  }
  double* s = static_cast<double*>(sums.mutable_data());
  if (py::isinstance<py::array_t<double>>(x)) {
    const double* v = static_cast<const double*>(x.data());
    py::gil_scoped_release release;
    add(s, d, g, v, r, m);
  } else if (py::isinstance<py::array_t<float>>(x)) {
    const float* v = static_cast<const float*>(x.data());
    py::gil_scoped_release release;
    add(s, d, g, v, r, m);
  } else {
    bad("x: expected float32 or float64");
  }
}

// np.argmax of one row (the first largest; a NaN is the largest, its first occurrence)
int64_t argmax(const double* v, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k && !std::isnan(v[best]); ++j)
    if (v[j] > v[best] || std::isnan(v[j])) best = j;
  return best;
}

// Each row's two largest entries off the diagonal of a square cos [k, k], k >= 2: (idx [k, 2] int64,
// val [k, 2] float64), the first of equals, an index -1 where its value is not finite (ops/objective
// state.py's _top2 steps: diagonal -inf, argmax, the pick made -inf, argmax again).
py::tuple top2_off_diagonal(const py::array_t<double, py::array::c_style>& cos) {
  if (cos.ndim() != 2 || cos.shape(0) != cos.shape(1) || cos.shape(0) < 2)
    throw py::value_error("top2_off_diagonal: cos: expected a square [k, k] float64 array, k >= 2");
  const int64_t k = cos.shape(0);
  py::array_t<int64_t> idx({k, int64_t(2)});
  py::array_t<double> val({k, int64_t(2)});
  const double* c = cos.data();
  int64_t* ti = idx.mutable_data();
  double* tv = val.mutable_data();
  {
    py::gil_scoped_release release;
    std::vector<double> row(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      std::copy(c + i * k, c + (i + 1) * k, row.begin());
      row[static_cast<size_t>(i)] = -std::numeric_limits<double>::infinity();
      for (int p = 0; p < 2; ++p) {
        const int64_t j = argmax(row.data(), k);
        tv[2 * i + p] = row[static_cast<size_t>(j)];
        ti[2 * i + p] = std::isfinite(row[static_cast<size_t>(j)]) ? j : -1;
        row[static_cast<size_t>(j)] = -std::numeric_limits<double>::infinity();
      }
    }
  }
  return py::make_tuple(idx, val);
}

}  // namespace

void register_rows(py::module_& m) {
  m.def("top2_off_diagonal", &top2_off_diagonal, py::arg("cos"),
        "each row's two largest entries off the diagonal of a square float64 [k, k]: (idx [k, 2], val [k, 2]), -1 not finite");
  m.def("add_rows", &add_rows, py::arg("sums"), py::arg("group"), py::arg("x"), py::arg("rows"),
        "sums[group[i]] += x[rows[i]] for i in order, in float64 (np.add.at's bits), in place");
}
