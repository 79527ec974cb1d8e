// Durable file writes without the GIL: several files written to their temporary paths on threads
// of our own, their bytes made durable, from 16 files in one folder on a local file system of
// Linux 5.8 or later, by one syncfs of the file system (one journal commit, not one per file: a
// bulk build's 1,000 fsyncs cost the build thread ~0.15 s of the machine's second core), else by
// an fsync each, then renamed into place, in one call. A store's commit hands a
// shard's files to this call from one background thread while the build's thread runs Python:
// written in Python, each of open, write, fsync, close and rename hands the GIL back and waits for
// it again, and a thread waiting for the GIL behind a busy interpreter waits a switch interval
// (5 ms) each time (1,000 files of 148 kB: 4.3 s next to a busy interpreter, 0.6 s idle).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <unistd.h>
#ifdef __linux__
#include <sys/statfs.h>
#include <sys/utsname.h>
#endif
#include <vector>

#include "xmemory/gil.h"

namespace py = pybind11;

namespace {

constexpr size_t kSyncAll = 16;  // files from which one syncfs replaces an fsync each

struct Job {
  std::string tmp, dst;
  const char* data;
  Py_ssize_t size;
  int err = 0;
  bool at_dst = false;  // the failed step was the rename (the error names dst)
};

// One file's bytes: created or truncated (mode 0666 less the umask, as Python's open(tmp, "wb")),
// written, fsynced unless `sync` is false (the caller then syncs the file system), closed; on
// failure tmp is removed.
void write_one(Job& j, bool sync) {
  const int fd = ::open(j.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    j.err = errno;
    return;
  }
  Py_ssize_t done = 0;
  while (done < j.size && j.err == 0) {
    const ssize_t w = ::write(fd, j.data + done, size_t(j.size - done));
    if (w < 0) {
      if (errno != EINTR) j.err = errno;
    } else {
      done += w;
    }
  }
  if (sync && j.err == 0 && ::fsync(fd) != 0) j.err = errno;
  if (::close(fd) != 0 && j.err == 0) j.err = errno;
  if (j.err != 0) ::unlink(j.tmp.c_str());
}

void rename_one(Job& j) {
  if (j.err == 0 && ::rename(j.tmp.c_str(), j.dst.c_str()) != 0) {
    j.err = errno;
    j.at_dst = true;
    ::unlink(j.tmp.c_str());
  }
}

#ifdef __linux__
// Whether syncfs makes the bytes written through `fd` durable and says when it could not: Linux
// 5.8 on (syncfs reports writeback errors since), on a local file system whose sync writes data
// and metadata (ext4, xfs, btrfs; tmpfs has nothing to write). Network and FUSE file systems
// (their server keeps the data) and anything unknown get an fsync per file.
bool syncfs_is_enough(int fd) {
  struct utsname u;
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2 || major < 5 || (major == 5 && minor < 8)) return false;
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53UL:      // ext2/3/4
    case 0x58465342UL:  // xfs
    case 0x9123683EUL:  // btrfs
    case 0x01021994UL:  // tmpfs
      return true;
    default:
      return false;
  }
}
#endif

std::string folder_of(const std::string& path) {
  const size_t at = path.rfind('/');
  return at == std::string::npos ? std::string(".") : path.substr(0, at);
}

// An open descriptor of the one folder every file of `jobs` goes to, when one syncfs there makes
// them durable (syncfs_is_enough), else -1: then each file is fsynced as it is written.
int syncfs_folder(const std::vector<Job>& jobs) {
#ifdef __linux__
  if (jobs.empty()) return -1;
  const std::string folder = folder_of(jobs[0].tmp);
  for (const Job& j : jobs)
    if (folder_of(j.tmp) != folder) return -1;
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (syncfs_is_enough(fd)) return fd;
  ::close(fd);
#else
  (void)jobs;
#endif
  return -1;
}

// The written files' bytes on disk: one syncfs through `folder_fd`; should it fail, each file
// fsynced (a file that cannot be is dropped: its tmp removed, its error kept).
void sync_all(std::vector<Job>& jobs, int folder_fd) {
#ifdef __linux__
  if (::syncfs(folder_fd) == 0) return;
#else
  (void)folder_fd;
#endif
  for (Job& j : jobs) {
    if (j.err != 0) continue;
    const int fd = ::open(j.tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) j.err = errno;
    if (fd >= 0) ::close(fd);
    if (j.err != 0) ::unlink(j.tmp.c_str());
  }
}

// Files i: data[i] to tmp[i], made durable, renamed to dst[i], on up to `threads` threads. Returns
// the failures (index, errno, path) in index order; every other file is in place.
std::vector<std::tuple<size_t, int, py::bytes>> write_durable(const std::vector<std::string>& tmp,
                                                              const std::vector<std::string>& dst,
                                                              const py::list& data, int threads) {
  const size_t n = tmp.size();
  if (dst.size() != n || data.size() != n) throw py::value_error("tmp, dst and data differ in length");
  std::vector<Job> jobs(n);
  for (size_t i = 0; i < n; ++i) {
    py::handle h = data[i];
    if (!PyBytes_CheckExact(h.ptr())) throw py::type_error("data: expected bytes");
    jobs[i].tmp = tmp[i];
    jobs[i].dst = dst[i];
    jobs[i].data = PyBytes_AS_STRING(h.ptr());
    jobs[i].size = PyBytes_GET_SIZE(h.ptr());
  }
  {
    xmem::GilRelease release;  // the bytes are held by `data`, the caller's list
    // many files (a bulk build's shard) where one syncfs is enough: written on the threads, then one
    // sync of the file system, then renamed (one journal commit for all rather than one per fsync);
    // a few (a live engine's write: it never waits on other writers' dirty pages) or elsewhere:
    // each fsynced on the threads as it is written
    const int folder_fd = n >= kSyncAll ? syncfs_folder(jobs) : -1;
    const bool batch = folder_fd >= 0;
    std::atomic<size_t> next{0};
    auto run = [&] {
      for (size_t i = next++; i < n; i = next++) write_one(jobs[i], !batch);
    };
    const size_t t = std::min(n, size_t(std::max(threads, 1)));
    std::vector<std::thread> pool;
    pool.reserve(t);
    for (size_t k = 1; k < t; ++k) {
      try {
        pool.emplace_back(run);
      } catch (const std::exception&) {  // no thread to be had (a process limit): the ones started do it
        break;
      }
    }
    run();
    for (auto& th : pool) th.join();
    if (batch) {
      sync_all(jobs, folder_fd);
      ::close(folder_fd);
    }
    for (Job& j : jobs) rename_one(j);
  }
  std::vector<std::tuple<size_t, int, py::bytes>> failed;
  for (size_t i = 0; i < n; ++i)
    if (jobs[i].err != 0) failed.emplace_back(i, jobs[i].err, py::bytes(jobs[i].at_dst ? jobs[i].dst : jobs[i].tmp));
  return failed;
}

}  // namespace

void register_files(py::module_& m) {
  m.def("write_durable", &write_durable, py::arg("tmp"), py::arg("dst"), py::arg("data"), py::arg("threads"),
        "Files written to tmp paths, fsynced, renamed to dst, on threads of our own without the GIL: the "
        "failures (index, errno, path)");
}
