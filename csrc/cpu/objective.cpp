// f(P) kernels on the CPU: batched partition objective and incremental candidate scoring.
// Closed form (DESIGN section 1): cohesion_k = |S_k| / n_k, cos(mu_k, mu_j) = S_k.S_j/(|S_k||S_j|).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "xmemory/cpu_microkernel.h"
#include "xmemory/gil.h"
#include "xmemory/stats.h"

namespace py = pybind11;
using f64arr = py::array_t<double, py::array::c_style | py::array::forcecast>;
using i64arr = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

namespace {

#include "xmemory/exp_fixed.inc"

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// f from per-theme norms |S_k|, counts n_k and nearest-centroid cosines s_k (exp_fixed: no C library's
// exp, so a candidate's score is the same bits on every machine).
double finish(const std::vector<double>& norm, const std::vector<double>& cnt, std::vector<double> s, double n_nodes,
              double eps) {
  const size_t k = cnt.size();
  if (k == 0 || n_nodes == 0.0) return 0.0;
  double sumsq = 0.0;
  for (double c : cnt) sumsq += c * c;
  const double sparsity = n_nodes * n_nodes / (static_cast<double>(k) * sumsq);
  std::vector<double> tmp(s);
  const double m = xmem::median_inplace(tmp);
  for (size_t i = 0; i < k; ++i) tmp[i] = std::fabs(s[i] - m);
  const double sigma = xmem::median_inplace(tmp) + eps;
  double sem = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double z = s[i] - m;
    sem += (norm[i] / cnt[i]) * exp_fixed(-(z * z) / (2.0 * (sigma * sigma)));
  }
  return sparsity + sem / static_cast<double>(k);
}

// score_candidates' inputs (CSR, see objective/state.py: PartitionState and Candidates).
struct Scoring {
  const double *X, *TS, *TC;
  const int64_t *CNT, *TO, *NO, *TI, *MEM, *RO, *RR, *AO, *GO, *MB;
  int64_t d, K, C;
  double eps;
};

#define XMEM_PER_ISA_BODY "objective_segments.inc"
#include "per_isa.inc"

// The per-segment loop compiled for the best ISA this CPU runs (capped by XMEM_CPU_ISA).
template <typename T>
void objective_segments(const T* X, const int64_t* L, const int64_t* O, int64_t nseg, int64_t d, double eps, double* F,
                        int64_t* nonfinite) {
#ifdef XMEM_X86
  switch (xmem::cpu_isa()) {
    case xmem::Isa::Avx512: return isa_avx512::objective_segments(X, L, O, nseg, d, eps, F, nonfinite);
    case xmem::Isa::Avx2: return isa_avx2::objective_segments(X, L, O, nseg, d, eps, F, nonfinite);
    default: break;
  }
#endif
  isa_base::objective_segments(X, L, O, nseg, d, eps, F, nonfinite);
}

// (f [B], rows of x with a non-finite entry): the caller names the rows when the count is not 0.
py::tuple partition_objective(py::array x, i64arr labels, i64arr offsets, double eps) {
  if (x.ndim() != 2) throw std::invalid_argument("x must be [N, d]");
  const int64_t d = x.shape(1), nseg = offsets.shape(0) - 1;
  if (labels.size() != x.shape(0)) throw std::invalid_argument("labels must be [N]");
  const int64_t* L = labels.data();
  const int64_t* O = offsets.data();
  if (nseg < 0 || O[nseg] != x.shape(0)) throw std::invalid_argument("offsets must end at the row count");
  py::array_t<double> out(nseg);
  double* F = out.mutable_data();
  int64_t nonfinite = 0;
  if (py::isinstance<py::array_t<float>>(x)) {
    auto xf = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(x);
    xmem::GilRelease release;
    objective_segments(xf.data(), L, O, nseg, d, eps, F, &nonfinite);
  } else {
    f64arr xd = f64arr::ensure(x);
    if (!xd) throw std::invalid_argument("x must be a real array");
    xmem::GilRelease release;
    objective_segments(xd.data(), L, O, nseg, d, eps, F, &nonfinite);
  }
  return py::make_tuple(out, nonfinite);
}

