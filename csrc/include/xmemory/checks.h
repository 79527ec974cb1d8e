// Checked tensor views for the _cuda bindings (in the style of FlashInfer's csrc/tvm_ffi_utils.h:
// CHECK_CUDA, CHECK_CONTIGUOUS, CHECK_INPUT_TYPE), with no libtorch link.
//
// A binding takes Python objects and builds a TensorView from
//   * `__cuda_array_interface__` (torch CUDA tensors, CuPy, Numba; version 2 or 3), or
//   * a DLPack capsule, or an object with `__dlpack__` / `__dlpack_device__` (the capsule is only
//     borrowed: it is not renamed "used_dltensor", so its owner frees it as usual).
// Objects that live in host memory (NumPy arrays, CPU torch tensors) are refused by
// XMEM_CHECK_CUDA with a message naming the argument. Every check throws pybind11::value_error
// (Python ValueError) before any launch.
//
// Include from *_bind.cpp only: this header needs pybind11, which stays out of nvcc.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace xmem {

namespace py = pybind11;

enum class DType { kFloat16, kBFloat16, kFloat32, kFloat64, kInt8, kUInt8, kInt32, kInt64, kBool, kOther };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    default: return "unsupported dtype";
  }
}

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() { return DType::kFloat64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kInt32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kInt64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::kInt8; }

