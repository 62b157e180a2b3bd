#include "c10d/checkpoint/Metadata.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "c10d/checkpoint/Files.hpp"
#include "c10d/checkpoint/Geometry.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint {
namespace {

using Json = nlohmann::json;

constexpr const char* kFormatName = "c10d-checkpoint";

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unbase64(const std::string& text, const std::string& what) {
  C10D_CHECK(text.size() % 4 == 0, CheckpointError, "checkpoint: ", what, " is not base64");
  std::string out(3 * (text.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  C10D_CHECK(n >= 0, CheckpointError, "checkpoint: ", what, " is not base64");
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

uint64_t parseHex64(const std::string& text, const std::string& what) {
  C10D_CHECK(text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string::npos,
             CheckpointError, "checkpoint: ", what, " '", text, "' is not 16 hex digits");
  return std::stoull(text, nullptr, 16);
}

Json sliceJson(const Slice& slice) {
  return Json{{"kind", slice.kind == Slice::Kind::Flat ? "flat" : "box"},
              {"offsets", slice.offsets},
              {"sizes", slice.sizes}};
}

}  // namespace

std::string valueText(const std::string& bytes) {
  State probe;
  probe.setValue("v", bytes);
  try {
    return std::to_string(probe.getInt("v"));
  } catch (const InvalidArgument&) {
    return base64(bytes);
  }
}

int64_t Metadata::dataBytes() const {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    for (const SavedSlice& s : tensor.slices) bytes += s.bytes;
  }
  return bytes;
}

std::string safetensorsDtype(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float32:
      return "F32";
    case ScalarType::Float64:
      return "F64";
    case ScalarType::Float16:
      return "F16";
    case ScalarType::BFloat16:
      return "BF16";
    case ScalarType::Int8:
      return "I8";
    case ScalarType::Int16:
      return "I16";
    case ScalarType::Int32:
      return "I32";
    case ScalarType::Int64:
      return "I64";
    case ScalarType::UInt8:
      return "U8";
    case ScalarType::Bool:
      return "BOOL";
  }
  C10D_THROW(InvalidArgument, "checkpoint: no safetensors dtype for ", dtype);
}

ScalarType dtypeFromSafetensors(const std::string& name) {
  for (ScalarType dtype : kAllScalarTypes) {
    if (safetensorsDtype(dtype) == name) return dtype;
  }
  C10D_THROW(CheckpointError, "checkpoint: dtype '", name,
             "' is not one c10d holds (F32, F64, F16, BF16, I8, I16, I32, I64, U8, BOOL)");
}

std::string metadataToJson(const Metadata& m) {
  Json files = Json::array();
  for (const SavedFile& f : m.files) {
    files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}});
  }
  Json tensors = Json::object();
  for (const auto& [name, t] : m.tensors) {
    Json slices = Json::array();
    for (const SavedSlice& s : t.slices) {
      Json sums = Json::array();
      for (uint64_t c : s.checksums) sums.push_back(hex64(c));
      Json slice = sliceJson(s.slice);
      slice["file"] = s.file;
      slice["key"] = s.key;
      slice["offset"] = s.offset;
      slice["bytes"] = s.bytes;
      slice["checksums"] = std::move(sums);
      slice["holders"] = s.holders;
      slices.push_back(std::move(slice));
    }
    tensors[name] = {{"dtype", std::string(c10d::name(t.dtype))},
                     {"shape", t.shape},
                     {"slices", std::move(slices)}};
  }
  Json values = Json::object();
  for (const auto& [name, bytes] : m.values) values[name] = base64(bytes);
  Json root{{"format", kFormatName},
            {"version", m.version},
            {"world_size", m.worldSize},
            {"layout", m.layout},
            {"created_unix_ns", m.createdUnixNanos},
            {"checksum", {{"algorithm", "xxh3_64"}, {"block_bytes", m.checksumBlockBytes}}},
            {"files", std::move(files)},
            {"tensors", std::move(tensors)},
            {"values", std::move(values)}};
  return root.dump(1) + "\n";
}

