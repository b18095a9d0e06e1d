// The reference of an imported task: a TorchScript module (traced or scripted from the task's
// PyTorch `Model` by the importer, parameters and buffers inside the archive), loaded once per
// judge and device. Linked only into leap-evald (and tests): LibTorch stays out of the ranks.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace leap {

class ModuleReference {
 public:
  // The archive at `path` on `device`, loaded on first use; errors name the file.
  static std::shared_ptr<ModuleReference> load(const std::string& path, at::Device device);
  virtual ~ModuleReference() = default;
  // The module's forward on the task's inputs (not its parameters): one tensor or a tuple.
  virtual std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) = 0;
  // A parameter or buffer by its state_dict name ("conv.weight"); throws LeapError if absent.
  virtual at::Tensor parameter(const std::string& name) const = 0;
};

}  // namespace leap
