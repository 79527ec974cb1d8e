// Row-wise helpers of the construction's exact-bit arithmetic (compiled with -ffp-contract=off: dot4
// must round alike everywhere).
// Rows added into per-group sums in row order (ops/rows.py add_rows_in_order): for i = 0..m-1,
// sums[group[i]] += x[rows[i]], every element one float64 add in that order, the bits of
// np.add.at(sums, group, x[rows]) (the theme stage's f(P) state and a memory's theme sums rest on them).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "xmemory/cpu_microkernel.h"
#include "xmemory/gil.h"

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
    xmem::GilRelease release;
    add(s, d, g, v, r, m);
  } else if (py::isinstance<py::array_t<float>>(x)) {
    const float* v = static_cast<const float*>(x.data());
    xmem::GilRelease release;
    add(s, d, g, v, r, m);
  } else {
    bad("x: expected float32 or float64");
  }
}

#include "xmemory/dot4.inc"
#include "xmemory/exp_fixed.inc"

// np.argmax of one row (the first largest; a NaN is the largest, its first occurrence)
int64_t argmax(const double* v, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k && !std::isnan(v[best]); ++j)
    if (v[j] > v[best] || std::isnan(v[j])) best = j;
  return best;
}

// The two best of one row's cosines v[0, k) (argmax, the pick made -inf, argmax again): idx -1 where
// the value is not finite.
void top2_row(double* v, int64_t k, int64_t* ti, double* tv) {
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  for (int p = 0; p < 2; ++p) {
    const int64_t j = argmax(v, k);
    tv[p] = v[j];
    ti[p] = std::isfinite(v[j]) ? j : -1;
    v[j] = kNone;
  }
}

#define XMEM_PER_ISA_BODY "top2_pairs.inc"
#include "per_isa.inc"

// One block's top-2 (k themes from row t0 of u [., d]): every pair once, dot4(lower row, higher row),
// tiled for the best ISA this CPU runs (top2_pairs.inc; the same numbers in every copy).
void top2_block(const double* u, int64_t d, int64_t t0, int64_t k, int64_t* ti, double* tv) {
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  if (k < 2) {
    for (int64_t i = 0; i < k; ++i) {
      ti[2 * (t0 + i)] = ti[2 * (t0 + i) + 1] = -1;
      tv[2 * (t0 + i)] = tv[2 * (t0 + i) + 1] = kNone;
    }
    return;
  }
#ifdef XMEM_X86
  switch (xmem::cpu_isa()) {
    case xmem::Isa::Avx512: return isa_avx512::top2_block_tiled(u, d, t0, k, ti, tv);
    case xmem::Isa::Avx2: return isa_avx2::top2_block_tiled(u, d, t0, k, ti, tv);
    default: break;
  }
#endif
  isa_base::top2_block_tiled(u, d, t0, k, ti, tv);
}

// po = dot4 of every row of pa [n, d] with every row of pb [m, d], [n, m]: dot4_gram_tiled for the
// best ISA this CPU runs.
void gram_rows(const double* pa, const double* pb, int64_t n, int64_t m, int64_t d, double* po) {
#ifdef XMEM_X86
  switch (xmem::cpu_isa()) {
    case xmem::Isa::Avx512: return isa_avx512::dot4_gram_tiled(pa, pb, n, m, d, po);
    case xmem::Isa::Avx2: return isa_avx2::dot4_gram_tiled(pa, pb, n, m, d, po);
    default: break;
  }
#endif
  isa_base::dot4_gram_tiled(pa, pb, n, m, d, po);
}

void check_top2_off(const char* op, int64_t t_all, const int64_t* off, int64_t nb) {
  if (off[0] != 0 || off[nb] != t_all) throw py::value_error(std::string(op) + ": theme_off must run from 0 to T");
  for (int64_t b = 0; b < nb; ++b)
    if (off[b + 1] < off[b]) throw py::value_error(std::string(op) + ": theme_off must not decrease");
}

