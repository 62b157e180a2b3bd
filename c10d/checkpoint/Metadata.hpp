#pragma once

/// \file
/// checkpoint::Metadata: a checkpoint folder's metadata.json as a program reads it, and helpers.
///
/// metadata.json of a checkpoint folder, as a program reads it (docs/checkpoint.md has the
/// format): what c10d-checkpoint's inspect prints, and what load plans its reads from.
///
/// Errors: readMetadata throws CheckpointError naming the folder for a folder that is not a
/// complete checkpoint, and naming the field for metadata that does not parse, has another format
/// version, or contradicts itself (a slice outside its tensor or its file).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "c10d/checkpoint/State.hpp"
#include "c10d/core/ScalarType.hpp"

namespace c10d::inline v1::checkpoint {

/// The metadata format version this build writes and reads (another is refused).
inline constexpr int kFormatVersion = 1;
/// The metadata file's name inside a checkpoint folder.
inline constexpr const char* kMetadataFile = "metadata.json";
/// The largest checksum block a save writes and a load reads: a load reads and checks whole
/// blocks through a buffer of at least one block, so a block must stay a modest allocation.
inline constexpr int64_t kMaxChecksumBlockBytes = int64_t{256} << 20;

/// One stored slice: where its bytes are, and where they belong.
struct SavedSlice {
  Slice slice;         ///< where the bytes belong in the tensor
  size_t file = 0;     ///< index into Metadata::files
  std::string key;     ///< its name in that file's safetensors header
  int64_t offset = 0;  ///< of its first byte in the file
  int64_t bytes = 0;   ///< its length in the file: slice.numel() times the element size
  std::vector<uint64_t> checksums;  ///< XXH3-64 of each checksumBlockBytes of its bytes
  std::vector<int> holders;         ///< the ranks that held it at save (its writer first)
};

/// One stored tensor: its global dtype and shape, and the slices that cover it once.
struct SavedTensor {
  ScalarType dtype = ScalarType::Float32;  ///< the element type
  std::vector<int64_t> shape;              ///< the global shape
  std::vector<SavedSlice> slices;          ///< covering the tensor, without overlaps
};

/// One data file (safetensors) of the checkpoint.
struct SavedFile {
  std::string name;   ///< relative to the folder
  int rank = 0;       ///< the rank that wrote it
  int64_t bytes = 0;  ///< its size, header included
};

/// The whole of metadata.json.
struct Metadata {
  int version = kFormatVersion;    ///< the format version (kFormatVersion)
  int worldSize = 1;               ///< the number of ranks that saved it
  std::string layout;              ///< SaveOptions::layout, as given; may be empty
  int64_t createdUnixNanos = 0;    ///< when rank 0 committed it: ns since the Unix epoch
  int64_t checksumBlockBytes = 0;  ///< bytes per checksum (SaveOptions::checksumBlockBytes)
  std::vector<SavedFile> files;    ///< the data files; SavedSlice::file indexes these
  /// every tensor, by name
  std::map<std::string, SavedTensor> tensors;
  /// every value's bytes, by name (State::values)
  std::map<std::string, std::string> values;

  /// Unique bytes of tensor data: what the files hold beyond their headers.
  /// \return The sum of every slice's bytes.
  int64_t dataBytes() const;
};

/// Reads and checks dir's metadata.json.
/// \param dir a checkpoint folder.
/// \return Its metadata.
/// \throws CheckpointError as the file's overview says.
Metadata readMetadata(const std::string& dir);
/// \param metadata what to write.
/// \return metadata as the text of metadata.json (values base64-encoded).
std::string metadataToJson(const Metadata& metadata);
/// json as read from dir's metadata.json (dir only names it in errors).
/// \param json the file's text.
/// \param dir the folder it came from, for error messages.
/// \return The metadata.
/// \throws CheckpointError for text that does not parse, another format version, or metadata
///         that contradicts itself, naming the field.
Metadata metadataFromJson(const std::string& json, const std::string& dir);

/// A value as text: one set by State::setInt as its decimal digits, other bytes as base64.
/// \param bytes a value's bytes, as State holds them.
/// \return That text.
std::string valueText(const std::string& bytes);

/// safetensors' name for dtype ("F32", "BF16", "BOOL"), and back (CheckpointError for a name
/// that is none of them).
/// \param dtype any c10d dtype.
/// \return Its safetensors name.
std::string safetensorsDtype(ScalarType dtype);
/// The inverse of safetensorsDtype.
/// \param name a safetensors dtype name ("F32", "BF16", "BOOL").
/// \return The c10d dtype.
/// \throws CheckpointError for a name of no dtype c10d holds.
ScalarType dtypeFromSafetensors(const std::string& name);

}  // namespace c10d::inline v1::checkpoint
