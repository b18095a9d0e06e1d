#include "lm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace leap::lm {
namespace {

struct DType {
  const char* name;
  torch::ScalarType type;
  size_t bytes;
};
constexpr DType kDTypes[] = {{"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2},
                             {"BF16", torch::kBFloat16, 2}, {"I64", torch::kInt64, 8}, {"I32", torch::kInt32, 4},
                             {"I16", torch::kInt16, 2},     {"I8", torch::kInt8, 1},     {"U8", torch::kUInt8, 1},
                             {"BOOL", torch::kBool, 1}};

const DType* find_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace

torch::ScalarType scalar_type_of(const std::string& dtype) {
  if (auto* d = find_dtype(dtype)) return d->type;
  throw LeapError("unknown safetensors dtype '" + dtype + "'");
}

std::string dtype_name(torch::ScalarType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  throw LeapError(std::string("no safetensors dtype for ") + c10::toString(t));
}

struct SafetensorsFile::Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED && size > 0) ::munmap(base, size);
  }
};

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), map_(std::make_shared<Mapping>()) {
  auto fail = [&](const std::string& what) { throw LeapError(path_ + ": " + what); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail("not a safetensors file: " + std::to_string(size) + " bytes, shorter than its 8-byte header length");
  }
  map_->size = size;
  // Copy-on-write: a caller may change a tensor in place without touching the file.
  map_->base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_->base == MAP_FAILED) fail(std::string("cannot map: ") + std::strerror(errno));
  const auto* bytes = static_cast<const uint8_t*>(map_->base);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  if (header_len > size - 8)
    fail("the header says it is " + std::to_string(header_len) + " bytes, but the file has only " +
         std::to_string(size - 8) + " after the length (truncated?)");
  auto header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object()) fail("the header is not a JSON object");
  data_ = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (const auto& [k, m] : v.items())
        if (m.is_string()) metadata_[k] = m.get<std::string>();
      continue;
    }
    auto bad = [&](const std::string& what) { fail("tensor '" + name + "': " + what); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad("needs dtype, shape and data_offsets");
    TensorInfo t;
    if (!v["dtype"].is_string()) bad("dtype is not a string");
    t.dtype = v["dtype"].get<std::string>();
    const DType* d = find_dtype(t.dtype);
    if (!d) bad("unknown dtype '" + t.dtype + "'");
    uint64_t numel = 1;
    if (!v["shape"].is_array()) bad("shape is not an array");
    for (const auto& s : v["shape"]) {
      if (!s.is_number_unsigned()) bad("shape holds a value that is not a non-negative integer");
      t.shape.push_back(s.get<int64_t>());
      numel *= s.get<uint64_t>();
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets must be [begin, end]");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.end < t.begin || t.end > data_size)
      bad("bytes [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") lie outside the data section of " +
          std::to_string(data_size) + " bytes (truncated?)");
    if (t.end - t.begin != numel * d->bytes)
      bad(std::to_string(t.end - t.begin) + " bytes for " + std::to_string(numel) + " " + t.dtype + " elements (" +
          std::to_string(numel * d->bytes) + " expected)");
    ranges.emplace_back(t.begin, t.end);
    infos_[name] = std::move(t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail("two tensors' byte ranges overlap");
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : infos_) out.push_back(n);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = infos_.find(name);
  if (it == infos_.end()) throw LeapError(path_ + ": no tensor '" + name + "'");
  return it->second;
}

torch::Tensor SafetensorsFile::tensor(const std::string& name, torch::Device device) const {
  const auto& t = info(name);
  auto keep = map_;  // the view keeps the mapping alive
  // The data section is not aligned for every dtype; an unaligned view is copied.
  const uint8_t* p = data_ + t.begin;
  auto options = torch::TensorOptions().dtype(scalar_type_of(t.dtype));
  torch::Tensor view = torch::from_blob(const_cast<uint8_t*>(p), t.shape, [keep](void*) {}, options);
  const bool aligned = reinterpret_cast<uintptr_t>(p) % torch::elementSize(scalar_type_of(t.dtype)) == 0;
  if (device.is_cpu()) return aligned ? view : view.clone();
  return view.to(device);
}

SafetensorsModel::SafetensorsModel(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw LeapError(index.string() + ": not a safetensors index (no weight_map object)");
    std::map<std::string, const SafetensorsFile*> opened;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw LeapError(index.string() + ": weight_map['" + name + "'] is not a file name");
      const std::string f = file.get<std::string>();
      if (!opened.count(f)) {
        files_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / f).string()));
        opened[f] = files_.back().get();
      }
      if (!opened[f]->contains(name))
        throw LeapError(index.string() + ": names '" + name + "' in " + f + ", which does not hold it");
      where_[name] = opened[f];
    }
    return;
  }
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(single)) throw LeapError(dir + ": neither model.safetensors nor model.safetensors.index.json");
  files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
  for (const auto& n : files_.back()->names()) where_[n] = files_.back().get();
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : where_) out.push_back(n);
  return out;
}

torch::Tensor SafetensorsModel::tensor(const std::string& name, torch::Device device) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw LeapError(dir_ + ": the checkpoint has no tensor '" + name + "'");
  return it->second->tensor(name, device);
}

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    const uint64_t n = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    data.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw LeapError(path + ": cannot write");
  uint64_t len = text.size();
  char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out.write(le, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& c : data)
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
  if (!out) throw LeapError(path + ": write failed");
}

}  // namespace leap::lm
