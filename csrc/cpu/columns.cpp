// A memory's container of named arrays (memory/codec.py's file format) in one call each way, the
// bytes of ops/columns/reference.py exactly: the magic XMSLICE1, a little-endian u64 header length,
// the JSON header {"arrays":[{"name":..,"dtype":..,"shape":[..],"offset":..},..]} as Python's
// json.dumps(separators=(",", ":")) writes it, then each array's bytes at 64-byte aligned offsets
// (zero padding). Text columns as UTF-8 bytes plus int64 offsets, and back.
//
// Each function does the plain case and returns None for anything else (a dtype the format does not
// hold, a name JSON would escape, a str subclass, a lone surrogate, a header entry that is not plain
// ints): the reference then runs and raises its own message, so the two paths never disagree on
// what they accept.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

constexpr char kMagic[] = "XMSLICE1";
constexpr int64_t kAlign = 64;

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The container's dtype string of a native-order array ("<f4", ...), or "" when the format does
// not hold it. The host is little-endian (x86-64), so native order is "<".
std::string dtype_code(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (dt.byteorder() == '>') return "";
  if (kind == 'f' && (size == 4 || size == 8)) return size == 4 ? "<f4" : "<f8";
  if (kind == 'i' && (size == 4 || size == 8)) return size == 4 ? "<i4" : "<i8";
  if (kind == 'u' && size == 1) return "|u1";
  return "";
}

// A name json.dumps writes as it is: printable ASCII but the quote and the backslash.
bool plain_name(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
  return true;
}

// names [n] str, arrays [n] numpy arrays -> the container's bytes, or None (see above).
py::object pack_arrays(const py::list& names, const py::list& arrays) {
  const size_t n = names.size();
  if (arrays.size() != n) throw py::value_error("names and arrays differ in length");
  struct Part {
    py::array a;
    int64_t offset, nbytes;
  };
  std::vector<Part> parts;
  parts.reserve(n);
  std::string header = "{\"arrays\":[";
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    py::handle h = names[i];
    if (!PyUnicode_CheckExact(h.ptr())) return py::none();
    Py_ssize_t len = 0;
    const char* name = PyUnicode_AsUTF8AndSize(h.ptr(), &len);
    if (name == nullptr) {
      PyErr_Clear();
      return py::none();
    }
    if (!plain_name({name, size_t(len)}) || !py::isinstance<py::array>(arrays[i])) return py::none();
    auto a = py::array::ensure(arrays[i], py::array::c_style);  // np.ascontiguousarray
    if (!a) {
      PyErr_Clear();
      return py::none();
    }
    const std::string code = dtype_code(a.dtype());
    if (code.empty()) return py::none();
    header += i ? ",{\"name\":\"" : "{\"name\":\"";
    header.append(name, size_t(len));
    header += "\",\"dtype\":\"" + code + "\",\"shape\":[";
    if (a.ndim() == 0) {
      header += "1";  // np.ascontiguousarray gives a 0-d array shape [1]
    } else {
      for (py::ssize_t d = 0; d < a.ndim(); ++d) header += (d ? "," : "") + std::to_string(a.shape(d));
    }
    header += "],\"offset\":" + std::to_string(offset) + "}";
    const int64_t nbytes = int64_t(a.size()) * a.itemsize();
    parts.push_back({a, offset, nbytes});
    offset += aligned(nbytes);
  }
  header += "]}";
  const int64_t head = 16 + int64_t(header.size());
  const int64_t base = aligned(head);
  PyObject* raw = PyBytes_FromStringAndSize(nullptr, base + offset);
  if (raw == nullptr) throw py::error_already_set();
  auto out = py::reinterpret_steal<py::bytes>(raw);
  char* p = PyBytes_AS_STRING(raw);
  std::memcpy(p, kMagic, 8);
  const uint64_t hl = header.size();
  for (int b = 0; b < 8; ++b) p[8 + b] = char((hl >> (8 * b)) & 0xff);
  std::memcpy(p + 16, header.data(), header.size());
  std::memset(p + head, 0, size_t(base - head));
  {
    xmem::GilRelease release;  // the arrays are held by `parts`
    for (const Part& part : parts) {
      char* dst = p + base + part.offset;
      if (part.nbytes) std::memcpy(dst, part.a.data(), size_t(part.nbytes));
      std::memset(dst + part.nbytes, 0, size_t(aligned(part.nbytes) - part.nbytes));
    }
  }
  return std::move(out);
}

