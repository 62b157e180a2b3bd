#include "c10d/checkpoint/Files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint::detail {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  C10D_THROW(CheckpointError, "checkpoint: ", what, " '", path, "' failed: ", std::strerror(error),
             " (errno ", error, ")");
}

}  // namespace

File File::create(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("creating", path, errno);
  return File(fd, path);
}

File File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    C10D_CHECK(error != ENOENT, CheckpointError, "checkpoint: file '", path,
               "' is missing (the metadata lists it)");
    fail("opening", path, error);
  }
  return File(fd, path);
}

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

void File::writeAt(const void* data, int64_t bytes, int64_t offset) const {
  const char* at = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(fd_, at, static_cast<size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("writing at byte " + std::to_string(offset) + " of", path_, errno);
    at += n;
    bytes -= n;
    offset += n;
  }
}

void File::readAt(void* data, int64_t bytes, int64_t offset) const {
  char* at = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, at, static_cast<size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("reading at byte " + std::to_string(offset) + " of", path_, errno);
    C10D_CHECK(n > 0, CheckpointError, "checkpoint: file '", path_, "' ends at byte ", offset,
               " but ", bytes, " more bytes were expected there (truncated)");
    at += n;
    bytes -= n;
    offset += n;
  }
}

int64_t File::size() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) fail("stat of", path_, errno);
  return info.st_size;
}

void File::sync() const {
  if (::fsync(fd_) != 0) fail("fsync of", path_, errno);
}

void File::willNeed(int64_t offset, int64_t bytes) const {
  ::posix_fadvise(fd_, offset, bytes, POSIX_FADV_WILLNEED);  // a hint: its failure changes nothing
}

void syncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("opening folder", dir, errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) fail("fsync of folder", dir, error);
}

void writeTextFile(const std::string& path, const std::string& text) {
  File file = File::create(path);
  file.writeAt(text.data(), static_cast<int64_t>(text.size()), 0);
  file.sync();
}

std::string readTextFile(const std::string& path) {
  File file = File::open(path);
  std::string text(static_cast<size_t>(file.size()), '\0');
  file.readAt(text.data(), static_cast<int64_t>(text.size()), 0);
  return text;
}

void makeDirectory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail("creating folder", dir, error.value());
}

void removeTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) fail("removing", path, error.value());
}

std::string withoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool isPartialName(const std::string& path) {
  const std::string name = withoutTrailingSlashes(path);
  return name.size() > 8 && name.compare(name.size() - 8, 8, ".partial") == 0;
}

void retireFolder(const std::string& dir) {
  const std::string name = withoutTrailingSlashes(dir);
  const std::string retired =
      name + ".removing-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".partial";
  renamePath(name, retired);
  removeTree(retired);
}

void renamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("renaming '" + from + "' to", to, errno);
}

bool pathExists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

std::string parentOf(const std::string& dir) {
  std::filesystem::path path(dir);
  while (path.has_filename() == false && path.has_parent_path() && path != path.root_path()) {
    path = path.parent_path();  // "a/b/" names b
  }
  std::filesystem::path parent = path.parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace c10d::inline v1::checkpoint::detail