// Per block of unit rows (theme centroids; block b is rows theme_off[b]:theme_off[b+1] of unit [T, d]
// float64): each row's two nearest other rows of its block by cosine, dot4's fixed order (the same bits
// on every ISA, unlike a BLAS product), as (idx [T, 2] int64 rows local to the block, cos [T, 2]
// float64); the first of equals; -1 / -inf where there is none or the value is not finite.
py::tuple top2_blocks(const py::array_t<double, py::array::c_style>& unit, const py::array_t<int64_t, py::array::c_style>& theme_off) {
  if (unit.ndim() != 2 || theme_off.ndim() != 1 || theme_off.shape(0) < 1)
    throw py::value_error("top2_blocks: expected unit [T, d] float64 and theme_off [nb+1] int64");
  const int64_t t_all = unit.shape(0), d = unit.shape(1), nb = theme_off.shape(0) - 1;
  const int64_t* off = theme_off.data();
  check_top2_off("top2_blocks", t_all, off, nb);
  py::array_t<int64_t> idx({t_all, int64_t(2)});
  py::array_t<double> val({t_all, int64_t(2)});
  const double* u = unit.data();
  int64_t* ti = idx.mutable_data();
  double* tv = val.mutable_data();
  {
    xmem::GilRelease release;
    for (int64_t b = 0; b < nb; ++b) top2_block(u, d, off[b], off[b + 1] - off[b], ti, tv);
  }
  return py::make_tuple(idx, val);
}