// texts [n] (a list of str) -> (uint8 [bytes] their UTF-8 joined, int64 [n + 1] offsets), or None.
py::object join_utf8(const py::list& texts) {
  const size_t n = texts.size();
  std::vector<std::pair<const char*, Py_ssize_t>> views(n);
  py::array_t<int64_t> off(static_cast<py::ssize_t>(n + 1));
  int64_t* o = off.mutable_data();
  o[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    PyObject* t = texts[i].ptr();
    if (!PyUnicode_CheckExact(t)) return py::none();  // the reference takes str() of it
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(t, &len);  // a lone surrogate fails: the reference passes it
    if (s == nullptr) {
      PyErr_Clear();
      return py::none();
    }
    views[i] = {s, len};
    o[i + 1] = o[i] + len;
  }
  py::array_t<uint8_t> raw(static_cast<py::ssize_t>(o[n]));
  char* dst = reinterpret_cast<char*>(raw.mutable_data());
  for (const auto& [s, len] : views) {
    std::memcpy(dst, s, size_t(len));
    dst += len;
  }
  raw.attr("setflags")(py::arg("write") = false);  // as np.frombuffer over bytes
  return py::make_tuple(raw, off);
}

// raw bytes, off int64 [n + 1] (checked by the caller: 0, non-decreasing, len(raw)) -> object [n]
// of str, decoded "surrogatepass" (UnicodeDecodeError as bytes.decode raises it).
py::array split_utf8(const py::bytes& raw, const py::array_t<int64_t, py::array::c_style>& off) {
  const char* s = PyBytes_AS_STRING(raw.ptr());
  const int64_t size = PyBytes_GET_SIZE(raw.ptr());
  const py::ssize_t n = off.size() - 1;
  const int64_t* o = off.data();
  if (n < 0 || o[0] != 0 || o[n] != size) throw py::value_error("offsets do not cut the bytes");
  for (py::ssize_t i = 0; i < n; ++i)
    if (o[i + 1] < o[i]) throw py::value_error("offsets do not cut the bytes");
  static auto* empty = new py::object(py::module_::import("numpy").attr("empty"));  // never freed: outlives exit
  py::array out = (*empty)(n, "object");  // filled with None
  auto** cell = static_cast<PyObject**>(out.mutable_data());
  for (py::ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyUnicode_DecodeUTF8(s + o[i], o[i + 1] - o[i], "surrogatepass");
    if (t == nullptr) throw py::error_already_set();
    Py_XSETREF(cell[i], t);
  }
  return out;
}

