// Batched exact cosine top-k within CSR segments on the CPU (semantics: ops/knn/reference.py).
//
// Work items are whole segments for a many-segment graph build (each unordered pair computed once,
// offered to both rows), else (segment, tile of QB query rows); OpenMP schedules them dynamically,
// so one large segment and thousands of small ones both keep every core busy. Dots go through a
// packed 6 x 32 register-blocked micro-kernel (cpu_microkernel.h, AVX-512 / AVX2+FMA / scalar
// picked at run time) and each is offered to a bounded, sorted top-k list per row (ties to the
// lower row id). Memory is O(threads x segment x d): never N x N.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "xmemory/cpu_microkernel.h"
#include "xmemory/gil.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

constexpr int64_t QB = 32;   // query rows per work item
constexpr int64_t KB = 128;  // key rows per dot block

// The k best (sim desc, id asc) seen so far for one query row.
struct TopK {
  float* sim;
  int32_t* idx;
  int64_t k, n = 0;
  bool better(float s, int32_t id, int64_t at) const { return s > sim[at] || (s == sim[at] && id < idx[at]); }
  void offer(float s, int32_t id) {
    if (n == k && !better(s, id, k - 1)) return;
    int64_t pos = n < k ? n++ : k - 1;
    while (pos > 0 && better(s, id, pos - 1)) {
      sim[pos] = sim[pos - 1];
      idx[pos] = idx[pos - 1];
      --pos;
    }
    sim[pos] = s;
    idx[pos] = id;
  }
};

// out[a * KB + b] = dot(q[a], x[b]) for a < nq, b < nk; rows of length d, row strides d. x's rows come
// packed into 32-wide panels (``pack``: xmem::pack_panels or pack_unit_panels of nk rows) and every dot
// goes through the 6 x 32 micro-kernel (cpu_microkernel.h: one sequential FMA chain per entry in every
// ISA), so a pair's similarity is bit-identical whatever the batch, tile, position or ISA.
void dot_block(xmem::Isa isa, const float* q, int64_t nq, const float* pack, int64_t nk, int64_t d, float* out) {
  if (d == 0) {  // no depth: every dot is 0 (the micro-kernel never runs to write them)
    for (int64_t r = 0; r < nq; ++r) std::fill(out + r * KB, out + r * KB + nk, 0.f);
    return;
  }
  float blk[(QB + xmem::kMR) * xmem::kNR];  // the chains of every query row against one panel
  const float* a[xmem::kMR];
  for (int64_t p = 0; p * xmem::kNR < nk; ++p) {
    const int64_t c0 = p * xmem::kNR, nc = std::min(xmem::kNR, nk - c0);
    for (int64_t t0 = 0; t0 < d; t0 += xmem::kKC) {
      const int64_t kc = std::min(xmem::kKC, d - t0);
      for (int64_t g = 0; g < nq; g += xmem::kMR) {
        for (int64_t r = 0; r < xmem::kMR; ++r) a[r] = q + std::min(g + r, nq - 1) * d + t0;
        xmem::microkernel(isa, a, pack + p * d * xmem::kNR + t0 * xmem::kNR, kc, blk + g * xmem::kNR, t0 > 0);
      }
    }
    for (int64_t r = 0; r < nq; ++r) std::memcpy(out + r * KB + c0, blk + r * xmem::kNR, sizeof(float) * nc);
  }
}

// Row i of x scaled to unit L2 norm (norm in double) into out; a zero row stays zero. The squares
// (exact in double) go to eight partial sums, entry t to sum t % 8, added in a fixed tree: one order
// whatever the ISA, and independent chains the compiler can put in vector lanes.
inline float unit_scale(const float* x, int64_t d) {
  double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t t = 0;
  for (; t + 8 <= d; t += 8)
    for (int64_t j = 0; j < 8; ++j) p[j] += double(x[t + j]) * x[t + j];
  for (int64_t j = 0; t < d; ++t, ++j) p[j] += double(x[t]) * x[t];
  const double s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  return s > 0 ? float(1.0 / std::sqrt(s)) : 0.f;
}

inline void unit_row(const float* x, int64_t d, float* out) {
  const float inv = unit_scale(x, d);
  for (int64_t t = 0; t < d; ++t) out[t] = x[t] * inv;
}

// xmem::pack_panels of the unit_row of each of the n <= KB rows of b, without a normalised copy: the
// rows come from memory once (their norms' pass leaves them in cache for the packing).
void pack_unit_panels(const float* b, int64_t n, int64_t d, float* out) {
  float inv[KB];
  for (int64_t c = 0; c < n; ++c) inv[c] = unit_scale(b + c * d, d);
  xmem::pack_panels(b, n, d, out, inv);
}

