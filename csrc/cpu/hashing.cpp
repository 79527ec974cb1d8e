// Feature hashing on the CPU: signed counts of word unigrams and bigrams in `dim` buckets. A numeric
// kernel over words it is given (ops/features hands it each text's words, separated by spaces; the word
// rule itself lives in text.py): a bigram is two consecutive words joined by a space; a feature's hash h
// is its unkeyed BLAKE2b-64 digest (RFC 7693), its bucket h % dim, its sign +1 when bit 63 of h is set,
// else -1. Counts are small integers (exact in any order); ops/features/reference.py is the reference.
// Buckets are remembered per feature (words repeat across a build), up to kMaxCached features.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

constexpr size_t kMaxCached = size_t(1) << 20;  // features whose bucket is remembered

constexpr uint64_t kIV[8] = {0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL,
                             0xA54FF53A5F1D36F1ULL, 0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL,
                             0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL};
constexpr uint8_t kSigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

inline uint64_t rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

inline uint64_t load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];  // little-endian, on any host
  return v;
}

void compress(uint64_t h[8], const uint8_t block[128], uint64_t t, bool last) {
  uint64_t m[16], v[16];
  for (int i = 0; i < 16; ++i) m[i] = load64(block + 8 * i);
  for (int i = 0; i < 8; ++i) v[i] = h[i], v[i + 8] = kIV[i];
  v[12] ^= t;  // the byte counter's high word is 0: features are far below 2**64 bytes
  if (last) v[14] = ~v[14];
  auto g = [&v](int a, int b, int c, int d, uint64_t x, uint64_t y) {
    v[a] = v[a] + v[b] + x;
    v[d] = rotr(v[d] ^ v[a], 32);
    v[c] = v[c] + v[d];
    v[b] = rotr(v[b] ^ v[c], 24);
    v[a] = v[a] + v[b] + y;
    v[d] = rotr(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = rotr(v[b] ^ v[c], 63);
  };
  for (const auto& s : kSigma) {
    g(0, 4, 8, 12, m[s[0]], m[s[1]]);
    g(1, 5, 9, 13, m[s[2]], m[s[3]]);
    g(2, 6, 10, 14, m[s[4]], m[s[5]]);
    g(3, 7, 11, 15, m[s[6]], m[s[7]]);
    g(0, 5, 10, 15, m[s[8]], m[s[9]]);
    g(1, 6, 11, 12, m[s[10]], m[s[11]]);
    g(2, 7, 8, 13, m[s[12]], m[s[13]]);
    g(3, 4, 9, 14, m[s[14]], m[s[15]]);
  }
  for (int i = 0; i < 8; ++i) h[i] ^= v[i] ^ v[i + 8];
}

// BLAKE2b with an 8-byte digest, read as a little-endian integer.
uint64_t blake2b64(std::string_view msg) {
  uint64_t h[8];
  std::memcpy(h, kIV, sizeof h);
  h[0] ^= 0x01010000ULL ^ 8ULL;  // depth 1, fanout 1, no key, digest length 8
  const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
  size_t left = msg.size();
  uint64_t t = 0;
  while (left > 128) {
    t += 128;
    compress(h, p, t, false);
    p += 128;
    left -= 128;
  }
  uint8_t block[128] = {0};
  std::memcpy(block, p, left);
  compress(h, block, t + left, true);
  return h[0];
}

class FeatureCounter {
 public:
  explicit FeatureCounter(int64_t dim) : dim_(dim) {
    if (dim < 2) throw std::invalid_argument("dim must be >= 2, got " + std::to_string(dim));
  }

  // [n, dim] float64 signed counts of the unigrams and bigrams of n texts' words, each text's words
  // given as bytes separated by spaces (text.word_runs).
  py::array_t<double> counts(const py::sequence& runs) {
    const size_t n = runs.size();
    std::vector<std::string> held(n);  // copied while the GIL is held
    for (size_t r = 0; r < n; ++r) {
      const py::object b = runs[r];
      if (!PyBytes_Check(b.ptr())) throw py::type_error("runs[" + std::to_string(r) + "]: expected bytes");
      held[r].assign(PyBytes_AS_STRING(b.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(b.ptr())));
    }
    py::array_t<double> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(dim_)});
    double* c = out.mutable_data();
    std::fill(c, c + n * dim_, 0.0);
    {
      xmem::GilRelease nogil;
      std::lock_guard<std::mutex> lock(mu_);
      std::string feature;
      for (size_t r = 0; r < n; ++r) {
        const std::string_view s = held[r];
        double* row = c + r * dim_;
        std::string_view prev;
        for (size_t i = 0; i < s.size();) {
          if (s[i] == ' ') {
            ++i;
            continue;
          }
          const size_t j = std::min(s.find(' ', i), s.size());
          const std::string_view word = s.substr(i, j - i);
          add(row, feature.assign(word));
          if (!prev.empty()) add(row, feature.assign(prev).append(1, ' ').append(word));
          prev = word;
          i = j;
        }
      }
    }
    return out;
  }

  int64_t dim() const { return dim_; }

 private:
  void add(double* row, const std::string& feature) {
    int64_t v;
    auto it = cache_.find(feature);
    if (it != cache_.end()) {
      v = it->second;
    } else {
      const uint64_t h = blake2b64(feature);
      const int64_t col = static_cast<int64_t>(h % static_cast<uint64_t>(dim_));
      v = (h >> 63) & 1 ? col + 1 : -(col + 1);
      if (cache_.size() < kMaxCached) cache_.emplace(feature, v);
    }
    row[(v > 0 ? v : -v) - 1] += v > 0 ? 1.0 : -1.0;
  }

  int64_t dim_;
  std::unordered_map<std::string, int64_t> cache_;
  std::mutex mu_;
};

}  // namespace

void register_hashing(py::module_& m) {
  py::class_<FeatureCounter>(m, "FeatureCounter", "signed hashed counts of word unigrams and bigrams (ops/features)")
      .def(py::init<int64_t>(), py::arg("dim"))
      .def("counts", &FeatureCounter::counts, py::arg("runs"), "[n, dim] float64 signed counts of n texts' word runs")
      .def_property_readonly("dim", &FeatureCounter::dim);
  m.def("blake2b64", [](const py::bytes& b) { return blake2b64(static_cast<std::string>(b)); }, py::arg("data"),
        "BLAKE2b with an 8-byte digest, as a little-endian integer (= hashlib.blake2b(data, digest_size=8))");
}