// top2_blocks after an edit, from the rows' kept top-2 (op top2_update, its reference in ops/objective/reference.py): per block
// of k themes with f fresh rows (fresh [T] bool: changed or new), the block is done whole when 2f >= k
// (or k < 3); else each fresh row is compared with every row of its block, and a kept row (prev_idx
// [T, 2] its top-2 as local rows of the block now, prev_cos [T, 2] their cosines) takes the first two of
// its kept pair and the fresh rows by (cosine descending, row ascending), unless a kept entry is -1 or
// one of those cosines is not finite: then its row is done whole. Every cosine is dot4(lower row, higher
// row), as top2_blocks takes it: the same bits as top2_blocks when the kept pairs are the top-2 among the
// kept rows.
py::tuple top2_update(const py::array_t<double, py::array::c_style>& unit, const py::array_t<int64_t, py::array::c_style>& theme_off,
                      const py::array_t<bool, py::array::c_style>& fresh, const py::array_t<int64_t, py::array::c_style>& prev_idx,
                      const py::array_t<double, py::array::c_style>& prev_cos) {
  if (unit.ndim() != 2 || theme_off.ndim() != 1 || theme_off.shape(0) < 1)
    throw py::value_error("top2_update: expected unit [T, d] float64 and theme_off [nb+1] int64");
  const int64_t t_all = unit.shape(0), d = unit.shape(1), nb = theme_off.shape(0) - 1;
  if (fresh.ndim() != 1 || fresh.shape(0) != t_all) throw py::value_error("top2_update: fresh must be [T] bool");
  if (prev_idx.ndim() != 2 || prev_idx.shape(0) != t_all || prev_idx.shape(1) != 2 || prev_cos.ndim() != 2 ||
      prev_cos.shape(0) != t_all || prev_cos.shape(1) != 2)
    throw py::value_error("top2_update: prev_idx and prev_cos must be [T, 2]");
  const int64_t* off = theme_off.data();
  check_top2_off("top2_update", t_all, off, nb);
  const bool* fr = fresh.data();
  const int64_t* pi = prev_idx.data();
  const double* pc = prev_cos.data();
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = off[b]; i < off[b + 1]; ++i)
      for (int p = 0; p < 2; ++p)
        if (pi[2 * i + p] < -1 || pi[2 * i + p] >= off[b + 1] - off[b])
          throw py::value_error("top2_update: prev_idx must be local rows of the block or -1");
  py::array_t<int64_t> idx({t_all, int64_t(2)});
  py::array_t<double> val({t_all, int64_t(2)});
  const double* u = unit.data();
  int64_t* ti = idx.mutable_data();
  double* tv = val.mutable_data();
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  {
    xmem::GilRelease release;
    std::vector<double> cf, row, fr_rows;
    std::vector<int64_t> rows, slot;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t t0 = off[b], k = off[b + 1] - off[b];
      rows.clear();
      for (int64_t i = 0; i < k; ++i)
        if (fr[t0 + i]) rows.push_back(i);
      const int64_t nf = static_cast<int64_t>(rows.size());
      if (k < 3 || 2 * nf >= k) {
        top2_block(u, d, t0, k, ti, tv);
        continue;
      }
      // the fresh rows' cosines [nf, k] (their own -inf), and each row's slot among them (-1 kept)
      slot.assign(static_cast<size_t>(k), -1);
      cf.assign(static_cast<size_t>(nf * k), kNone);
      for (int64_t f = 0; f < nf; ++f) slot[static_cast<size_t>(rows[f])] = f;
      // dot4(fresh row, row j): its products are dot4(lower, higher)'s (a product does not depend on
      // its operands' order), so each pair has the value top2_blocks gives it (a NaN's sign aside)
      fr_rows.resize(static_cast<size_t>(nf * d));
      for (int64_t f = 0; f < nf; ++f) std::copy(u + (t0 + rows[f]) * d, u + (t0 + rows[f] + 1) * d, fr_rows.begin() + f * d);
      gram_rows(fr_rows.data(), u + t0 * d, nf, k, d, cf.data());
      for (int64_t f = 0; f < nf; ++f) cf[static_cast<size_t>(f * k + rows[f])] = kNone;
      row.resize(static_cast<size_t>(k));
      for (int64_t f = 0; f < nf; ++f) {
        std::copy(cf.begin() + f * k, cf.begin() + (f + 1) * k, row.begin());
        top2_row(row.data(), k, ti + 2 * (t0 + rows[f]), tv + 2 * (t0 + rows[f]));
      }
      for (int64_t i = 0; i < k; ++i) {
        if (slot[static_cast<size_t>(i)] >= 0) continue;
        const int64_t* p = pi + 2 * (t0 + i);
        const double* c = pc + 2 * (t0 + i);
        bool whole = p[0] < 0 || p[1] < 0 || !std::isfinite(c[0]) || !std::isfinite(c[1]);
        for (int64_t f = 0; f < nf && !whole; ++f) whole = !std::isfinite(cf[static_cast<size_t>(f * k + i)]);
        int64_t* oi = ti + 2 * (t0 + i);
        double* ov = tv + 2 * (t0 + i);
        if (whole) {
          for (int64_t j = 0; j < k; ++j) {
            const int64_t g = slot[static_cast<size_t>(j)];
            if (j == i)
              row[static_cast<size_t>(j)] = kNone;
            else if (g >= 0)
              row[static_cast<size_t>(j)] = cf[static_cast<size_t>(g * k + i)];
            else
              row[static_cast<size_t>(j)] = dot4(u + (t0 + std::min(i, j)) * d, u + (t0 + std::max(i, j)) * d, d);
          }
          top2_row(row.data(), k, oi, ov);
          continue;
        }
        // the first two of {kept pair, fresh rows} by (cosine descending, row ascending)
        int64_t bi[2] = {-1, -1};
        double bv[2] = {kNone, kNone};
        const auto offer = [&](int64_t j, double v) {
          if (bi[0] < 0 || v > bv[0] || (v == bv[0] && j < bi[0])) {
            bi[1] = bi[0], bv[1] = bv[0], bi[0] = j, bv[0] = v;
          } else if (bi[1] < 0 || v > bv[1] || (v == bv[1] && j < bi[1])) {
            bi[1] = j, bv[1] = v;
          }
        };
        offer(p[0], c[0]);
        offer(p[1], c[1]);
        for (int64_t f = 0; f < nf; ++f) offer(rows[f], cf[static_cast<size_t>(f * k + i)]);
        oi[0] = bi[0], oi[1] = bi[1], ov[0] = bv[0], ov[1] = bv[1];
      }
    }
  }
  return py::make_tuple(idx, val);
}