// Rows scaled to unit L2 norm; zero rows stay zero.
std::vector<float> unit_rows(const float* x, int64_t n, int64_t d, int threads) {
  std::vector<float> u(static_cast<size_t>(n * d));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) unit_row(x + i * d, d, u.data() + i * d);
  return u;
}

// Graph of one segment (rows s..e of the raw rows x, normalised here into the thread's ``unit``
// buffer, which stays in cache: no N x d normalised copy), each unordered pair computed once: the
// segment is packed into 32-column panels; for each panel, the 6-row groups that have a pair
// (i < j) in it go through the micro-kernel depth chunk by depth chunk (the panel chunk stays in
// L1 across the groups; the chains continue through ``acc``), then each pair is offered to both
// rows' top-k.
void segment_graph(xmem::Isa isa, const float* x, int64_t s, int64_t e, int64_t d, bool drop_nonpositive,
                   std::vector<TopK>& tops, std::vector<float>& unit, std::vector<float>& pack, std::vector<float>& acc) {
  const int64_t n = e - s;
  const int64_t panels = (n + xmem::kNR - 1) / xmem::kNR;
  unit.resize(static_cast<size_t>(n * d));
  for (int64_t i = 0; i < n; ++i) unit_row(x + (s + i) * d, d, unit.data() + i * d);
  const float* xs = unit.data();
  pack.resize(static_cast<size_t>(panels * xmem::kNR * d));
  acc.resize(static_cast<size_t>((n + xmem::kMR) * xmem::kNR));
  if (d == 0) std::fill(acc.begin(), acc.end(), 0.f);  // no depth: every dot is 0
  xmem::pack_panels(xs, n, d, pack.data());
  const float* a[xmem::kMR];
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t c0 = p * xmem::kNR, nc = std::min(xmem::kNR, n - c0);
    const float* panel = pack.data() + p * d * xmem::kNR;
    const int64_t rows = c0 + nc - 1;  // groups with some row i < the panel's last column
    for (int64_t t0 = 0; t0 < d; t0 += xmem::kKC) {
      const int64_t kc = std::min(xmem::kKC, d - t0);
      for (int64_t g = 0; g < rows; g += xmem::kMR) {
        for (int64_t r = 0; r < xmem::kMR; ++r) a[r] = xs + std::min(g + r, n - 1) * d + t0;
        xmem::microkernel(isa, a, panel + t0 * xmem::kNR, kc, acc.data() + g * xmem::kNR, t0 > 0);
      }
    }
    for (int64_t i = 0; i < std::min(rows, n); ++i) {
      const float* row = acc.data() + i * xmem::kNR;
      TopK& ti = tops[i];
      for (int64_t c = std::max<int64_t>(0, i + 1 - c0); c < nc; ++c) {  // j > i only
        const float v = row[c];
        if (drop_nonpositive && !(v > 0.f)) continue;
        const int64_t j = c0 + c;
        ti.offer(v, static_cast<int32_t>(s + j));
        tops[j].offer(v, static_cast<int32_t>(s + i));
      }
    }
  }
}

