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

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

#include "xmemory/dot4.inc"

template <typename T>
T* writable(py::array& a, const char* name, py::ssize_t ndim) {
  if (!py::isinstance<py::array_t<T>>(a) || a.ndim() != ndim || !(a.flags() & py::array::c_style) || !a.writeable())
    throw std::invalid_argument(std::string(name) + ": expected a writable C-contiguous array of the column's dtype");
  return static_cast<T*>(a.mutable_data());
}

// One memory's columns, checked, with the arrays they point into held.
struct Columns {
  py::array_t<float, py::array::c_style | py::array::forcecast> x;
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> rows;
  py::array sums_a, counts_a, alive_a, ids_a, label_a;
  const float* X = nullptr;
  const int64_t* R = nullptr;
  double* sums = nullptr;
  int64_t *counts = nullptr, *ids = nullptr, *label = nullptr;
  bool* alive = nullptr;
  int64_t n = 0, d = 0, m = 0, cap = 0, n_slots = 0, next_id = 0;
  bool attached = false;
};

// An edited column as the array it is: anything else (a list, which pybind would copy into a new
// array whose edits nobody sees) is refused.
py::array column(const py::handle& h, const char* name) {
  if (!py::isinstance<py::array>(h))
    throw std::invalid_argument(std::string(name) + ": expected a NumPy array (the column is edited in place)");
  return py::reinterpret_borrow<py::array>(h);
}

Columns checked(py::array_t<float, py::array::c_style | py::array::forcecast> x,
                py::array_t<int64_t, py::array::c_style | py::array::forcecast> rows, const py::handle& sums_a,
                const py::handle& counts_a, const py::handle& alive_a, const py::handle& ids_a, const py::handle& label_a,
                int64_t n_slots, int64_t next_id) {
  Columns c{std::move(x), std::move(rows), column(sums_a, "sums"), column(counts_a, "counts"), column(alive_a, "alive"),
            column(ids_a, "ids"), column(label_a, "label")};
  if (c.x.ndim() != 2) throw std::invalid_argument("x must be [n, d]");
  c.n = c.x.shape(0), c.d = c.x.shape(1), c.m = c.rows.size();
  c.sums = writable<double>(c.sums_a, "sums", 2);
  c.counts = writable<int64_t>(c.counts_a, "counts", 1);
  c.alive = writable<bool>(c.alive_a, "alive", 1);
  c.ids = writable<int64_t>(c.ids_a, "ids", 1);
  c.label = writable<int64_t>(c.label_a, "label", 1);
  c.cap = c.sums_a.shape(0);
  if (c.sums_a.shape(1) != c.d || c.counts_a.shape(0) != c.cap || c.alive_a.shape(0) != c.cap || c.ids_a.shape(0) != c.cap)
    throw std::invalid_argument("sums [cap, d], counts, alive and ids [cap] must agree");
  if (c.label_a.shape(0) != c.n) throw std::invalid_argument("label must be [n]");
  if (n_slots < 0 || c.m > c.cap || n_slots > c.cap - c.m)
    throw std::invalid_argument("the columns need room for one new slot per row");
  c.X = c.x.data();
  c.R = c.rows.data();
  for (int64_t j = 0; j < c.m; ++j)
    if (c.R[j] < 0 || c.R[j] >= c.n) throw std::invalid_argument("rows must be node rows in [0, n)");
  c.n_slots = n_slots, c.next_id = next_id;
  return c;
}

// Attach c's rows in order (no Python object touched: run without the GIL). The slots after
// c.n_slots are the opened themes, in order; c.attached is set when a row joined an existing theme.
void attach(Columns& c, double attach_threshold, double lenient_floor, int64_t size_cap) {
  const int64_t d = c.d;
  double* sums = c.sums;
  int64_t* counts = c.counts;
  std::vector<double> norm(c.cap, 1.0);  // |sum| of each slot, 1 for a zero sum (its cosines are then 0)
  auto renorm = [&](int64_t s) {
    const double v = std::sqrt(dot4(sums + s * d, sums + s * d, d));
    norm[s] = v > 0 ? v : 1.0;
  };
  for (int64_t s = 0; s < c.n_slots; ++s)
    if (c.alive[s]) renorm(s);
  for (int64_t j = 0; j < c.m; ++j) {
    const int64_t i = c.R[j];
    const float* xi = c.X + i * d;
    int64_t slot = -1;
    double best = -std::numeric_limits<double>::infinity();
    for (int64_t s = 0; s < c.n_slots; ++s) {
      if (!c.alive[s]) continue;
      const double cs = dot4(sums + s * d, xi, d) / norm[s];
      if (slot < 0 || cs > best) slot = s, best = cs;
    }
    if (slot >= 0 && (best >= attach_threshold || (counts[slot] < size_cap && best >= lenient_floor))) {
      double* row = sums + slot * d;
      for (int64_t k = 0; k < d; ++k) row[k] += static_cast<double>(xi[k]);
      counts[slot] += 1;
      c.label[i] = c.ids[slot];
      renorm(slot);
      c.attached = true;
    } else {
      const int64_t s = c.n_slots++;
      double* row = sums + s * d;
      for (int64_t k = 0; k < d; ++k) row[k] = static_cast<double>(xi[k]);
      counts[s] = 1;
      c.ids[s] = c.next_id;
      c.alive[s] = true;
      c.label[i] = c.next_id++;
      renorm(s);
    }
  }
}