// dot4 of every row of a [n, d] with every row of b [m, d] (float64): [n, m] float64, the same bits on
// every ISA (the construction's cosines that decide something: theme gists, component edges).
py::array_t<double> dot4_gram(const py::array_t<double, py::array::c_style>& a, const py::array_t<double, py::array::c_style>& b) {
  if (a.ndim() != 2 || b.ndim() != 2 || a.shape(1) != b.shape(1))
    throw py::value_error("dot4_gram: expected a [n, d] and b [m, d] float64");
  const int64_t n = a.shape(0), m = b.shape(0), d = a.shape(1);
  py::array_t<double> out({n, m});
  const double* pa = a.data();
  const double* pb = b.data();
  double* po = out.mutable_data();
  {
    xmem::GilRelease release;
    gram_rows(pa, pb, n, m, d, po);
  }
  return out;
}

// segment.boundary_runs' drift rule: the starts of the runs of x [n, d] float32 (unit rows), a run
// cut before message i when hard[i] (a session change or time gap) or, once the run holds
// min_messages, when cos(x_i, the run's float64 sum) < drift_threshold (dot4 order: sqrt(dot4(s, s))
// and dot4(x_i, s)); the sum takes each row as it joins. Returns the starts, 0 first (n > 0).
py::array_t<int64_t> drift_runs(const py::array_t<float, py::array::c_style>& x, const py::array_t<bool, py::array::c_style>& hard,
                                int64_t min_messages, double drift_threshold) {
  if (x.ndim() != 2 || hard.ndim() != 1 || hard.shape(0) != x.shape(0) || x.shape(0) < 1)
    throw py::value_error("drift_runs: expected x [n, d] float32 (n >= 1) and hard [n] bool");
  const int64_t n = x.shape(0), d = x.shape(1);
  const float* px = x.data();
  const bool* ph = hard.data();
  std::vector<int64_t> starts{0};
  {
    xmem::GilRelease release;
    std::vector<double> acc(px, px + d);
    int64_t start = 0;
    for (int64_t i = 1; i < n; ++i) {
      const float* xi = px + i * d;
      bool cut = ph[i];
      if (!cut && i - start >= min_messages) {
        const double norm = std::sqrt(dot4(acc.data(), acc.data(), d));
        cut = norm > 0 && dot4(xi, acc.data(), d) / norm < drift_threshold;
      }
      if (cut) {
        starts.push_back(i);
        start = i;
        for (int64_t k = 0; k < d; ++k) acc[static_cast<size_t>(k)] = static_cast<double>(xi[k]);
      } else {
        for (int64_t k = 0; k < d; ++k) acc[static_cast<size_t>(k)] += static_cast<double>(xi[k]);
      }
    }
  }
  py::array_t<int64_t> out(static_cast<py::ssize_t>(starts.size()));
  std::copy(starts.begin(), starts.end(), out.mutable_data());
  return out;
}

}  // namespace

// CSR offsets o [nb+1] over `total` entries: every block inside them and none decreasing, else
// ValueError(message).
void check_blocks(const int64_t* o, int64_t nb, int64_t total, const char* message) {
  for (int64_t b = 0; b < nb; ++b)
    if (o[b] < 0 || o[b] > o[b + 1] || o[b + 1] > total) throw py::value_error(message);
}

// The sum of each segment of v [n] float64 (segment b: v[off[b]:off[b+1]]) in sum4's order: [nb].
py::array_t<double> segment_sums(const py::array_t<double, py::array::c_style>& v,
                                 const py::array_t<int64_t, py::array::c_style>& off) {
  if (v.ndim() != 1 || off.ndim() != 1 || off.size() < 1) throw py::value_error("segment_sums: expected v [n], off [nb+1]");
  const int64_t nb = off.size() - 1, n = v.size();
  const int64_t* o = off.data();
  check_blocks(o, nb, n, "segment_sums: offsets outside v or decreasing");
  py::array_t<double> out(nb);
  double* r = out.mutable_data();
  const double* x = v.data();
  for (int64_t b = 0; b < nb; ++b) r[b] = sum4(x + o[b], o[b + 1] - o[b]);
  return out;
}

constexpr int64_t kBelow31 = int64_t(1) << 31;

