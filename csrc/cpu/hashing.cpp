// Feature hashing on the CPU: the signed counts of a text's word unigrams and bigrams, hashed into
// `dim` buckets with BLAKE2b-64 (RFC 7693, unkeyed, 8-byte digest: Python's
// hashlib.blake2b(digest_size=8)), the arithmetic of ops/features/reference.py exactly:
// words are the ASCII runs [A-Za-z0-9][A-Za-z0-9'-]*, lower-cased, trailing ' and - stripped; a
// feature's bucket is h % dim and its sign +1 when bit 63 of h is set, else -1; counts are small
// integers (exact in any order). Buckets are remembered per feature (a text's words repeat across a
// build), up to kMaxCached features per counter.
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

#include "words.h"

namespace py = pybind11;

namespace {

using xmem::scan_words;

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

// The words of UTF-8 text (its non-ASCII bytes split words, as the non-ASCII characters they encode).
void words(std::string_view text, std::vector<std::string>& out) {
  out.clear();
  std::string w;
  scan_words(text.size(), [&](size_t i) { return static_cast<unsigned char>(text[i]); }, w,
             [&](const std::string& word) { out.push_back(word); });
}

class FeatureCounter {
 public:
  explicit FeatureCounter(int64_t dim) : dim_(dim) {
    if (dim < 2) throw std::invalid_argument("dim must be >= 2, got " + std::to_string(dim));
  }