Metadata metadataFromJson(const std::string& text, const std::string& dir) {
  const std::string where = "metadata of checkpoint '" + dir + "'";
  Json root;
  try {
    root = Json::parse(text);
  } catch (const std::exception& e) {
    C10D_THROW(CheckpointError, "checkpoint: the ", where, " does not parse: ", e.what());
  }
  Metadata m;
  std::string field;
  try {
    field = "format";
    C10D_CHECK(root.at("format").get<std::string>() == kFormatName, CheckpointError,
               "checkpoint: the ", where, " is not a c10d checkpoint (format '",
               root.at("format").get<std::string>(), "')");
    field = "version";
    m.version = root.at("version").get<int>();
    C10D_CHECK(m.version == kFormatVersion, CheckpointError, "checkpoint: the ", where,
               " has format version ", m.version, "; this build reads version ", kFormatVersion);
    field = "world_size";
    m.worldSize = root.at("world_size").get<int>();
    field = "layout";
    m.layout = root.value("layout", "");
    field = "created_unix_ns";
    m.createdUnixNanos = root.at("created_unix_ns").get<int64_t>();
    field = "checksum";
    C10D_CHECK(root.at("checksum").at("algorithm").get<std::string>() == "xxh3_64", CheckpointError,
               "checkpoint: the ", where, " uses checksum ",
               root.at("checksum").at("algorithm").dump(), "; this build checks xxh3_64");
    m.checksumBlockBytes = root.at("checksum").at("block_bytes").get<int64_t>();
    C10D_CHECK(m.checksumBlockBytes > 0 && m.checksumBlockBytes <= kMaxChecksumBlockBytes,
               CheckpointError, "checkpoint: the ", where, " has checksum block_bytes ",
               m.checksumBlockBytes, " (1 to 256 MiB are read)");
    field = "files";
    for (const Json& f : root.at("files")) {
      SavedFile file{f.at("name").get<std::string>(), f.at("rank").get<int>(),
                     f.at("bytes").get<int64_t>()};
      C10D_CHECK(file.bytes >= 0, CheckpointError, "checkpoint: the ", where, " gives file '",
                 file.name, "' ", file.bytes, " bytes");
      C10D_CHECK(!file.name.empty() && file.name.find('/') == std::string::npos &&
                     file.name != "." && file.name != "..",
                 CheckpointError, "checkpoint: the ", where, " names file '", file.name,
                 "', which is not a plain name inside the folder");
      m.files.push_back(std::move(file));
    }
    for (const auto& [name, t] : root.at("tensors").items()) {
      field = "tensors." + name;
      SavedTensor tensor;
      const std::string dtype = t.at("dtype").get<std::string>();
      try {
        tensor.dtype = scalarTypeFromName(dtype);
      } catch (const InvalidArgument&) {
        C10D_THROW(CheckpointError, "checkpoint: the ", where, ": tensor '", name, "' has dtype '",
                   dtype, "', which this build does not hold");
      }
      tensor.shape = t.at("shape").get<std::vector<int64_t>>();
      int64_t numel = 1;
      for (int64_t s : tensor.shape) {
        C10D_CHECK(s >= 0 && !__builtin_mul_overflow(numel, s, &numel), CheckpointError,
                   "checkpoint: the ", where, ": tensor '", name, "' has a shape of ",
                   s < 0 ? "negative size" : "more elements than fit in 64 bits");
      }
      const int64_t element = static_cast<int64_t>(elementSize(tensor.dtype));
      int64_t tensorBytes = 0;
      C10D_CHECK(!__builtin_mul_overflow(numel, element, &tensorBytes), CheckpointError,
                 "checkpoint: the ", where, ": tensor '", name, "' is too large");
      for (const Json& j : t.at("slices")) {
        SavedSlice s;
        s.slice.kind =
            j.at("kind").get<std::string>() == "flat" ? Slice::Kind::Flat : Slice::Kind::Box;
        s.slice.offsets = j.at("offsets").get<std::vector<int64_t>>();
        s.slice.sizes = j.at("sizes").get<std::vector<int64_t>>();
        s.file = j.at("file").get<size_t>();
        s.key = j.at("key").get<std::string>();
        s.offset = j.at("offset").get<int64_t>();
        s.bytes = j.at("bytes").get<int64_t>();
        for (const Json& c : j.at("checksums")) {
          s.checksums.push_back(parseHex64(c.get<std::string>(), "a checksum of '" + name + "'"));
        }
        s.holders = j.value("holders", std::vector<int>{});
        // A slice must lie inside its tensor and its file, with a checksum per block: what a
        // load trusts before it reads a byte. (Every sum is checked against overflow: hostile
        // numbers must not wrap into plausible ones.)
        bool inside = s.slice.kind == Slice::Kind::Flat
                          ? s.slice.offsets.size() == 1 && s.slice.sizes.size() == 1 &&
                                s.slice.offsets[0] >= 0 && s.slice.sizes[0] >= 0 &&
                                s.slice.offsets[0] <= numel - s.slice.sizes[0]
                          : s.slice.offsets.size() == tensor.shape.size() &&
                                s.slice.sizes.size() == tensor.shape.size();
        for (size_t d = 0; inside && s.slice.kind == Slice::Kind::Box && d < tensor.shape.size();
             ++d) {
          inside = s.slice.offsets[d] >= 0 && s.slice.sizes[d] >= 0 &&
                   s.slice.offsets[d] <= tensor.shape[d] - s.slice.sizes[d];
        }
        C10D_CHECK(inside, CheckpointError, "checkpoint: the ", where, ": slice ",
                   s.slice.describe(), " of tensor '", name, "' is outside its shape");
        C10D_CHECK(s.bytes == s.slice.numel() * element, CheckpointError, "checkpoint: the ", where,
                   ": slice ", s.slice.describe(), " of tensor '", name, "' has ", s.bytes,
                   " bytes for ", s.slice.numel(), " elements of ", tensor.dtype);
        C10D_CHECK(s.file < m.files.size(), CheckpointError, "checkpoint: the ", where, ": slice ",
                   s.slice.describe(), " of tensor '", name, "' names file ", s.file, " of ",
                   m.files.size());
        C10D_CHECK(s.offset >= 0 && s.offset <= m.files[s.file].bytes - s.bytes, CheckpointError,
                   "checkpoint: the ", where, ": slice ", s.slice.describe(), " of tensor '", name,
                   "' lies outside its file '", m.files[s.file].name, "'");
        const int64_t blocks =
            s.bytes / m.checksumBlockBytes + (s.bytes % m.checksumBlockBytes != 0 ? 1 : 0);
        C10D_CHECK(static_cast<int64_t>(s.checksums.size()) == blocks, CheckpointError,
                   "checkpoint: the ", where, ": slice ", s.slice.describe(), " of tensor '", name,
                   "' has ", s.checksums.size(), " checksums for ", blocks, " blocks");
        tensor.slices.push_back(std::move(s));
      }
      // The slices cover the tensor once: overlaps (which could hide a gap from a count) and
      // gaps are refused here, before any load relies on them.
      std::vector<std::pair<detail::Run, size_t>> runs;
      for (size_t i = 0; i < tensor.slices.size(); ++i) {
        for (const detail::Run& run : detail::runsOf(tensor.slices[i].slice, tensor.shape)) {
          runs.push_back({run, i});
        }
      }
      const auto fault = detail::coverFault(runs, numel);
      C10D_CHECK(!fault, CheckpointError, "checkpoint: the ", where, ": the slices of tensor '",
                 name, "' ", fault && fault->overlap ? "overlap" : "leave a gap", " at element ",
                 fault ? fault->element : 0);
      m.tensors.emplace(name, std::move(tensor));
    }
    field = "values";
    for (const auto& [name, v] : root.at("values").items()) {
      m.values[name] = unbase64(v.get<std::string>(), "value '" + name + "'");
    }
  } catch (const CheckpointError& e) {
    // Name the folder in what the helpers say without it.
    if (std::string(e.what()).find(dir) != std::string::npos) throw;
    C10D_THROW(CheckpointError, e.what(), " (in the ", where, ", at '", field, "')");
  } catch (const std::exception& e) {
    C10D_THROW(CheckpointError, "checkpoint: the ", where, " is malformed at '", field,
               "': ", e.what());
  }
  return m;
}

Metadata readMetadata(const std::string& dir) {
  const std::string path = dir + "/" + kMetadataFile;
  const std::string name = detail::withoutTrailingSlashes(dir);
  // A partial folder may hold a metadata.json (rank 0 died between writing it and the rename),
  // so its name alone decides.
  const bool partial = detail::isPartialName(name);
  if (partial || !detail::pathExists(path)) {
    std::string why = "it has no metadata.json";
    if (partial) {
      why = "it is a save that did not finish";
    } else if (!detail::pathExists(dir)) {
      why = detail::pathExists(name + ".partial")
                ? "only '" + name + ".partial' exists: a save that did not finish"
                : "no such folder";
    }
    C10D_THROW(CheckpointError, "checkpoint: '", dir, "' is not a complete checkpoint (", why,
               "); checkpoint::latest(parent) finds the newest complete one");
  }
  return metadataFromJson(detail::readTextFile(path), dir);
}

}  // namespace c10d::inline v1::checkpoint
