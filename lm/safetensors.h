// safetensors (Hugging Face's weight format): an 8-byte little-endian header length, a JSON
// header naming every tensor's dtype, shape and byte range, then the raw data. Files are
// memory-mapped copy-on-write; a tensor on the CPU views the mapping (no copy; changing it in
// place leaves the file alone), on a GPU it is copied once.
// Sharded checkpoints: model.safetensors.index.json maps each tensor to its file.
#pragma once
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace leap::lm {

struct TensorInfo {
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws LeapError naming the file (and tensor) and what is wrong.
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return infos_.count(name) > 0; }
  const TensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor on `device` (the CPU: a view of the mapping that keeps it alive).
  torch::Tensor tensor(const std::string& name, torch::Device device = torch::kCPU) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> map_;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint folder: model.safetensors, or the shards model.safetensors.index.json names.
class SafetensorsModel {
 public:
  explicit SafetensorsModel(const std::string& dir);
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  torch::Tensor tensor(const std::string& name, torch::Device device = torch::kCPU) const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

// Writes `tensors` (contiguous copies, any device) in name order with 8-byte aligned data.
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

torch::ScalarType scalar_type_of(const std::string& dtype);  // throws LeapError for an unknown one
std::string dtype_name(torch::ScalarType t);

}  // namespace leap::lm