  // [n, dim] float64 signed counts of each text's unigrams and bigrams.
  py::array_t<double> counts(const py::sequence& texts) {
    const size_t n = texts.size();
    std::vector<std::string> utf8(n);
    for (size_t r = 0; r < n; ++r) {
      py::object t = texts[r];
      if (!PyUnicode_Check(t.ptr())) {
        throw py::type_error("texts[" + std::to_string(r) + "]: expected a str, got " +
                             std::string(Py_TYPE(t.ptr())->tp_name));
      }
      Py_ssize_t len = 0;
      const char* s = PyUnicode_AsUTF8AndSize(t.ptr(), &len);
      if (s != nullptr) {
        utf8[r].assign(s, static_cast<size_t>(len));
      } else {  // a lone surrogate: its three bytes are non-ASCII, so they split words, as in Python
        PyErr_Clear();
        py::bytes b = py::reinterpret_steal<py::bytes>(PyUnicode_AsEncodedString(t.ptr(), "utf-8", "surrogatepass"));
        if (!b) throw py::error_already_set();
        utf8[r] = static_cast<std::string>(b);
      }
    }
    py::array_t<double> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(dim_)});
    double* c = out.mutable_data();
    std::fill(c, c + n * dim_, 0.0);
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::string> w;
      std::string bigram;
      for (size_t r = 0; r < n; ++r) {
        words(utf8[r], w);
        double* row = c + r * dim_;
        for (size_t i = 0; i < w.size(); ++i) {
          add(row, w[i]);
          if (i + 1 < w.size()) {
            bigram.assign(w[i]).append(1, ' ').append(w[i + 1]);
            add(row, bigram);
          }
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

// The words of a str, read off its own code points (anything above 127, a lone surrogate too,
// splits words): fn(word) for each, in order.
template <typename Fn>
void each_word(PyObject* o, std::string& w, Fn&& fn) {
  const int kind = PyUnicode_KIND(o);
  const void* data = PyUnicode_DATA(o);
  scan_words(static_cast<size_t>(PyUnicode_GET_LENGTH(o)), [&](size_t i) -> unsigned char {
    const Py_UCS4 c = PyUnicode_READ(kind, data, static_cast<Py_ssize_t>(i));
    return c < 128 ? static_cast<unsigned char>(c) : 0;
  }, w, fn);
}

py::object ascii_str(const std::string& w) {
  PyObject* s = PyUnicode_FromStringAndSize(w.data(), static_cast<Py_ssize_t>(w.size()));
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(s);
}

PyObject* checked_str(const py::handle& text, const char* what) {
  PyObject* o = text.ptr();
  if (!PyUnicode_Check(o)) throw py::type_error(std::string(what) + ": expected a str, got " + Py_TYPE(o)->tp_name);
  if (PyUnicode_READY(o) < 0) throw py::error_already_set();  // a legacy str made by the C API
  return o;
}

// text.keywords' counting: the n most frequent words of texts longer than one letter and not in
// `stop` (a set of str), ties to the first seen (Counter.most_common's order); each distinct word is
// looked up in `stop` once per Keywords object (one episode or a conversation's episodes).
class Keywords {
 public:
  explicit Keywords(const py::handle& stop) : stop_(stop) {
    if (!PyAnySet_Check(stop.ptr())) throw py::type_error("stop: expected a set or frozenset of str");
  }

  // keywords of texts[0..m) (each a str; borrowed, held by the caller)
  py::list of(PyObject* const* texts, Py_ssize_t m, int64_t n) {
    struct Count {
      int64_t count, first;
    };
    std::unordered_map<std::string, Count> counts;
    std::vector<const std::string*> order;
    for (Py_ssize_t i = 0; i < m; ++i) {
      each_word(checked_str(texts[i], "texts[i]"), w_, [&](const std::string& word) {
        if (word.size() < 2 || is_stop(word)) return;
        auto [it, fresh] = counts.try_emplace(word, Count{0, static_cast<int64_t>(order.size())});
        if (fresh) order.push_back(&it->first);
        ++it->second.count;
      });
    }
    std::vector<std::pair<int64_t, int64_t>> ranked;  // (-count, first)
    ranked.reserve(order.size());
    for (const std::string* word : order) {
      const Count& c = counts.at(*word);
      ranked.emplace_back(-c.count, c.first);
    }
    const size_t keep = n > 0 ? std::min(static_cast<size_t>(n), ranked.size()) : 0;
    std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end());
    py::list out;
    for (size_t r = 0; r < keep; ++r) out.append(ascii_str(*order[static_cast<size_t>(ranked[r].second)]));
    return out;
  }

 private:
  bool is_stop(const std::string& word) {
    auto st = stop_cache_.find(word);
    if (st == stop_cache_.end()) {
      const int hit = PySet_Contains(stop_.ptr(), ascii_str(word).ptr());
      if (hit < 0) throw py::error_already_set();
      st = stop_cache_.emplace(word, hit == 1).first;
    }
    return st->second;
  }

  py::handle stop_;
  std::unordered_map<std::string, bool> stop_cache_;
  std::string w_;
};

// text.keywords in one call (texts: a list, whose items the list holds while it is read).
py::list py_keywords(const py::list& texts, int64_t n, const py::handle& stop) {
  Keywords kw(stop);
  return kw.of(PySequence_Fast_ITEMS(texts.ptr()), PyList_GET_SIZE(texts.ptr()), n);
}

py::object steal(PyObject* o) {
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// segment.episode_parts in one call per conversation: for each span [s, e) of `messages` (objects
// with .id, .speaker and .text), (text, keywords, speakers, ids): the lines f"{speaker}: {text}"
// joined by "\n" (each piece formatted as an f-string formats it), text.keywords of the texts (n,
// stop), " and ".join(dict.fromkeys(speakers)) and the list of the ids. The spans are (s, e) pairs,
// 0 <= s < e <= len(messages).
py::list episode_parts(const py::list& messages, const py::sequence& spans, int64_t n, const py::handle& stop) {
  Keywords kw(stop);
  const py::str id_attr("id"), speaker_attr("speaker"), text_attr("text"), sep(": "), nl("\n"), and_(" and "), empty("");
  py::list out;
  for (const py::object span : spans) {
    const auto se = py::reinterpret_borrow<py::sequence>(span);
    if (se.size() != 2) throw py::value_error("spans: expected (start, end) pairs");
    const Py_ssize_t s = se[0].cast<Py_ssize_t>(), e = se[1].cast<Py_ssize_t>();
    if (s < 0 || e <= s || e > PyList_GET_SIZE(messages.ptr()))
      throw py::value_error("spans: expected 0 <= start < end <= len(messages)");
    // the span's messages, held (as the rule's messages[s:e]): code run below (a getter, __format__,
    // __eq__) may edit the caller's list
    const py::object msgs = steal(PyList_GetSlice(messages.ptr(), s, e));
    std::vector<py::object> held;  // the speakers and texts read, held while their views are used
    std::vector<PyObject*> texts;
    py::list pieces, ids;
    const py::object seen = steal(PyDict_New());
    for (Py_ssize_t i = 0; i < e - s; ++i) {
      PyObject* m = PyList_GET_ITEM(msgs.ptr(), i);
      ids.append(steal(PyObject_GetAttr(m, id_attr.ptr())));
      py::object sp = steal(PyObject_GetAttr(m, speaker_attr.ptr()));
      py::object tx = steal(PyObject_GetAttr(m, text_attr.ptr()));
      if (i > 0) pieces.append(nl);
      pieces.append(steal(PyObject_Format(sp.ptr(), empty.ptr())));
      pieces.append(sep);
      pieces.append(steal(PyObject_Format(tx.ptr(), empty.ptr())));
      if (PyDict_SetDefault(seen.ptr(), sp.ptr(), Py_None) == nullptr) throw py::error_already_set();
      texts.push_back(tx.ptr());
      held.push_back(std::move(sp));
      held.push_back(std::move(tx));
    }
    py::object text = steal(PyUnicode_Join(empty.ptr(), pieces.ptr()));
    py::list words = kw.of(texts.data(), static_cast<Py_ssize_t>(texts.size()), n);
    py::object speakers = steal(PyUnicode_Join(and_.ptr(), steal(PyDict_Keys(seen.ptr())).ptr()));
    out.append(py::make_tuple(text, words, speakers, ids));
  }
  return out;
}

// text.words in one call: the same rule read off the str's own code points (anything above 127,
// a lone surrogate too, splits words), each word a new ASCII str.
py::list py_words(const py::handle& text) {
  py::list out;
  std::string w;
  each_word(checked_str(text, "text"), w, [&](const std::string& word) { out.append(ascii_str(word)); });
  return out;
}

}  // namespace

void register_hashing(py::module_& m) {
  py::class_<FeatureCounter>(m, "FeatureCounter", "signed hashed counts of word unigrams and bigrams (ops/features)")
      .def(py::init<int64_t>(), py::arg("dim"))
      .def("counts", &FeatureCounter::counts, py::arg("texts"), "[n, dim] float64 signed counts")
      .def_property_readonly("dim", &FeatureCounter::dim);
  m.def("words", &py_words, py::arg("text"),
        "text.words: lower-cased ASCII word runs [A-Za-z0-9][A-Za-z0-9'-]*, trailing ' and - cut");
  m.def("keywords", &py_keywords, py::arg("texts"), py::arg("n"), py::arg("stop"),
        "text.keywords: the n most frequent words longer than one letter and not in stop, ties to the first seen");
  m.def("episode_parts", &episode_parts, py::arg("messages"), py::arg("spans"), py::arg("n"), py::arg("stop"),
        "segment.episode_parts: per span, (lines joined, keywords, speakers joined, ids), one call per conversation");
  m.def("blake2b64", [](const py::bytes& b) { return blake2b64(static_cast<std::string>(b)); }, py::arg("data"),
        "BLAKE2b with an 8-byte digest, as a little-endian integer (= hashlib.blake2b(data, digest_size=8))");
}
