#pragma once

// metadata.json of a checkpoint folder, as a program reads it (docs/checkpoint.md has the
// format): what c10d-checkpoint's inspect prints, and what load plans its reads from.
//
// Errors: readMetadata throws CheckpointError naming the folder for a folder that is not a
// complete checkpoint, and naming the field for metadata that does not parse, has another format
// version, or contradicts itself (a slice outside its tensor or its file).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kMetadataFile = "metadata.json";
/// The largest checksum block a save writes and a load reads: a load reads and checks whole
/// blocks through a buffer of at least one block, so a block must stay a modest allocation.
inline constexpr int64_t kMaxChecksumBlockBytes = int64_t{256} << 20;

/// One stored slice: where its bytes are, and where they belong.
struct SavedSlice {
  Slice slice;
  size_t file = 0;     ///< index into Metadata::files
  std::string key;     ///< its name in that file's safetensors header
  int64_t offset = 0;  ///< of its first byte in the file
  int64_t bytes = 0;
  std::vector<uint64_t> checksums;  ///< XXH3-64 of each checksumBlockBytes of its bytes
  std::vector<int> holders;         ///< the ranks that held it at save (its writer first)
};

struct SavedTensor {
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> shape;
  std::vector<SavedSlice> slices;
};

struct SavedFile {
  std::string name;  ///< relative to the folder
  int rank = 0;      ///< the rank that wrote it
  int64_t bytes = 0;
};

struct Metadata {
  int version = kFormatVersion;
  int worldSize = 1;
  std::string layout;
  int64_t createdUnixNanos = 0;
  int64_t checksumBlockBytes = 0;
  std::vector<SavedFile> files;
  std::map<std::string, SavedTensor> tensors;
  std::map<std::string, std::string> values;

  /// Unique bytes of tensor data: what the files hold beyond their headers.
  int64_t dataBytes() const;
};

Metadata readMetadata(const std::string& dir);
std::string metadataToJson(const Metadata& metadata);
/// json as read from dir's metadata.json (dir only names it in errors).
Metadata metadataFromJson(const std::string& json, const std::string& dir);

/// A value as text: one set by State::setInt as its decimal digits, other bytes as base64.
std::string valueText(const std::string& bytes);

/// safetensors' name for dtype ("F32", "BF16", "BOOL"), and back (CheckpointError for others).
std::string safetensorsDtype(ScalarType dtype);
ScalarType dtypeFromSafetensors(const std::string& name);

}  // namespace c10d::inline v1::checkpoint
