// verify and consolidate: what c10d-checkpoint runs, for programs too.

#include <xxhash.h>

#include <algorithm>
#include <map>
#include <memory>

#include "c10d/checkpoint/Checkpoint.hpp"
#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Metadata.hpp"
#include "c10d/checkpoint/Safetensors.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint {

std::vector<std::string> verify(const std::string& dir, const Progress& progress) {
  const Metadata m = readMetadata(dir);
  std::vector<std::string> problems;
  std::vector<std::unique_ptr<detail::File>> files(m.files.size());
  for (size_t f = 0; f < m.files.size(); ++f) {
    const std::string path = dir + "/" + m.files[f].name;
    try {
      auto file = std::make_unique<detail::File>(detail::File::open(path));
      const int64_t bytes = file->size();
      if (bytes != m.files[f].bytes) {
        problems.push_back("file '" + path + "' is " + std::to_string(bytes) +
                           " bytes but the metadata says " + std::to_string(m.files[f].bytes) +
                           (bytes < m.files[f].bytes ? " (truncated)" : ""));
      }
      files[f] = std::move(file);
    } catch (const CheckpointError& e) {
      problems.push_back(e.what());
    }
  }
  const int64_t total = m.dataBytes();
  int64_t done = 0;
  const int64_t block = m.checksumBlockBytes;
  const int64_t chunk = std::max(block, detail::kReadChunkBytes / block * block);
  std::vector<char> buffer;
  for (const auto& [name, tensor] : m.tensors) {
    for (const SavedSlice& s : tensor.slices) {
      const detail::File* file = files[s.file].get();
      for (int64_t at = 0; at < s.bytes; at += chunk) {
        const int64_t n = std::min(chunk, s.bytes - at);
        done += n;
        if (file == nullptr) continue;
        if (buffer.size() < static_cast<size_t>(n)) buffer.resize(static_cast<size_t>(n));
        try {
          file->readAt(buffer.data(), n, s.offset + at);
        } catch (const CheckpointError& e) {
          problems.push_back("tensor '" + name + "', slice " + s.slice.describe() + ": " +
                             e.what());
          break;
        }
        for (int64_t b = 0; b < n; b += block) {
          const int64_t length = std::min(block, n - b);
          if (XXH3_64bits(buffer.data() + b, static_cast<size_t>(length)) !=
              s.checksums[static_cast<size_t>((at + b) / block)]) {
            problems.push_back("tensor '" + name + "', slice " + s.slice.describe() + ": bytes " +
                               std::to_string(s.offset + at + b) + " to " +
                               std::to_string(s.offset + at + b + length) + " of file '" +
                               file->path() + "' do not match their checksum");
          }
        }
        if (progress) progress(done, total);
      }
    }
  }
  if (progress) progress(total, total);
  return problems;
}

void consolidate(const std::string& dir, const std::string& out, const Progress& progress) {
  const Metadata m = readMetadata(dir);
  C10D_CHECK(!detail::pathExists(out), CheckpointError, "checkpoint::consolidate: '", out,
             "' exists already");
  // The files hold what the metadata says (its slices cover each tensor, readMetadata checked),
  // so the tensors' sizes below are backed by data, not just claimed.
  for (const SavedFile& f : m.files) {
    const std::string path = dir + "/" + f.name;
    const int64_t bytes = detail::File::open(path).size();
    C10D_CHECK(bytes == f.bytes, CheckpointError, "checkpoint::consolidate: file '", path, "' is ",
               bytes, " bytes but the metadata says ", f.bytes);
  }
  std::vector<detail::SafetensorsEntry> entries;
  for (const auto& [name, tensor] : m.tensors) {
    int64_t numel = 1;
    for (int64_t s : tensor.shape) numel *= s;
    entries.push_back({name, tensor.dtype, tensor.shape,
                       numel * static_cast<int64_t>(elementSize(tensor.dtype))});
  }
  std::map<std::string, std::string> values{{"format", "c10d-checkpoint-consolidated"}};
  for (const auto& [name, bytes] : m.values) values[name] = valueText(bytes);
  const std::string header = detail::safetensorsHeader(entries, values);
  const std::string partial = out + ".partial";
  detail::File file = detail::File::create(partial);
  file.writeAt(header.data(), static_cast<int64_t>(header.size()), 0);
  int64_t offset = static_cast<int64_t>(header.size()), done = 0;
  const int64_t total = m.dataBytes();
  for (const detail::SafetensorsEntry& e : entries) {
    // One tensor at a time, through load: the same reads and checks, whole.
    Tensor whole = Tensor::empty(e.shape, e.dtype);
    State state;
    state.add(e.key, whole);
    load(state, dir, nullptr, LoadOptions{.allowUnexpected = true});
    file.writeAt(whole.data(), e.bytes, offset);
    offset += e.bytes;
    done += e.bytes;
    if (progress) progress(done, total);
  }
  file.sync();
  detail::renamePath(partial, out);
  detail::syncDirectory(detail::parentOf(out));
}

}  // namespace c10d::inline v1::checkpoint
