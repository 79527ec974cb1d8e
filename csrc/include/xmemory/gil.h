// The GIL released for a block (pybind11's gil_scoped_release), safe when the interpreter finalises
// meanwhile. CPython before 3.14 ends a thread that takes the GIL back during finalisation (a daemon
// thread still in a native call when the main thread exits) with pthread_exit, a forced unwind; met
// by gil_scoped_release's destructor, which is noexcept, it calls std::terminate and the process
// aborts ("terminate called without an active exception"). GilRelease catches that unwind and parks
// the thread for good: it holds no GIL, runs nothing more and
// frees nothing (an unwind would drop Python references without the GIL), and the process exits.
// Every binding that releases the GIL uses this, never py::gil_scoped_release.
#pragma once
#include <pybind11/pybind11.h>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif
#include <unistd.h>

namespace xmem {

class GilRelease {
 public:
  GilRelease() : tstate_(PyEval_SaveThread()) {}
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

  ~GilRelease() {
#if defined(__GLIBCXX__)
    try {
      PyEval_RestoreThread(tstate_);
    } catch (abi::__forced_unwind&) {  // the interpreter is finalising: never rethrown, never returns
      park();
    }
#else
    PyEval_RestoreThread(tstate_);  // no catchable forced unwind in this C++ runtime: as gil_scoped_release
#endif
  }

 private:
  [[noreturn]] static void park() {
    for (;;) ::pause();
  }

  PyThreadState* tstate_;
};

}  // namespace xmem