// exp_fixed of each element of v [n] float64 (f_blocks' exp, exposed for its tests)
py::array_t<double> exp_fixed_array(const py::array_t<double, py::array::c_style | py::array::forcecast>& v) {
  py::array_t<double> out(v.size());
  const double* pv = v.data();
  double* po = out.mutable_data();
  for (py::ssize_t i = 0; i < v.size(); ++i) po[i] = exp_fixed(pv[i]);
  return out;
}


// The values of a block sorted ascending, NaN last (np.sort's order), and its median as
// ops/objective/state.py _f_blocks takes it: the middle one, or the mean of the middle two.
double median_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end(), [](double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); });
  const size_t k = v.size();
  return k % 2 == 1 ? v[k / 2] : (v[(k - 1) / 2] + v[k / 2]) / 2;
}

// f(P) of every block (ops/objective/state.py _f_blocks, bit for bit): norms [T] the themes' sum
// norms, counts [T], s [T] each theme's nearest cosine (0 in a block of one theme), theme_off [nb+1],
// n [nb] node counts. Per block with themes and nodes, objective_from_parts' operations in its order:
// medians as order statistics, the Gaussian's denominator 2 * (sigma * sigma), exp by exp_fixed, the
// mean sum4 of the block's terms / k; 0 elsewhere.
py::array_t<double> f_blocks(const py::array_t<double, py::array::c_style>& norms,
                             const py::array_t<int64_t, py::array::c_style>& counts,
                             const py::array_t<double, py::array::c_style>& s, const py::array_t<int64_t, py::array::c_style>& theme_off,
                             const py::array_t<int64_t, py::array::c_style>& n, double eps) {
  if (norms.ndim() != 1 || counts.ndim() != 1 || s.ndim() != 1 || theme_off.ndim() != 1 || n.ndim() != 1 ||
      counts.size() != norms.size() || s.size() != norms.size() || theme_off.size() != n.size() + 1)
    throw py::value_error("f_blocks: expected norms, counts, s [T], theme_off [nb+1], n [nb]");
  const int64_t nb = n.size(), total = norms.size();
  const int64_t* o = theme_off.data();
  check_blocks(o, nb, total, "f_blocks: theme offsets outside the themes or decreasing");
  for (int64_t b = 0; b < nb; ++b)  // (n * n is then exact in int64)
    if (n.data()[b] >= kBelow31) throw py::value_error("f_blocks: n must be below 2**31");
  py::array_t<double> out(nb);
  double* f = out.mutable_data();
  const double* nrm = norms.data();
  const double* near = s.data();
  const int64_t* cnt = counts.data();
  const int64_t* nodes = n.data();
  std::vector<double> sv, dev, term;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t t0 = o[b], k = o[b + 1] - o[b];
    f[b] = 0.0;
    if (k <= 0 || nodes[b] <= 0) continue;
    sv.assign(near + t0, near + t0 + k);
    if (k == 1) sv[0] = 0.0;
    dev = sv;
    const double m = median_of(dev);
    for (int64_t i = 0; i < k; ++i) dev[i] = std::fabs(sv[i] - m);
    const double sigma = median_of(dev) + eps;
    const double den = 2.0 * (sigma * sigma);
    term.resize(static_cast<size_t>(k));
    double sumsq = 0.0;  // integers: exact in any order
    for (int64_t i = 0; i < k; ++i) {
      const double z = sv[i] - m, c = static_cast<double>(cnt[t0 + i]);
      term[i] = nrm[t0 + i] / c * exp_fixed(-(z * z) / den);
      sumsq += c * c;
    }
    const double kd = static_cast<double>(k);
    f[b] = static_cast<double>(nodes[b] * nodes[b]) / (kd * sumsq) + sum4(term.data(), k) / kd;
  }
  return out;
}

