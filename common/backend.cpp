#include "common/backend.h"

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace leap {

std::string to_string(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

std::optional<Backend> backend_from(const std::string& s) {
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda") return Backend::cuda;
  return std::nullopt;
}

std::string device_model(Backend b) {
  namespace fs = std::filesystem;
  auto value_after = [](const std::string& path, const std::string& key) -> std::string {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) {
        auto v = line.substr(line.find(':') + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    return "";
  };
  if (b == Backend::cuda) {
    std::error_code ec;
    std::vector<std::string> gpus;
    for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) gpus.push_back(e.path());
    std::sort(gpus.begin(), gpus.end());
    for (const auto& g : gpus)
      if (auto m = value_after(g + "/information", "Model"); !m.empty()) return m;
    return "unknown GPU";
  }
  auto m = value_after("/proc/cpuinfo", "model name");
  return m.empty() ? "unknown CPU" : m;
}

std::vector<std::string> visible_gpus() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) out.push_back(item);
    return out;
  }
  for (int i = 0; i < 64; ++i)
    if (std::filesystem::exists("/dev/nvidia" + std::to_string(i))) out.push_back(std::to_string(i));
  return out;
}

}  // namespace leap