using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// Queries of segment b (rows q_off[b]..q_off[b+1]) against rows x_off[b]..x_off[b+1] of x.
// self_rows: q is x (graph build), so query row r skips key row r.
py::tuple topk_segments(F32 q_in, I64 q_off_in, F32 x_in, I64 x_off_in, int64_t k, bool self_rows, bool drop_nonpositive) {
  if (q_in.ndim() != 2 || x_in.ndim() != 2 || q_in.shape(1) != x_in.shape(1))
    throw std::invalid_argument("knn: q [Q, d] and x [N, d] must agree on d");
  if (q_off_in.size() != x_off_in.size()) throw std::invalid_argument("knn: q_offsets and x_offsets differ in length");
  if (k < 1) throw std::invalid_argument("knn: k must be >= 1");
  const int64_t nq = q_in.shape(0), nx = x_in.shape(0), d = q_in.shape(1), nseg = q_off_in.size() - 1;
  const int64_t* qo = q_off_in.data();
  const int64_t* xo = x_off_in.data();
  if (qo[nseg] != nq || xo[nseg] != nx) throw std::invalid_argument("knn: offsets must end at the row counts");

  py::array_t<int32_t> idx_out({nq, k});
  py::array_t<float> sim_out({nq, k});
  int32_t* idx = idx_out.mutable_data();
  float* sim = sim_out.mutable_data();
  {
    xmem::GilRelease nogil;
    std::fill(idx, idx + nq * k, -1);
    std::fill(sim, sim + nq * k, -std::numeric_limits<float>::infinity());
    int threads = 1;
#ifdef _OPENMP
    // Threads only for a call worth waking them (xmem::parallel_work()); the lists do not depend on the
    // thread count (each pair's dot is one chain; lists keep (sim, id) order).
    double work = 0.0;
    for (int64_t b = 0; b < nseg; ++b) work += double(qo[b + 1] - qo[b]) * double(xo[b + 1] - xo[b]) * double(d);
    threads = work >= xmem::parallel_work() ? omp_get_max_threads() : 1;
#endif
    const bool symmetric = self_rows && nseg >= 4 * threads;
    // A search normalises its query tile in the item that reads it (each query row is in one item),
    // and, where every segment has one query tile (a search of a few rows: one pass over the keys),
    // each key tile as it reads it; a graph build reads one normalised copy of x (the symmetric path
    // normalises each segment in its thread's cache). unit_row is the same wherever it writes, so
    // the bits do not depend on which.
    int64_t widest = 0;
    for (int64_t b = 0; b < nseg; ++b) widest = std::max(widest, qo[b + 1] - qo[b]);
    const bool keys_in_item = !self_rows && widest <= QB;
    const std::vector<float> xu =
        symmetric || keys_in_item ? std::vector<float>() : unit_rows(x_in.data(), nx, d, threads);
    const float* xs = xu.data();

    // Graph build over many segments: one item per segment, and each key tile pair (ta <= tb) is
    // computed once and offered to both sides (dot(i, j) == dot(j, i) bit for bit: same kernel,
    // commutative products), halving the FLOPs. Otherwise (search, or fewer segments than it takes
    // to keep the threads busy) items are (segment, query tile) against every key tile.
    const xmem::Isa isa = xmem::cpu_isa();
    // Few, large segments: items stay (segment, query tile), each computes only key tiles from its
    // own tile on, offers to its rows directly and mirrors to the other rows through per-thread
    // lists that are merged at the end (bounded to 1 GiB of lists).
    const bool mirrored = self_rows && !symmetric && double(nq) * k * 8 * threads < double(1 << 30);
    std::vector<std::vector<float>> msim(mirrored ? threads : 0);
    std::vector<std::vector<int32_t>> midx(mirrored ? threads : 0);
    std::vector<std::vector<int64_t>> mcnt(mirrored ? threads : 0);
    std::vector<std::pair<int64_t, int64_t>> items;  // (segment, first query row)
    for (int64_t b = 0; b < nseg; ++b) {
      if (symmetric) {
        if (qo[b + 1] - qo[b] > 1) items.emplace_back(b, qo[b]);
        continue;
      }
      for (int64_t r = qo[b]; r < qo[b + 1]; r += QB) items.emplace_back(b, r);
    }

#pragma omp parallel num_threads(threads)
    {
      std::vector<float> block(QB * KB);
      std::vector<float> pack(static_cast<size_t>(KB * d));
      std::vector<float> qtile(self_rows ? 0 : static_cast<size_t>(QB * d));
      std::vector<float> acc, unit;
      std::vector<TopK> tops;
      int tid = 0;
#ifdef _OPENMP
      tid = omp_get_thread_num();
#endif
      float* lsim = nullptr;
      int32_t* lidx = nullptr;
      int64_t* lcnt = nullptr;
      if (mirrored) {
        msim[tid].assign(nq * k, -std::numeric_limits<float>::infinity());
        midx[tid].assign(nq * k, -1);
        mcnt[tid].assign(nq, 0);
        lsim = msim[tid].data();
        lidx = midx[tid].data();
        lcnt = mcnt[tid].data();
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < static_cast<int64_t>(items.size()); ++it) {
        const int64_t b = items[it].first;
        if (symmetric) {
          const int64_t s = qo[b], e = qo[b + 1];
          tops.clear();
          for (int64_t r = s; r < e; ++r) tops.push_back(TopK{sim + r * k, idx + r * k, k});
          segment_graph(isa, x_in.data(), s, e, d, drop_nonpositive, tops, unit, pack, acc);
          continue;
        }
        const int64_t r0 = items[it].second;
        const int64_t nr = std::min(QB, qo[b + 1] - r0);
        tops.clear();
        for (int64_t a = 0; a < nr; ++a) tops.push_back(TopK{sim + (r0 + a) * k, idx + (r0 + a) * k, k});
        if (mirrored) {
          for (int64_t c0 = r0; c0 < xo[b + 1]; c0 += KB) {
            const int64_t nc = std::min(KB, xo[b + 1] - c0);
            xmem::pack_panels(xs + c0 * d, nc, d, pack.data());
            dot_block(isa, xs + r0 * d, nr, pack.data(), nc, d, block.data());
            for (int64_t a = 0; a < nr; ++a) {
              const float* row = block.data() + a * KB;
              const int64_t i = r0 + a;
              for (int64_t c = 0; c < nc; ++c) {
                const int64_t j = c0 + c;
                if (j <= i) continue;  // each unordered pair once, by the tile of its lower row
                if (drop_nonpositive && !(row[c] > 0.f)) continue;
                tops[a].offer(row[c], static_cast<int32_t>(j));
                TopK m{lsim + j * k, lidx + j * k, k, lcnt[j]};
                m.offer(row[c], static_cast<int32_t>(i));
                lcnt[j] = m.n;
              }
            }
          }
          continue;
        }
        const float* qrows = qtile.data();  // self_rows: the queries are the keys
        if (self_rows)
          qrows = xs + r0 * d;
        else
          for (int64_t a = 0; a < nr; ++a) unit_row(q_in.data() + (r0 + a) * d, d, qtile.data() + a * d);
        for (int64_t c0 = xo[b]; c0 < xo[b + 1]; c0 += KB) {
          const int64_t nc = std::min(KB, xo[b + 1] - c0);
          if (keys_in_item)
            pack_unit_panels(x_in.data() + c0 * d, nc, d, pack.data());
          else
            xmem::pack_panels(xs + c0 * d, nc, d, pack.data());
          dot_block(isa, qrows, nr, pack.data(), nc, d, block.data());
          for (int64_t a = 0; a < nr; ++a) {
            const float* row = block.data() + a * KB;
            for (int64_t c = 0; c < nc; ++c) {
              const int64_t col = c0 + c;
              if (self_rows && col == r0 + a) continue;
              if (drop_nonpositive && !(row[c] > 0.f)) continue;
              tops[a].offer(row[c], static_cast<int32_t>(col));
            }
          }
        }
      }
    }
    if (mirrored) {  // merge the mirrored offers into each row's list
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t r = 0; r < nq; ++r) {
        TopK t{sim + r * k, idx + r * k, k, 0};
        while (t.n < k && idx[r * k + t.n] >= 0) ++t.n;
        for (int th = 0; th < threads; ++th)
          for (int64_t j = 0; j < (mcnt[th].empty() ? 0 : mcnt[th][r]); ++j) t.offer(msim[th][r * k + j], midx[th][r * k + j]);
      }
    }
  }
  return py::make_tuple(idx_out, sim_out);
}