// Header entries (the parsed JSON list) -> {name: array view of buf} for the plain case (every entry
// a dict with str name, an allowed dtype, a list of non-negative ints as shape, an int offset, its
// bytes inside buf), else None. buf: a bytearray the views keep alive.
py::object views(const py::list& entries, const py::bytearray& buf, int64_t base) {
  static const char* kDtypes[] = {"<f4", "<f8", "<i4", "<i8", "|u1"};
  static const int kSizes[] = {4, 8, 4, 8, 1};
  static auto* frombuffer = new py::object(py::module_::import("numpy").attr("frombuffer"));  // never freed
  const int64_t size = PyByteArray_GET_SIZE(buf.ptr());
  if (base < 0 || base > size) return py::none();
  // the views' base: a uint8 array over buf, which holds buf's buffer export (buf cannot be resized
  // under them), as np.frombuffer's arrays do
  py::array owner = (*frombuffer)(buf, "uint8");
  char* data = static_cast<char*>(owner.mutable_data());
  py::dict out;
  for (py::handle e : entries) {
    if (!PyDict_CheckExact(e.ptr())) return py::none();
    PyObject* name = PyDict_GetItemString(e.ptr(), "name");
    PyObject* dtype = PyDict_GetItemString(e.ptr(), "dtype");
    PyObject* shape = PyDict_GetItemString(e.ptr(), "shape");
    PyObject* offset = PyDict_GetItemString(e.ptr(), "offset");
    if (!name || !dtype || !shape || !offset || !PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(dtype) ||
        !PyList_CheckExact(shape) || !PyLong_CheckExact(offset))
      return py::none();
    Py_ssize_t code_len = 0;
    const char* code = PyUnicode_AsUTF8AndSize(dtype, &code_len);
    if (code == nullptr) {
      PyErr_Clear();
      return py::none();
    }
    int which = -1;
    for (int k = 0; k < 5; ++k)
      if (code_len == 3 && std::memcmp(code, kDtypes[k], 3) == 0) which = k;
    const Py_ssize_t ndim = PyList_GET_SIZE(shape);
    if (which < 0 || ndim > 32) return py::none();
    std::vector<py::ssize_t> dims(static_cast<size_t>(ndim));
    int64_t count = 1, extent = 1;  // extent: the product of the non-zero dims (numpy refuses a huge one)
    bool too_big = false;
    for (Py_ssize_t d = 0; d < ndim; ++d) {
      PyObject* v = PyList_GET_ITEM(shape, d);
      if (!PyLong_CheckExact(v)) return py::none();
      int overflow = 0;
      const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow || x < 0) return py::none();
      dims[size_t(d)] = py::ssize_t(x);
      if (x && extent > (int64_t(1) << 40) / x) too_big = true;
      if (too_big) continue;  // the reference says which dim
      if (x) extent *= x;
      count *= x;
    }
    int overflow = 0;
    const long long off = PyLong_AsLongLongAndOverflow(offset, &overflow);
    if (too_big || overflow || off < 0 || off > size - base) return py::none();
    const int64_t nbytes = count * kSizes[which];
    if (nbytes > size - base - off) return py::none();
    // C strides as numpy fills them (a zero dim does not scale the ones before it: np.frombuffer(...)
    // .reshape(shape) of an empty array has them)
    std::vector<py::ssize_t> strides(static_cast<size_t>(ndim));
    py::ssize_t step = kSizes[which];
    for (Py_ssize_t d = ndim - 1; d >= 0; --d) {
      strides[size_t(d)] = step;
      if (dims[size_t(d)]) step *= dims[size_t(d)];
    }
    out[name] = py::array(py::dtype(kDtypes[which]), dims, strides, data + base + off, owner);
  }
  return std::move(out);
}

// Value checks of a slice (memory/codec.py's check_slice after its shape checks), all in one pass:
// True when every check passes; False when one fails or an array is not of the dtype the layout
// names (the reference then runs and says which). refs: (int32/int64 array, lo, hi) every value in
// [lo, hi); psg_msg int32 non-decreasing; msg_psg int32: each first passage >= 0 belongs to its
// message (psg_msg[first] == row); finite: float32 arrays without NaN or inf; times: float64 arrays,
// each value NaN or in [tmin, tmax); nonan: float32 arrays without NaN.
template <typename T>
bool in_range(const py::array& a, int64_t lo, int64_t hi) {
  const T* v = static_cast<const T*>(a.data());
  for (py::ssize_t i = 0, n = a.size(); i < n; ++i)
    if (int64_t(v[i]) < lo || int64_t(v[i]) >= hi) return false;
  return true;
}