// Row norms of x [m, d] float64, sqrt(dot4(x_i, x_i)) (ops/rows row_norms), and, with `unit`, the rows
// divided by them (zero where the norm is not > 0), as float64 or rounded to float32.
py::array row_norms_c(const py::array_t<double, py::array::c_style>& x, bool unit, bool f32) {
  if (x.ndim() != 2) throw py::value_error("row_norms: expected x [m, d]");
  const int64_t m = x.shape(0), d = x.shape(1);
  const double* v = x.data();
  if (!unit) {
    py::array_t<double> out(m);
    double* o = out.mutable_data();
    xmem::GilRelease release;
    for (int64_t i = 0; i < m; ++i) o[i] = std::sqrt(dot4(v + i * d, v + i * d, d));
    return out;
  }
  auto fill = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    xmem::GilRelease release;
    for (int64_t i = 0; i < m; ++i) {
      const double nrm = std::sqrt(dot4(v + i * d, v + i * d, d));
      const double* row = v + i * d;
      T* dst = o + i * d;
      if (nrm > 0) {
        for (int64_t j = 0; j < d; ++j) dst[j] = static_cast<T>(row[j] / nrm);
      } else {
        for (int64_t j = 0; j < d; ++j) dst[j] = T(0);
      }
    }
  };
  if (f32) {
    py::array_t<float> out({m, d});
    fill(out.mutable_data());
    return out;
  }
  py::array_t<double> out({m, d});
  fill(out.mutable_data());
  return out;
}

// Rows of [a; b] by index without forming [a; b]: out[i] = a[take[i]] when take[i] < len(a), else
// b[take[i] - len(a)]; a and b C-contiguous of one dtype and one row shape (the f(P) state re-packs
// its columns so after every edit: one copy instead of a concatenation and a gather).
py::array take_rows2(const py::array& a, const py::array& b, const py::array_t<int64_t, py::array::c_style>& take) {
  const auto bad = [](const std::string& what) { throw py::value_error("take_rows2: " + what); };
  if (a.ndim() < 1 || b.ndim() != a.ndim() || !a.dtype().equal(b.dtype())) bad("a and b: expected arrays of one dtype and rank");
  if (!(a.flags() & py::array::c_style) || !(b.flags() & py::array::c_style)) bad("a and b: expected C-contiguous arrays");
  const char kind = a.dtype().kind();
  if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f') bad("a and b: expected a bool, integer or float dtype");
  for (py::ssize_t k = 1; k < a.ndim(); ++k)
    if (a.shape(k) != b.shape(k)) bad("a and b: expected one row shape");
  if (take.ndim() != 1) bad("take: expected [n]");
  const int64_t na = a.shape(0), nb = b.shape(0), n = take.shape(0);
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  shape[0] = n;
  py::array out(a.dtype(), shape);
  size_t row_bytes = size_t(a.itemsize());
  for (py::ssize_t k = 1; k < a.ndim(); ++k) row_bytes *= size_t(a.shape(k));
  const int64_t* t = take.data();
  for (int64_t i = 0; i < n; ++i)
    if (t[i] < 0 || t[i] >= na + nb) bad("an index outside 0.." + std::to_string(na + nb - 1));
  const char* pa = static_cast<const char*>(a.data());
  const char* pb = static_cast<const char*>(b.data());
  char* po = static_cast<char*>(out.mutable_data());
  {
    xmem::GilRelease release;
    for (int64_t i = 0; i < n; ++i) {
      const char* src = t[i] < na ? pa + size_t(t[i]) * row_bytes : pb + size_t(t[i] - na) * row_bytes;
      std::memcpy(po + size_t(i) * row_bytes, src, row_bytes);
    }
  }
  return out;
}


