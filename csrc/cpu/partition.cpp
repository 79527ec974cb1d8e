// The f(P) partition state's block rebuild (ops/objective/state.py::_blocks), its bookkeeping in one
// pass: the themes of each memory's block (its distinct labels, ascending), each theme's members
// (local rows, ascending) and count, and its sum: a kept theme's old sum continued with its rows
// from the block's tail on, any other theme's rows summed from zero, every sum one float64 add per
// element in row order (np.add.at's bits, as add_rows), so a sum is bit-identical to a fresh one.
// The NumPy steps it replaces (unique keys, searchsorted, the kept themes' matching, bincount, a
// stable argsort) were some twenty calls per rebuild, a few hundred rebuilds per build.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

using I64 = py::array_t<int64_t, py::array::c_style>;
using F64 = py::array_t<double, py::array::c_style>;
using B8 = py::array_t<bool, py::array::c_style>;

// x [N, d] float64 node rows; rows [M] the blocks' node rows in x; labels [M] >= 0; row_off [nb+1]
// (block b: entries row_off[b]:row_off[b+1]); the kept themes: kept_off [nb+1] over kept_label [T0],
// kept_sum [T0, d], keep [T0], tail [nb] (a kept theme's rows before its block's tail are in its sum).
// Returns (theme_off [nb+1], theme_label [T], sums [T, d], counts [T], members [M] local rows
// grouped by theme).
py::tuple theme_blocks(const F64& x, const I64& rows, const I64& labels, const I64& row_off, const I64& kept_off,
                       const I64& kept_label, const F64& kept_sum, const B8& keep, const I64& tail) {
  const auto bad = [](const std::string& what) { throw py::value_error("theme_blocks: " + what); };
  if (x.ndim() != 2) bad("x: expected [N, d]");
  const int64_t n = x.shape(0), d = x.shape(1), m = rows.size(), nb = row_off.size() - 1;
  if (rows.ndim() != 1 || labels.ndim() != 1 || labels.size() != m) bad("rows and labels: expected [M] each");
  if (row_off.ndim() != 1 || nb < 0 || kept_off.ndim() != 1 || kept_off.size() != nb + 1 || tail.size() != nb)
    bad("row_off and kept_off: expected [nb+1], tail [nb]");
  const int64_t t0 = kept_label.size();
  if (kept_sum.ndim() != 2 || kept_sum.shape(0) != t0 || kept_sum.shape(1) != d || keep.size() != t0)
    bad("kept_label, kept_sum and keep: expected [T0], [T0, d], [T0]");
  const int64_t* ro = row_off.data();
  const int64_t* ko = kept_off.data();
  const int64_t* r = rows.data();
  const int64_t* lab = labels.data();
  if (ro[0] != 0 || ro[nb] != m || ko[0] != 0 || ko[nb] != t0) bad("offsets must run from 0 to their rows' count");
  for (int64_t b = 0; b < nb; ++b)
    if (ro[b + 1] < ro[b] || ko[b + 1] < ko[b]) bad("offsets must not decrease");
  for (int64_t i = 0; i < m; ++i) {
    if (r[i] < 0 || r[i] >= n) bad("a row outside 0.." + std::to_string(n - 1));
    if (lab[i] < 0) bad("labels must be non-negative");
  }
  // each block's entries ordered by (label, entry): themes in label order, members ascending
  std::vector<int64_t> order(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) order[size_t(i)] = i;
  std::vector<int64_t> theme_off(static_cast<size_t>(nb + 1), 0), theme_label, inv(static_cast<size_t>(m));
  for (int64_t b = 0; b < nb; ++b) {
    auto first = order.begin() + ro[b], last = order.begin() + ro[b + 1];
    std::stable_sort(first, last, [&](int64_t a, int64_t c) { return lab[a] < lab[c]; });
    int64_t t = int64_t(theme_label.size()) - 1;
    for (auto it = first; it != last; ++it) {
      if (it == first || lab[*it] != lab[*(it - 1)]) {
        theme_label.push_back(lab[*it]);
        ++t;
      }
      inv[size_t(*it)] = t;
    }
    theme_off[size_t(b + 1)] = int64_t(theme_label.size());
  }
  const int64_t nt = int64_t(theme_label.size());
  I64 out_off(nb + 1), out_label(nt), counts(nt), members(m);
  F64 sums({nt, d});
  std::copy(theme_off.begin(), theme_off.end(), out_off.mutable_data());
  std::copy(theme_label.begin(), theme_label.end(), out_label.mutable_data());
  int64_t* cnt = counts.mutable_data();
  std::fill(cnt, cnt + nt, 0);
  for (int64_t i = 0; i < m; ++i) ++cnt[inv[size_t(i)]];
  int64_t* mem = members.mutable_data();
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t p = ro[b]; p < ro[b + 1]; ++p) mem[p] = order[size_t(p)] - ro[b];
  double* s = sums.mutable_data();
  std::fill(s, s + nt * d, 0.0);
  const double* xs = x.data();
  const double* ks = kept_sum.data();
  const int64_t* kl = kept_label.data();
  const bool* kp = keep.data();
  const int64_t* tl = tail.data();
  std::vector<char> has(static_cast<size_t>(nt), 0);
  {
    xmem::GilRelease release;
    for (int64_t b = 0; b < nb; ++b) {  // kept themes: their old sums
      const int64_t* lo = theme_label.data() + theme_off[size_t(b)];
      const int64_t* hi = theme_label.data() + theme_off[size_t(b + 1)];
      for (int64_t k = ko[b]; k < ko[b + 1]; ++k) {
        if (!kp[k]) continue;
        const int64_t* at = std::lower_bound(lo, hi, kl[k]);
        if (at == hi || *at != kl[k]) continue;
        const int64_t t = int64_t(at - theme_label.data());
        std::copy(ks + k * d, ks + (k + 1) * d, s + t * d);
        has[size_t(t)] = 1;
      }
    }
    for (int64_t b = 0; b < nb; ++b) {  // then every row a sum takes, in row order
      for (int64_t i = ro[b]; i < ro[b + 1]; ++i) {
        const int64_t t = inv[size_t(i)];
        if (has[size_t(t)] && i - ro[b] < tl[b]) continue;
        double* row = s + t * d;
        const double* xi = xs + r[i] * d;
        for (int64_t j = 0; j < d; ++j) row[j] += xi[j];
      }
    }
  }
  return py::make_tuple(out_off, out_label, sums, counts, members);
}

}  // namespace

void register_partition(py::module_& m) {
  m.def("theme_blocks", &theme_blocks, py::arg("x"), py::arg("rows"), py::arg("labels"), py::arg("row_off"),
        py::arg("kept_off"), py::arg("kept_label"), py::arg("kept_sum"), py::arg("keep"), py::arg("tail"),
        "the f(P) state's blocks: (theme_off, theme_label, sums, counts, members local), sums in row order");
}