// (n_slots, next_id, attached) of one memory after attaching its rows.
py::tuple attach_rows(py::array_t<float, py::array::c_style | py::array::forcecast> x,
                      py::array_t<int64_t, py::array::c_style | py::array::forcecast> rows, const py::object& sums_a,
                      const py::object& counts_a, const py::object& alive_a, const py::object& ids_a,
                      const py::object& label_a, int64_t n_slots, int64_t next_id, double attach_threshold,
                      double lenient_floor, int64_t size_cap) {
  Columns c = checked(std::move(x), std::move(rows), sums_a, counts_a, alive_a, ids_a, label_a, n_slots, next_id);
  {
    xmem::GilRelease nogil;
    attach(c, attach_threshold, lenient_floor, size_cap);
  }
  return py::make_tuple(c.n_slots, c.next_id, c.attached);
}

// attach_rows of many memories in one call: items is a sequence of (x, rows, sums, counts, alive, ids,
// label, n_slots, next_id), each checked before any is edited; returns a list of (n_slots, next_id,
// attached), one per item. One item per memory: the items' columns must not overlap (the caller's check).
py::list attach_rows_batch(const py::sequence& items, double attach_threshold, double lenient_floor, int64_t size_cap) {
  std::vector<Columns> cols;
  cols.reserve(items.size());
  for (const py::object item : items) {
    const auto t = py::reinterpret_borrow<py::sequence>(item);
    if (t.size() != 9) throw std::invalid_argument("attach_rows_batch: each item is (x, rows, sums, counts, alive, ids, label, n_slots, next_id)");
    cols.push_back(checked(t[0].cast<py::array_t<float, py::array::c_style | py::array::forcecast>>(),
                           t[1].cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>(),
                           py::object(t[2]), py::object(t[3]), py::object(t[4]), py::object(t[5]), py::object(t[6]),
                           t[7].cast<int64_t>(), t[8].cast<int64_t>()));
  }
  {
    xmem::GilRelease nogil;
    for (Columns& c : cols) attach(c, attach_threshold, lenient_floor, size_cap);
  }
  py::list out;
  for (const Columns& c : cols) out.append(py::make_tuple(c.n_slots, c.next_id, c.attached));
  return out;
}

// merge_pairs' rule on raw columns, appending each pair's t and j slots (checked by the callers: counts
// and n_slots below 2**31 in magnitude, so the sums and keys below are exact in int64).
void pairs_of(const int64_t* lv, int64_t n_live, const int32_t* ix, const float* sm, int64_t cols, const int64_t* cnt,
              int64_t n_slots, int64_t k, int64_t tiny_size, int64_t merge_candidates, int64_t size_cap,
              double pair_threshold, std::vector<int64_t>& ts, std::vector<int64_t>& js) {
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
      if (cnt[t] + cnt[j] > size_cap) continue;
      if (!tiny && !(static_cast<double>(sm[r * cols + c]) >= pair_threshold)) continue;
      if (seen.insert(std::min(t, j) * n_slots + std::max(t, j)).second) {
        ts.push_back(t);
        js.push_back(j);
      }
    }
  }
}

// One memory's graph columns, checked: live [L] int64 slots < min(n_slots, cap), idx [L, k'] int32
// positions in live (< L), sim [L, k'] float32, counts [cap] int64.
void check_graph(const py::array_t<int64_t, py::array::c_style>& live, const py::array_t<int32_t, py::array::c_style>& idx,
                 const py::array_t<float, py::array::c_style>& sim, const py::array_t<int64_t, py::array::c_style>& counts,
                 int64_t n_slots) {
  const int64_t n_live = live.shape(0);
  if (live.ndim() != 1 || idx.ndim() != 2 || sim.ndim() != 2 || idx.shape(0) != n_live || sim.shape(0) != n_live ||
      sim.shape(1) != idx.shape(1) || counts.ndim() != 1)
    throw std::invalid_argument("merge_pairs: expected live [L], idx and sim [L, k] of the same shape, counts [cap]");
  const int64_t cap = counts.shape(0);
  const int64_t* lv = live.data();
  const int32_t* ix = idx.data();
  for (int64_t r = 0; r < n_live; ++r)
    if (lv[r] < 0 || lv[r] >= cap || lv[r] >= n_slots) throw std::invalid_argument("merge_pairs: a live slot outside the columns");
  for (int64_t e = 0; e < n_live * idx.shape(1); ++e)
    if (ix[e] >= n_live) throw std::invalid_argument("merge_pairs: a neighbour outside the live slots");
  constexpr int64_t kBelow31 = int64_t(1) << 31;
  const int64_t* cnt = counts.data();
  if (n_slots >= kBelow31) throw std::invalid_argument("merge_pairs: n_slots must be below 2**31");
  for (int64_t t = 0; t < cap; ++t)
    if (cnt[t] <= -kBelow31 || cnt[t] >= kBelow31) throw std::invalid_argument("merge_pairs: counts must lie strictly within +-2**31");
}