// f after each candidate edit; only the changed themes are recomputed (see objective/state.py). The
// loop (objective_segments.inc: score_candidates_loop) runs in the best ISA this CPU has, same bits in all.
py::array_t<double> score_candidates(f64arr x, f64arr theme_sum, i64arr theme_count, i64arr theme_offsets,
                                     i64arr node_offsets, i64arr top_idx, f64arr top_cos, i64arr memory,
                                     i64arr rem_offsets, i64arr rem_rows, i64arr add_offsets, i64arr group_offsets,
                                     i64arr members, double eps) {
  const int64_t d = x.shape(1), K = theme_sum.shape(0), C = memory.shape(0);
  const Scoring in{x.data(), theme_sum.data(), top_cos.data(), theme_count.data(), theme_offsets.data(), node_offsets.data(),
                   top_idx.data(), memory.data(), rem_offsets.data(), rem_rows.data(), add_offsets.data(),
                   group_offsets.data(), members.data(), d, K, C, eps};
  py::array_t<double> out(C);
  double* F = out.mutable_data();
  {
    xmem::GilRelease release;
#ifdef XMEM_X86
    switch (xmem::cpu_isa()) {
      case xmem::Isa::Avx512: isa_avx512::score_candidates_loop(in, F); return out;
      case xmem::Isa::Avx2: isa_avx2::score_candidates_loop(in, F); return out;
      default: break;
    }
#endif
    isa_base::score_candidates_loop(in, F);
  }
  return out;
}