bool is_c(const py::handle& h, char kind, int size) {
  if (!py::isinstance<py::array>(h)) return false;
  auto a = py::reinterpret_borrow<py::array>(h);
  const auto dt = a.dtype();
  return dt.kind() == kind && dt.itemsize() == size && dt.byteorder() != '>' &&
         (a.flags() & py::array::c_style) != 0 && reinterpret_cast<uintptr_t>(a.data()) % size == 0;
}

bool values_ok(const py::list& refs, const py::handle& psg_msg, const py::handle& msg_psg, const py::list& finite,
               const py::list& times, double tmin, double tmax, const py::list& nonan) {
  for (py::handle r : refs) {
    auto t = r.cast<py::tuple>();
    const int64_t lo = t[1].cast<int64_t>(), hi = t[2].cast<int64_t>();
    if (is_c(t[0], 'i', 4)) {
      if (!in_range<int32_t>(t[0].cast<py::array>(), lo, hi)) return false;
    } else if (is_c(t[0], 'i', 8)) {
      if (!in_range<int64_t>(t[0].cast<py::array>(), lo, hi)) return false;
    } else {
      return false;
    }
  }
  if (!is_c(psg_msg, 'i', 4) || !is_c(msg_psg, 'i', 4)) return false;
  auto pm = py::reinterpret_borrow<py::array>(psg_msg);
  auto mp = py::reinterpret_borrow<py::array>(msg_psg);
  const int32_t* owner = static_cast<const int32_t*>(pm.data());
  const int32_t* first = static_cast<const int32_t*>(mp.data());
  const py::ssize_t n_psg = pm.size(), n_msg = mp.size();
  for (py::ssize_t i = 1; i < n_psg; ++i)
    if (owner[i] < owner[i - 1]) return false;
  for (py::ssize_t i = 0; i < n_msg; ++i)
    if (first[i] >= 0 && (first[i] >= n_psg || owner[first[i]] != i)) return false;
  for (py::handle h : finite) {
    if (!is_c(h, 'f', 4)) return false;
    auto a = py::reinterpret_borrow<py::array>(h);
    const float* v = static_cast<const float*>(a.data());
    for (py::ssize_t i = 0, n = a.size(); i < n; ++i)
      if (!std::isfinite(v[i])) return false;
  }
  for (py::handle h : times) {
    if (!is_c(h, 'f', 8)) return false;
    auto a = py::reinterpret_borrow<py::array>(h);
    const double* v = static_cast<const double*>(a.data());
    for (py::ssize_t i = 0, n = a.size(); i < n; ++i)
      if (!std::isnan(v[i]) && !(v[i] >= tmin && v[i] < tmax)) return false;
  }
  for (py::handle h : nonan) {
    if (!is_c(h, 'f', 4)) return false;
    auto a = py::reinterpret_borrow<py::array>(h);
    const float* v = static_cast<const float*>(a.data());
    for (py::ssize_t i = 0, n = a.size(); i < n; ++i)
      if (std::isnan(v[i])) return false;
  }
  return true;
}

}  // namespace

void register_columns(py::module_& m) {
  m.def("pack_arrays", &pack_arrays, py::arg("names"), py::arg("arrays"),
        "Named arrays as one container (memory/codec.py's format), or None when the reference must run");
  m.def("join_utf8", &join_utf8, py::arg("texts"),
        "A text column as (uint8 UTF-8 bytes, int64 [n+1] offsets), or None when the reference must run");
  m.def("split_utf8", &split_utf8, py::arg("raw"), py::arg("offsets"),
        "A text column back from its bytes and offsets: object [n] str (surrogatepass)");
  m.def("values_ok", &values_ok, py::arg("refs"), py::arg("psg_msg"), py::arg("msg_psg"), py::arg("finite"),
        py::arg("times"), py::arg("tmin"), py::arg("tmax"), py::arg("nonan"),
        "A slice's value checks in one pass: True when all pass, False when the reference must say which fails");
  m.def("container_views", &views, py::arg("entries"), py::arg("buf"), py::arg("base"),
        "A container's header entries as views of buf, or None when the reference must run");
}