py::array_t<int64_t> to_array(const std::vector<int64_t>& v) {
  py::array_t<int64_t> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
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
  check_graph(live, idx, sim, counts, n_slots);
  std::vector<int64_t> ts, js;
  pairs_of(live.data(), live.shape(0), idx.data(), sim.data(), idx.shape(1), counts.data(), n_slots, k, tiny_size,
           merge_candidates, size_cap, pair_threshold, ts, js);
  return py::make_tuple(to_array(ts), to_array(js));
}

// merge_pairs of many memories: items is a sequence of (live, idx, sim, counts, ids [cap] int64,
// n_slots, k); returns (item [P], t ids [P], j ids [P]) int64: the pairs of item 0, then item 1, ...,
// each memory's in its rule's order, as theme ids (ids[slot]).
py::tuple merge_pairs_batch(const py::sequence& items, int64_t tiny_size, int64_t merge_candidates, int64_t size_cap,
                            double pair_threshold) {
  std::vector<int64_t> owner, t_ids, j_ids, ts, js;
  int64_t b = 0;
  for (const py::object h : items) {
    const auto t = py::reinterpret_borrow<py::sequence>(h);
    if (t.size() != 7) throw std::invalid_argument("merge_pairs_batch: each item is (live, idx, sim, counts, ids, n_slots, k)");
    const auto live = t[0].cast<py::array_t<int64_t, py::array::c_style>>();
    const auto idx = t[1].cast<py::array_t<int32_t, py::array::c_style>>();
    const auto sim = t[2].cast<py::array_t<float, py::array::c_style>>();
    const auto counts = t[3].cast<py::array_t<int64_t, py::array::c_style>>();
    const auto ids = t[4].cast<py::array_t<int64_t, py::array::c_style>>();
    const int64_t n_slots = t[5].cast<int64_t>(), k = t[6].cast<int64_t>();
    check_graph(live, idx, sim, counts, n_slots);
    if (ids.ndim() != 1 || ids.shape(0) != counts.shape(0)) throw std::invalid_argument("merge_pairs_batch: ids must be [cap]");
    ts.clear(), js.clear();
    pairs_of(live.data(), live.shape(0), idx.data(), sim.data(), idx.shape(1), counts.data(), n_slots, k, tiny_size,
             merge_candidates, size_cap, pair_threshold, ts, js);
    const int64_t* id = ids.data();
    for (size_t p = 0; p < ts.size(); ++p) owner.push_back(b), t_ids.push_back(id[ts[p]]), j_ids.push_back(id[js[p]]);
    ++b;
  }
  return py::make_tuple(to_array(owner), to_array(t_ids), to_array(j_ids));
}

}  // namespace

void register_attach(py::module_& m) {
  m.def("merge_pairs", &merge_pairs, py::arg("live"), py::arg("idx"), py::arg("sim"), py::arg("counts"), py::arg("n_slots"),
        py::arg("k"), py::arg("tiny_size"), py::arg("merge_candidates"), py::arg("size_cap"), py::arg("pair_threshold"),
        "a memory's merge candidates (t slots, j slots) from its theme graph, in the per-theme rule's order (ops/attach)");
  m.def("merge_pairs_batch", &merge_pairs_batch, py::arg("items"), py::arg("tiny_size"), py::arg("merge_candidates"),
        py::arg("size_cap"), py::arg("pair_threshold"),
        "merge_pairs of many memories' graphs: (item, t ids, j ids) of every pair, item by item (ops/attach)");
  m.def("attach_rows", &attach_rows, py::arg("x"), py::arg("rows"), py::arg("sums"), py::arg("counts"), py::arg("alive"),
        py::arg("ids"), py::arg("label"), py::arg("n_slots"), py::arg("next_id"), py::arg("attach_threshold"),
        py::arg("lenient_floor"), py::arg("size_cap"), "attach rows to the nearest live theme or open one (ops/attach)");
  m.def("attach_rows_batch", &attach_rows_batch, py::arg("items"), py::arg("attach_threshold"), py::arg("lenient_floor"),
        py::arg("size_cap"), "attach_rows of many memories in one call: a (n_slots, next_id, attached) per item (ops/attach)");
}
