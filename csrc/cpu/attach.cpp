// Theme attach on the CPU: a memory's new semantic rows join, in order, the live theme with the most
// similar centroid (cosine >= attach_threshold, or >= lenient_floor when that theme is below the size
// cap; ties to the earliest slot) or open a new theme (construct/theme_state.py, ops/attach). Cosines
// are dot(sum_s, x_i) / |sum_s| in float64 by dot4 (xmemory/dot4.inc, the f(P) and k-means kernels'
// fixed order; no multiply-add contraction: this file is compiled with -ffp-contract=off), the order
// ops/attach/reference.py follows in NumPy, so the decisions are the same bits on every ISA and batch. The columns are edited in place; the caller leaves room for
// len(rows) new slots.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace py = pybind11;

namespace {

#include "xmemory/dot4.inc"

template <typename T>
T* writable(py::array& a, const char* name, py::ssize_t ndim) {
  if (!py::isinstance<py::array_t<T>>(a) || a.ndim() != ndim || !(a.flags() & py::array::c_style) || !a.writeable())
    throw std::invalid_argument(std::string(name) + ": expected a writable C-contiguous array of the column's dtype");
  return static_cast<T*>(a.mutable_data());
}

// (n_slots, next_id, attached): the slots after n_slots are the opened themes, in order; attached is
// true when a row joined an existing theme.
py::tuple attach_rows(py::array_t<float, py::array::c_style | py::array::forcecast> x,
                      py::array_t<int64_t, py::array::c_style | py::array::forcecast> rows, py::array sums_a,
                      py::array counts_a, py::array alive_a, py::array ids_a, py::array label_a, int64_t n_slots,
                      int64_t next_id, double attach_threshold, double lenient_floor, int64_t size_cap) {
  if (x.ndim() != 2) throw std::invalid_argument("x must be [n, d]");
  const int64_t n = x.shape(0), d = x.shape(1), m = rows.size();
  double* sums = writable<double>(sums_a, "sums", 2);
  int64_t* counts = writable<int64_t>(counts_a, "counts", 1);
  bool* alive = writable<bool>(alive_a, "alive", 1);
  int64_t* ids = writable<int64_t>(ids_a, "ids", 1);
  int64_t* label = writable<int64_t>(label_a, "label", 1);
  const int64_t cap = sums_a.shape(0);
  if (sums_a.shape(1) != d || counts_a.shape(0) != cap || alive_a.shape(0) != cap || ids_a.shape(0) != cap)
    throw std::invalid_argument("sums [cap, d], counts, alive and ids [cap] must agree");
  if (label_a.shape(0) != n) throw std::invalid_argument("label must be [n]");
  if (n_slots < 0 || n_slots + m > cap) throw std::invalid_argument("the columns need room for one new slot per row");
  const float* X = x.data();
  const int64_t* R = rows.data();
  for (int64_t j = 0; j < m; ++j)
    if (R[j] < 0 || R[j] >= n) throw std::invalid_argument("rows must be node rows in [0, n)");
  bool attached = false;
  {
    py::gil_scoped_release nogil;
    std::vector<double> norm(cap, 1.0);  // |sum| of each slot, 1 for a zero sum (its cosines are then 0)
    auto renorm = [&](int64_t s) {
      const double v = std::sqrt(dot4(sums + s * d, sums + s * d, d));
      norm[s] = v > 0 ? v : 1.0;
    };
    for (int64_t s = 0; s < n_slots; ++s)
      if (alive[s]) renorm(s);
    for (int64_t j = 0; j < m; ++j) {
      const int64_t i = R[j];
      const float* xi = X + i * d;
      int64_t slot = -1;
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t s = 0; s < n_slots; ++s) {
        if (!alive[s]) continue;
        const double c = dot4(sums + s * d, xi, d) / norm[s];
        if (slot < 0 || c > best) slot = s, best = c;
      }
      if (slot >= 0 && (best >= attach_threshold || (counts[slot] < size_cap && best >= lenient_floor))) {
        double* row = sums + slot * d;
        for (int64_t k = 0; k < d; ++k) row[k] += static_cast<double>(xi[k]);
        counts[slot] += 1;
        label[i] = ids[slot];
        renorm(slot);
        attached = true;
      } else {
        const int64_t s = n_slots++;
        double* row = sums + s * d;
        for (int64_t k = 0; k < d; ++k) row[k] = static_cast<double>(xi[k]);
        counts[s] = 1;
        ids[s] = next_id;
        alive[s] = true;
        label[i] = next_id++;
        renorm(s);
      }
    }
  }
  return py::make_tuple(n_slots, next_id, attached);
}

