// Eq. 4 greedy coverage selection on the CPU: OpenMP across queries, lazy (CELF) greedy per query.
// The coverage term is submodular and the relevance term modular, so stale values are upper
// bounds; a popped candidate whose fresh value still beats every other bound (ties to the lower
// position) is the exact argmax, so picks equal the reference's (gains are summed in the same entry
// order, and a float sum over a subset of positive terms never exceeds the full one, so stale values
// stay upper bounds bit for bit). Semantics: ops/coverage/reference.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <queue>
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

struct Entry {
  double value;
  int32_t pos;
  int32_t stamp;  // the pick count when value was computed
  bool operator<(const Entry& o) const {  // max-heap on (value, -pos)
    return value < o.value || (value == o.value && pos > o.pos);
  }
};

void select_query(int32_t n, const int32_t* idx, const float* w, int64_t k, const double* rel, double alpha,
                  int64_t budget, double target, bool count_stop, std::vector<int32_t>& picks,
                  std::vector<double>& values) {
  if (n <= 0 || budget <= 0) return;
  // coverage entries per candidate in the authors' dict order: distinct valid neighbours at their
  // first occurrence with their largest weight, then self (1.0) unless listed
  std::vector<int32_t> off(n + 1, 0), node;
  std::vector<double> wt;
  node.reserve(static_cast<size_t>(n) * (k + 1));
  wt.reserve(static_cast<size_t>(n) * (k + 1));
  std::vector<int32_t> mark(n, -1), slot(n, 0);
  double z = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t begin = static_cast<int32_t>(node.size());
    for (int64_t j = 0; j < k; ++j) {
      const int32_t u = idx[i * k + j];
      if (u < 0 || u >= n) continue;
      const double wu = static_cast<double>(w[i * k + j]);
      if (mark[u] == i) {
        wt[slot[u]] = std::max(wt[slot[u]], wu);
        continue;
      }
      mark[u] = i;
      slot[u] = static_cast<int32_t>(node.size());
      node.push_back(u);
      wt.push_back(wu);
    }
    if (mark[i] != i) { node.push_back(i); wt.push_back(1.0); }
    for (size_t e = begin; e < node.size(); ++e)
      if (wt[e] > 0.0) z += wt[e];
    off[i + 1] = static_cast<int32_t>(node.size());
  }
  if (z <= 0.0) z = 1.0;
  double lo = rel[0], hi = rel[0];
  for (int32_t i = 1; i < n; ++i) { lo = std::min(lo, rel[i]); hi = std::max(hi, rel[i]); }
  std::vector<double> reln(n);
  for (int32_t i = 0; i < n; ++i) reln[i] = (hi > lo) ? (rel[i] - lo) / (hi - lo) : 0.5;
  std::vector<char> covered(n, 0);
  auto fresh = [&](int32_t i, double* gain_out) {
    double gain = 0.0;
    for (int32_t e = off[i]; e < off[i + 1]; ++e)
      if (!covered[node[e]]) gain += wt[e];
    if (gain_out) *gain_out = gain;
    return alpha * (gain / z) + (1.0 - alpha) * reln[i];
  };
  std::priority_queue<Entry> heap;
  for (int32_t i = 0; i < n; ++i) heap.push({fresh(i, nullptr), i, 0});
  double credited = 0.0;
  int32_t npicks = 0, ncovered = 0;
  while (npicks < budget && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    if (top.stamp != npicks) {  // stale bound: refresh and compare against the rest
      top.value = fresh(top.pos, nullptr);
      top.stamp = npicks;
      if (!heap.empty() && top < heap.top()) { heap.push(top); continue; }
    }
    if (!(top.value > 0.0)) break;
    double gain;
    fresh(top.pos, &gain);
    for (int32_t e = off[top.pos]; e < off[top.pos + 1]; ++e)
      if (!covered[node[e]]) { covered[node[e]] = 1; ++ncovered; }
    credited += gain;
    picks.push_back(top.pos);
    values.push_back(top.value);
    ++npicks;
    if (count_stop) {
      if (ncovered == n || (target < 1.0 && static_cast<double>(ncovered) / n >= target)) break;
    } else if (credited / z >= target) {
      break;
    }
  }
}

py::tuple coverage_select(py::array_t<int64_t, py::array::c_style | py::array::forcecast> cand_offsets,
                          py::array_t<int32_t, py::array::c_style | py::array::forcecast> nbr_idx,
                          py::array_t<float, py::array::c_style | py::array::forcecast> nbr_w,
                          py::array_t<double, py::array::c_style | py::array::forcecast> relevance, double alpha,
                          py::array_t<int64_t, py::array::c_style | py::array::forcecast> budgets, double target,
                          const std::string& stop) {
  if (stop != "count" && stop != "weight") throw py::value_error("stop: expected 'count' or 'weight'");
  const bool count_stop = stop == "count";
  const int64_t Q = cand_offsets.shape(0) - 1;
  const int64_t k = nbr_idx.ndim() == 2 ? nbr_idx.shape(1) : 0;
  const int64_t* O = cand_offsets.data();
  const int32_t* I = nbr_idx.data();
  const float* W = nbr_w.data();
  const double* R = relevance.data();
  const int64_t* BU = budgets.data();
  std::vector<std::vector<int32_t>> picks(Q);
  std::vector<std::vector<double>> values(Q);
  {
    xmem::GilRelease release;
#pragma omp parallel for schedule(dynamic, 32)
    for (int64_t q = 0; q < Q; ++q) {
      const int64_t s = O[q];
      select_query(static_cast<int32_t>(O[q + 1] - s), I + s * k, W + s * k, k, R + s, alpha, BU[q], target, count_stop,
                   picks[q], values[q]);
    }
  }
  py::array_t<int64_t> sel_off(Q + 1);
  int64_t* so = sel_off.mutable_data();
  so[0] = 0;
  for (int64_t q = 0; q < Q; ++q) so[q + 1] = so[q] + static_cast<int64_t>(picks[q].size());
  py::array_t<int32_t> sel(so[Q]);
  py::array_t<double> val(so[Q]);
  int32_t* sp = sel.mutable_data();
  double* vp = val.mutable_data();
  for (int64_t q = 0; q < Q; ++q)
    for (size_t j = 0; j < picks[q].size(); ++j) { sp[so[q] + j] = picks[q][j]; vp[so[q] + j] = values[q][j]; }
  return py::make_tuple(sel_off, sel, val);
}

}  // namespace

void register_coverage(py::module_& m) {
  m.def("coverage_select", &coverage_select, py::arg("cand_offsets"), py::arg("nbr_idx"), py::arg("nbr_w"),
        py::arg("relevance"), py::arg("alpha"), py::arg("budgets"), py::arg("target"), py::arg("stop") = "count",
        "Eq. 4 greedy coverage selection over ragged query batches (lazy greedy, exact picks)");
}
