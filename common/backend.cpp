#include "common/backend.h"

namespace leap {

std::string to_string(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

std::optional<Backend> backend_from(const std::string& s) {
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda") return Backend::cuda;
  return std::nullopt;
}

}  // namespace leap