// int64 arithmetic that wraps as NumPy's does (no undefined overflow)
inline int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// A memory's merge candidates from its synced theme graph (ThemeState.merge_pairs, ops/attach): row r
// of the graph is live slot live[r], its neighbours idx[r] (positions in live, -1 none) with cosines
// sim[r]; t = live[r] offers its neighbours j in graph order, the first lim = max(merge_candidates, 1)
// when t is tiny (counts[t] <= tiny_size), else all k; a pair counts when idx >= 0, the two fit under
// size_cap, and t is tiny or the cosine (float32, compared as float64) reaches pair_threshold; each
// unordered pair once, as first met in row-major order. Returns (t slots [P], j slots [P]) int64.
py::tuple merge_pairs(const py::array_t<int64_t, py::array::c_style>& live, const py::array_t<int32_t, py::array::c_style>& idx,
                      const py::array_t<float, py::array::c_style>& sim, const py::array_t<int64_t, py::array::c_style>& counts,
                      int64_t n_slots, int64_t k, int64_t tiny_size, int64_t merge_candidates, int64_t size_cap,
                      double pair_threshold) {
  const int64_t n_live = live.shape(0);
  if (live.ndim() != 1 || idx.ndim() != 2 || sim.ndim() != 2 || idx.shape(0) != n_live || sim.shape(0) != n_live ||
      sim.shape(1) != idx.shape(1) || counts.ndim() != 1)
    throw std::invalid_argument("merge_pairs: expected live [L], idx and sim [L, k] of the same shape, counts [cap]");
  const int64_t cols = idx.shape(1), cap = counts.shape(0);
  const int64_t* lv = live.data();
  const int32_t* ix = idx.data();
  const float* sm = sim.data();
  const int64_t* cnt = counts.data();
  for (int64_t r = 0; r < n_live; ++r)
    if (lv[r] < 0 || lv[r] >= cap || lv[r] >= n_slots) throw std::invalid_argument("merge_pairs: a live slot outside the columns");
  for (int64_t e = 0; e < n_live * cols; ++e)
    if (ix[e] >= n_live) throw std::invalid_argument("merge_pairs: a neighbour outside the live slots");
  std::vector<int64_t> ts, js;
  std::unordered_set<int64_t> seen;
  const int64_t tiny_lim = std::max<int64_t>(merge_candidates, 1);
  for (int64_t r = 0; r < n_live; ++r) {
    const int64_t t = lv[r];
    const bool tiny = cnt[t] <= tiny_size;
    const int64_t lim = tiny ? tiny_lim : k;
    for (int64_t c = 0; c < cols && c < lim; ++c) {
      const int32_t p = ix[r * cols + c];
      if (p < 0) continue;
      const int64_t j = lv[p];
      if (wrapping_add(cnt[t], cnt[j]) > size_cap) continue;
      if (!tiny && !(static_cast<double>(sm[r * cols + c]) >= pair_threshold)) continue;
      if (seen.insert(wrapping_add(wrapping_mul(std::min(t, j), n_slots), std::max(t, j))).second) {
        ts.push_back(t);
        js.push_back(j);
      }
    }
  }
  py::array_t<int64_t> t_out(static_cast<py::ssize_t>(ts.size())), j_out(static_cast<py::ssize_t>(js.size()));
  std::copy(ts.begin(), ts.end(), t_out.mutable_data());
  std::copy(js.begin(), js.end(), j_out.mutable_data());
  return py::make_tuple(t_out, j_out);
}

}  // namespace

void register_attach(py::module_& m) {
  m.def("merge_pairs", &merge_pairs, py::arg("live"), py::arg("idx"), py::arg("sim"), py::arg("counts"), py::arg("n_slots"),
        py::arg("k"), py::arg("tiny_size"), py::arg("merge_candidates"), py::arg("size_cap"), py::arg("pair_threshold"),
        "a memory's merge candidates (t slots, j slots) from its theme graph, in the per-theme rule's order (ops/attach)");
  m.def("attach_rows", &attach_rows, py::arg("x"), py::arg("rows"), py::arg("sums"), py::arg("counts"), py::arg("alive"),
        py::arg("ids"), py::arg("label"), py::arg("n_slots"), py::arg("next_id"), py::arg("attach_threshold"),
        py::arg("lenient_floor"), py::arg("size_cap"), "attach rows to the nearest live theme or open one (ops/attach)");
}
