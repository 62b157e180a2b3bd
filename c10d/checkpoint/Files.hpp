#pragma once

// Private to c10d/checkpoint (not installed): the file system calls a checkpoint makes, each
// throwing CheckpointError that names the path, the byte offset where there is one, and errno's
// text. Durability is explicit: data reaches the disk at syncFile, a rename or a new name at
// syncDirectory of the folder holding it.

#include <cstdint>
#include <string>

namespace c10d::inline v0::checkpoint::detail {

// An open file descriptor, closed on destruction.
class File {
 public:
  static File create(const std::string& path);  // truncating, for writing
  static File open(const std::string& path);    // for reading
  File(File&& other) noexcept;
  File& operator=(File&&) = delete;
  ~File();

  void writeAt(const void* data, int64_t bytes, int64_t offset) const;
  // Reads exactly bytes at offset; throws naming a file that ends first (truncated).
  void readAt(void* data, int64_t bytes, int64_t offset) const;
  int64_t size() const;
  void sync() const;
  // Tells the kernel these bytes will be read soon, so that it starts reading them ahead.
  void willNeed(int64_t offset, int64_t bytes) const;
  const std::string& path() const { return path_; }

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

void syncDirectory(const std::string& dir);
// Writes text to path (truncating) and syncs it.
void writeTextFile(const std::string& path, const std::string& text);
std::string readTextFile(const std::string& path);
void makeDirectory(const std::string& dir);
void removeTree(const std::string& path);  // nothing to remove is not an error
// Removes a checkpoint folder so that a crash midway leaves a folder named *.partial, never one
// that still looks complete with files missing: renamed first, then removed.
void retireFolder(const std::string& dir);
void renamePath(const std::string& from, const std::string& to);
bool pathExists(const std::string& path);
// dir's parent, "." for a bare name.
std::string parentOf(const std::string& dir);

}  // namespace c10d::inline v0::checkpoint::detail