// Theme construction's kNN upkeep (ops/knn/graph.py): the k best of each row of float32 sims [r, c]
// by (sim desc, id asc), ids per row [r, c] or shared [c]; an entry is kept when its sim is finite, its
// id >= 0 and (drop_nonpositive) its sim > 0; rows padded with -1 / -inf. The selection only: the sims
// come from the caller's own products, so the graph's values are unchanged to the bit.
py::tuple topk_select(py::array_t<float, py::array::c_style | py::array::forcecast> sims, i64arr ids, int64_t k,
                      bool drop_nonpositive) {
  if (sims.ndim() != 2 || k < 1) throw std::invalid_argument("topk_select: sims must be [r, c] and k >= 1");
  const int64_t r = sims.shape(0), c = sims.shape(1);
  const bool shared = ids.ndim() == 1;
  if (shared ? ids.shape(0) != c : (ids.ndim() != 2 || ids.shape(0) != r || ids.shape(1) != c))
    throw std::invalid_argument("topk_select: ids must be [c] or [r, c]");
  py::array_t<int32_t> idx({r, k});
  py::array_t<float> out({r, k});
  const float* S = sims.data();
  const int64_t* I = ids.data();
  int32_t* OI = idx.mutable_data();
  float* OS = out.mutable_data();
  {
    xmem::GilRelease release;
    std::vector<std::pair<float, int64_t>> row;
    for (int64_t i = 0; i < r; ++i) {
      row.clear();
      const float* s = S + i * c;
      const int64_t* id = shared ? I : I + i * c;
      for (int64_t j = 0; j < c; ++j)
        if (std::isfinite(s[j]) && id[j] >= 0 && (!drop_nonpositive || s[j] > 0.0f)) row.emplace_back(s[j], id[j]);
      const int64_t m = std::min<int64_t>(k, static_cast<int64_t>(row.size()));
      std::partial_sort(row.begin(), row.begin() + m, row.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      for (int64_t q = 0; q < k; ++q) {
        OI[i * k + q] = q < m ? static_cast<int32_t>(row[q].second) : -1;
        OS[i * k + q] = q < m ? row[q].first : -std::numeric_limits<float>::infinity();
      }
    }
  }
  return py::make_tuple(idx, out);
}

// The offer step of the kNN upkeep (ops/knn/graph.py ``KnnGraph._offer``), in place: rows ``others``
// [O] see the new rows ``cand`` [C] at float32 sims s [O, C]; a row that one of them beats at its k-th
// entry (sim greater, or equal with the lower id) keeps its listed entries that are not candidates
// and takes the k best of those and all candidates (sim desc, id asc; finite, id >= 0, > 0 when
// drop_nonpositive). idx [n, k] int32 and sim [n, k] float32 are the graph's own buffers.
void offer_rows(py::array_t<float, py::array::c_style | py::array::forcecast> s, i64arr others, i64arr cand, py::array idx_buf,
                py::array sim_buf, bool drop_nonpositive) {
  const int64_t O = others.shape(0), C = cand.shape(0);
  if (s.ndim() != 2 || s.shape(0) != O || s.shape(1) != C) throw std::invalid_argument("offer_rows: s must be [len(others), len(cand)]");
  if (!py::isinstance<py::array_t<int32_t>>(idx_buf) || !py::isinstance<py::array_t<float>>(sim_buf) || idx_buf.ndim() != 2 ||
      sim_buf.ndim() != 2 || !(idx_buf.flags() & py::array::c_style) || !(sim_buf.flags() & py::array::c_style) ||
      !idx_buf.writeable() || !sim_buf.writeable() || idx_buf.shape(1) != sim_buf.shape(1) || idx_buf.shape(0) != sim_buf.shape(0))
    throw std::invalid_argument("offer_rows: idx / sim must be writable C-contiguous int32 / float32 [n, k] buffers");
  const int64_t k = idx_buf.shape(1), n = idx_buf.shape(0);
  int32_t* IDX = static_cast<int32_t*>(idx_buf.mutable_data());
  float* SIM = static_cast<float*>(sim_buf.mutable_data());
  const float* S = s.data();
  const int64_t *OT = others.data(), *CA = cand.data();
  for (int64_t o = 0; o < O; ++o)
    if (OT[o] < 0 || OT[o] >= n) throw std::invalid_argument("offer_rows: a row of others is outside the buffers");
  constexpr float kNegInfF = -std::numeric_limits<float>::infinity();
  xmem::GilRelease release;
  std::vector<int64_t> sorted_cand(CA, CA + C);
  std::sort(sorted_cand.begin(), sorted_cand.end());
  std::vector<std::pair<float, int64_t>> row;
  for (int64_t o = 0; o < O; ++o) {
    int32_t* li = IDX + OT[o] * k;
    float* ls = SIM + OT[o] * k;
    const float kth = ls[k - 1];
    const int64_t kth_id = li[k - 1] < 0 ? std::numeric_limits<int32_t>::max() : li[k - 1];
    const float* so = S + o * C;
    auto val = [&](int64_t c) { return (drop_nonpositive && so[c] <= 0.0f) ? kNegInfF : so[c]; };
    bool hit = false;
    for (int64_t c = 0; c < C && !hit; ++c) hit = val(c) > kth || (val(c) == kth && CA[c] < kth_id);
    if (!hit) continue;
    row.clear();
    auto keep = [&](float v, int64_t id) {
      if (std::isfinite(v) && id >= 0 && (!drop_nonpositive || v > 0.0f)) row.emplace_back(v, id);
    };
    for (int64_t q = 0; q < k; ++q)
      if (li[q] >= 0 && !std::binary_search(sorted_cand.begin(), sorted_cand.end(), static_cast<int64_t>(li[q]))) keep(ls[q], li[q]);
    for (int64_t c = 0; c < C; ++c) keep(val(c), CA[c]);
    const int64_t m = std::min<int64_t>(k, static_cast<int64_t>(row.size()));
    std::partial_sort(row.begin(), row.begin() + m, row.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int64_t q = 0; q < k; ++q) {
      li[q] = q < m ? static_cast<int32_t>(row[q].second) : -1;
      ls[q] = q < m ? row[q].first : kNegInfF;
    }
  }
}

}  // namespace

void register_objective(py::module_& m) {
  m.def("partition_objective", &partition_objective, py::arg("x"), py::arg("labels"), py::arg("offsets"), py::arg("eps"),
        "(f(P) per CSR segment (float64), rows of x with a non-finite entry)");
  m.def("topk_select", &topk_select, py::arg("sims"), py::arg("ids"), py::arg("k"), py::arg("drop_nonpositive"),
        "the k best of each row of float32 sims by (sim desc, id asc), padded with -1 / -inf");
  m.def("offer_rows", &offer_rows, py::arg("s"), py::arg("others"), py::arg("cand"), py::arg("idx"), py::arg("sim"),
        py::arg("drop_nonpositive"), "the kNN upkeep's offer step, in place (ops/knn/graph.py)");
  m.def("score_candidates", &score_candidates, "f(P) after each candidate edit (incremental closed form)");
}
