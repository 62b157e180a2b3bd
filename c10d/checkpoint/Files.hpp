#pragma once

// Private to c10d/checkpoint (not installed): the file system calls a checkpoint makes, each
// throwing CheckpointError that names the path, the byte offset where there is one, and errno's
// text. Durability is explicit: data reaches the disk at syncFile, a rename or a new name at
// syncDirectory of the folder holding it.

#include <cstdint>
#include <string>

namespace c10d::inline v1::checkpoint::detail {

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
// "a/b/" as the folder it names, "a/b".
std::string withoutTrailingSlashes(std::string path);
// Whether the folder is a checkpoint in the making (or being removed): its name ends in
// ".partial", which load refuses and latest() skips.
bool isPartialName(const std::string& path);

// Bytes read at a time into one reused buffer by verify (a load reads less: Load.cpp): large enough
// that reads run at the disk's speed, small enough that a reader of a checkpoint of any size
// holds little memory (a load that staged whole slices spent nearly all its time in page faults;
// measured: docs/performance-history.md, "Figures that lived in code comments").
inline constexpr int64_t kReadChunkBytes = int64_t{8} << 20;

}  // namespace c10d::inline v1::checkpoint::detail