// Measured single-precision FMA peak of this machine (GFLOP/s) over all OpenMP threads, in the
// ISA the kernels use: 12 independent FMA chains per thread for about `seconds`.
double fma_peak_gflops(double seconds) {
  const xmem::Isa isa = xmem::cpu_isa();
  const int64_t lanes = isa == xmem::Isa::Avx512 ? 16 : isa == xmem::Isa::Avx2 ? 8 : 1;
  if (lanes == 1) return 0.0;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const int64_t reps = 1 << 22;  // 12 * 2^22 FMAs per thread per round
  double best = 0.0;
  xmem::GilRelease nogil;
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile float sink = 0.f;
  while (std::chrono::steady_clock::now() < t_end) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
#ifdef XMEM_X86
      const float v = isa == xmem::Isa::Avx512 ? xmem::fma_probe_avx512(reps) : xmem::fma_probe_avx2(reps);
      sink = sink + v;
#endif
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * 12.0 * double(reps) * double(lanes) * threads / dt / 1e9);
  }
  return best;
}

void register_knn_extra(py::module_& m) {
  m.def("cpu_isa", [] { return std::string(xmem::isa_name(xmem::cpu_isa())); },
        "ISA of the CPU micro-kernels: avx512, avx2 or scalar (capped by XMEM_CPU_ISA)");
  m.def("fma_peak_gflops", &fma_peak_gflops, py::arg("seconds") = 0.5,
        "measured single-precision FMA peak, GFLOP/s, all OpenMP threads, in the kernels' ISA");
}
}  // namespace

void register_knn(py::module_& m) {
  register_knn_extra(m);
  m.def("knn_topk", &topk_segments, py::arg("q"), py::arg("q_offsets"), py::arg("x"), py::arg("x_offsets"), py::arg("k"),
        py::arg("self_rows"), py::arg("drop_nonpositive"),
        "Exact cosine top-k of q rows against x rows of the same CSR segment -> (idx [Q, k] int32 global x rows, "
        "sim [Q, k] float32), descending, ties to the lower row, padded -1 / -inf. self_rows: q is x, self excluded.");
}