// A borrowed, already-checked view of one tensor argument. Strides are in elements.
struct TensorView {
  std::string name;
  void* ptr = nullptr;
  bool on_device = false;  // CUDA (or CUDA-managed / host-pinned seen through DLPack as CUDA)
  int device_id = -1;
  DType dtype = DType::kOther;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  py::object owner;  // keeps a DLPack capsule alive while the view is used

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  int64_t size(int64_t i) const { return shape.at(static_cast<size_t>(i < 0 ? i + dim() : i)); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  bool contiguous() const {
    int64_t expect = 1;
    for (int64_t i = dim() - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  std::string shape_str() const {  // std::to_string, not iostreams (see check_shape)
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  template <typename T> T* data() const {
    if (dtype != dtype_of<T>())
      throw py::value_error(name + ": expected " + dtype_name(dtype_of<T>()) + ", got " + dtype_name(dtype));
    return static_cast<T*>(ptr);
  }
};

[[noreturn]] inline void fail(const std::string& msg) { throw py::value_error(msg); }

namespace detail {

inline DType from_typestr(const std::string& ts) {
  if (ts.size() < 3) return DType::kOther;
  const char kind = ts[1];
  const int bytes = std::stoi(ts.substr(2));
  if (kind == 'f' && bytes == 2) return DType::kFloat16;
  if (kind == 'f' && bytes == 4) return DType::kFloat32;
  if (kind == 'f' && bytes == 8) return DType::kFloat64;
  if (kind == 'i' && bytes == 1) return DType::kInt8;
  if (kind == 'i' && bytes == 4) return DType::kInt32;
  if (kind == 'i' && bytes == 8) return DType::kInt64;
  if (kind == 'u' && bytes == 1) return DType::kUInt8;
  if (kind == 'b' && bytes == 1) return DType::kBool;
  return DType::kOther;
}

inline int64_t typestr_bytes(const std::string& ts) { return ts.size() >= 3 ? std::stoll(ts.substr(2)) : 1; }

// Minimal DLPack ABI (dlpack.h v0.8 / v1 unversioned capsule "dltensor"; layout is stable).
struct DLDevice { int32_t device_type; int32_t device_id; };
struct DLDataType { uint8_t code; uint8_t bits; uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

inline DType from_dl(DLDataType t) {
  if (t.lanes != 1) return DType::kOther;
  if (t.code == 2 && t.bits == 16) return DType::kFloat16;  // kDLFloat
  if (t.code == 2 && t.bits == 32) return DType::kFloat32;
  if (t.code == 2 && t.bits == 64) return DType::kFloat64;
  if (t.code == 4 && t.bits == 16) return DType::kBFloat16;  // kDLBfloat
  if (t.code == 0 && t.bits == 8) return DType::kInt8;       // kDLInt
  if (t.code == 0 && t.bits == 32) return DType::kInt32;
  if (t.code == 0 && t.bits == 64) return DType::kInt64;
  if (t.code == 1 && t.bits == 8) return DType::kUInt8;  // kDLUInt
  if (t.code == 6 && t.bits == 8) return DType::kBool;   // kDLBool
  return DType::kOther;
}

inline TensorView from_capsule(py::handle cap, const std::string& name) {
  PyObject* o = cap.ptr();
  if (!PyCapsule_IsValid(o, "dltensor"))
    fail(name + ": DLPack capsule already consumed or not a 'dltensor' capsule");
  auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(o, "dltensor"));
  const DLTensor& t = mt->dl_tensor;
  TensorView v;
  v.name = name;
  v.owner = py::reinterpret_borrow<py::object>(cap);
  v.ptr = static_cast<char*>(t.data) + t.byte_offset;
  v.on_device = t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
  v.device_id = t.device.device_id;
  v.dtype = from_dl(t.dtype);
  v.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    v.strides.assign(t.strides, t.strides + t.ndim);
  } else {
    v.strides.assign(t.ndim, 1);
    for (int32_t i = t.ndim - 2; i >= 0; --i) v.strides[i] = v.strides[i + 1] * v.shape[i + 1];
  }
  return v;
}

inline TensorView from_cai(py::dict cai, const std::string& name) {
  TensorView v;
  v.name = name;
  v.on_device = true;
  auto shape = cai["shape"].cast<py::tuple>();
  for (auto s : shape) v.shape.push_back(s.cast<int64_t>());
  const std::string ts = cai["typestr"].cast<std::string>();
  v.dtype = from_typestr(ts);
  const int64_t item = typestr_bytes(ts);
  auto data = cai["data"].cast<py::tuple>();
  v.ptr = reinterpret_cast<void*>(data[0].cast<std::uintptr_t>());
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    for (auto s : cai["strides"].cast<py::tuple>()) {
      const int64_t b = s.cast<int64_t>();
      if (b % item != 0) fail(name + ": strides are not a multiple of the item size");
      v.strides.push_back(b / item);
    }
  } else {
    v.strides.assign(v.shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(v.shape.size()) - 2; i >= 0; --i) v.strides[i] = v.strides[i + 1] * v.shape[i + 1];
  }
  return v;
}

}  // namespace detail

// The view of one argument; refuses what is neither a CUDA array interface nor DLPack.
inline TensorView tensor_view(py::handle obj, const std::string& name) {
  if (obj.is_none()) fail(name + ": expected a CUDA tensor, got None");
  if (PyCapsule_CheckExact(obj.ptr())) return detail::from_capsule(obj, name);
  if (py::hasattr(obj, "__dlpack_device__")) {  // host memory is refused before touching its data
    auto dev = obj.attr("__dlpack_device__")().cast<py::tuple>();
    const int dt = dev[0].cast<int>();
    if (dt != detail::kDLCUDA && dt != detail::kDLCUDAManaged) {
      TensorView v;
      v.name = name;
      v.on_device = false;
      v.device_id = dev[1].cast<int>();
      return v;
    }
  }
  try {
    if (py::hasattr(obj, "__cuda_array_interface__"))
      return detail::from_cai(obj.attr("__cuda_array_interface__").cast<py::dict>(), name);
  } catch (py::error_already_set&) {
    // torch raises on a CPU tensor; fall through to DLPack
  }
  if (py::hasattr(obj, "__dlpack__")) {
    TensorView v = detail::from_capsule(obj.attr("__dlpack__")(), name);
    return v;
  }
  fail(name + ": expected a CUDA tensor (__cuda_array_interface__ or DLPack), got " +
       std::string(py::str(obj.get_type().attr("__name__"))));
}

// An optional argument: None -> an empty view with ptr == nullptr.
inline TensorView optional_view(py::handle obj, const std::string& name) {
  if (obj.is_none()) {
    TensorView v;
    v.name = name;
    v.on_device = true;
    return v;
  }
  return tensor_view(obj, name);
}

inline void check_cuda(const TensorView& t) {
  if (!t.on_device) fail(t.name + ": expected a CUDA tensor, got host memory (move it to the GPU first)");
}
inline void check_contiguous(const TensorView& t) {
  if (!t.contiguous()) fail(t.name + ": expected a contiguous (row-major) tensor, got strides that are not");
}
inline void check_type(const TensorView& t, DType want) {
  if (t.dtype != want) fail(t.name + ": expected " + dtype_name(want) + ", got " + dtype_name(t.dtype));
}
inline void check_dim(const TensorView& t, int64_t ndim) {
  if (t.dim() != ndim)
    fail(t.name + ": expected " + std::to_string(ndim) + " dimensions, got shape " + t.shape_str());
}
// -1 in `want` matches any size.
inline void check_shape(const TensorView& t, std::initializer_list<int64_t> want) {
  bool ok = t.dim() == static_cast<int64_t>(want.size());
  int64_t i = 0;
  for (int64_t w : want) {
    if (ok && w >= 0 && t.shape[static_cast<size_t>(i)] != w) ok = false;
    ++i;
  }
  if (!ok) {
    // messages are built with std::to_string: an ostream's integer output crashed inside the _cuda
    // module on a GPU machine's toolchain (its locale facets), and a check must never crash
    std::string msg = t.name + ": expected shape [";
    i = 0;
    for (int64_t w : want) msg += (i++ ? ", " : "") + (w < 0 ? std::string("*") : std::to_string(w));
    fail(msg + "], got " + t.shape_str());
  }
}
inline void check_same_device(const TensorView& a, const TensorView& b) {
  if (a.ptr != nullptr && b.ptr != nullptr && a.device_id >= 0 && b.device_id >= 0 && a.device_id != b.device_id)
    fail(a.name + " and " + b.name + ": tensors on different devices (" + std::to_string(a.device_id) + " and " +
         std::to_string(b.device_id) + ")");
}

// A device input of a given dtype: CUDA, contiguous, typed (the usual triple).
inline void check_input(const TensorView& t, DType want) {
  check_cuda(t);
  check_contiguous(t);
  check_type(t, want);
}

}  // namespace xmem

#define XMEM_CHECK_CUDA(t) ::xmem::check_cuda(t)
#define XMEM_CHECK_CONTIGUOUS(t) ::xmem::check_contiguous(t)
#define XMEM_CHECK_INPUT_TYPE(t, dtype) ::xmem::check_type(t, dtype)
#define XMEM_CHECK_DIM(t, n) ::xmem::check_dim(t, n)
#define XMEM_CHECK_SHAPE(t, ...) ::xmem::check_shape(t, __VA_ARGS__)
#define XMEM_CHECK_SAME_DEVICE(a, b) ::xmem::check_same_device(a, b)
#define XMEM_CHECK_INPUT(t, dtype) ::xmem::check_input(t, dtype)