// The live rows of many column sets (construct/theme_state.py sync_graphs): items is a sequence of
// (alive [cap] bool, sums [cap, d] float64, n_slots); item b's live slots s < n_slots, ascending.
// Returns (slots [L] int64, off [B+1] int64: item b's are slots[off[b]:off[b+1]], rows [L, d] float64
// their sums), the bits of np.concatenate of each item's sums[np.flatnonzero(alive[:n_slots])].
py::tuple live_rows(const py::sequence& items, int64_t d) {
  struct Item {
    py::array_t<bool, py::array::c_style> alive;
    py::array_t<double, py::array::c_style> sums;
    int64_t n_slots;
  };
  std::vector<Item> its;
  its.reserve(items.size());
  for (const py::object h : items) {
    const auto t = py::reinterpret_borrow<py::sequence>(h);
    if (t.size() != 3) throw py::value_error("live_rows: each item is (alive, sums, n_slots)");
    Item it{t[0].cast<py::array_t<bool, py::array::c_style>>(), t[1].cast<py::array_t<double, py::array::c_style>>(),
            t[2].cast<int64_t>()};
    if (it.alive.ndim() != 1 || it.sums.ndim() != 2 || it.sums.shape(1) != d || it.n_slots < 0 ||
        it.n_slots > it.alive.shape(0) || it.n_slots > it.sums.shape(0))
      throw py::value_error("live_rows: expected alive [cap], sums [cap, d] float64 and 0 <= n_slots <= cap");
    its.push_back(std::move(it));
  }
  py::array_t<int64_t> off(static_cast<py::ssize_t>(its.size() + 1));
  int64_t* o = off.mutable_data();
  o[0] = 0;
  for (size_t b = 0; b < its.size(); ++b) {
    const bool* a = its[b].alive.data();
    o[b + 1] = o[b] + std::count(a, a + its[b].n_slots, true);
  }
  const int64_t total = o[its.size()];
  py::array_t<int64_t> slots(total);
  py::array_t<double> rows({total, d});
  int64_t* sl = slots.mutable_data();
  double* r = rows.mutable_data();
  for (size_t b = 0; b < its.size(); ++b) {
    const bool* a = its[b].alive.data();
    const double* sm = its[b].sums.data();
    for (int64_t s = 0; s < its[b].n_slots; ++s) {
      if (!a[s]) continue;
      *sl++ = s;
      std::memcpy(r, sm + s * d, static_cast<size_t>(d) * sizeof(double));
      r += d;
    }
  }
  return py::make_tuple(slots, off, rows);
}

void register_rows(py::module_& m) {
  m.def("live_rows", &live_rows, py::arg("items"), py::arg("d"),
        "the live slots (ascending) and their sums of many (alive, sums, n_slots) column sets: (slots, off, rows)");
  m.def("dot4_gram", &dot4_gram, py::arg("a"), py::arg("b"), "dot4 of every row of a [n, d] with every row of b [m, d]: [n, m]");
  m.def("drift_runs", &drift_runs, py::arg("x"), py::arg("hard"), py::arg("min_messages"), py::arg("drift_threshold"),
        "the starts of segment.boundary_runs' runs: hard cuts, then drift from the run's sum by dot4 cosine");
  m.def("top2_blocks", &top2_blocks, py::arg("unit"), py::arg("theme_off"),
        "per block of unit rows, each row's two nearest others by dot4 cosine: (idx [T, 2] local, cos [T, 2]), -1 / -inf none");
  m.def("top2_update", &top2_update, py::arg("unit"), py::arg("theme_off"), py::arg("fresh"), py::arg("prev_idx"), py::arg("prev_cos"),
        "top2_blocks after an edit: the fresh rows against their blocks, the others' kept top-2 merged with them");
  m.def("f_blocks", &f_blocks, py::arg("norms"), py::arg("counts"), py::arg("s"), py::arg("theme_off"), py::arg("n"), py::arg("eps"),
        "f(P) of every block from its themes' sum norms, counts and nearest cosines (ops/objective/state.py _f_blocks)");
  m.def("exp_fixed", &exp_fixed_array, py::arg("v"), "exp_fixed (f_blocks' exp) of each element of v [n] float64");
  m.def("segment_sums", &segment_sums, py::arg("v"), py::arg("off"),
        "the sum of each segment v[off[b]:off[b+1]] of v [n] float64, in sum4's order");
  m.def("row_norms", &row_norms_c, py::arg("x"), py::arg("unit"), py::arg("f32"),
        "sqrt(dot4(x_i, x_i)) of each row of x [m, d] float64, or the rows divided by it");
  m.def("take_rows2", &take_rows2, py::arg("a"), py::arg("b"), py::arg("take"),
        "rows of [a; b] by index (np.concatenate([a, b])[take]) without forming [a; b]");
  m.def("add_rows", &add_rows, py::arg("sums"), py::arg("group"), py::arg("x"), py::arg("rows"),
        "sums[group[i]] += x[rows[i]] for i in order, in float64 (np.add.at's bits), in place");
}
