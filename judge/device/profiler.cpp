#include "judge/device/profiler.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/clock.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "sandbox/bwrap.h"

namespace leap {

const char* const kProfileMetrics =
    "gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,"
    "dram__throughput.avg.pct_of_peak_sustained_elapsed,"
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
    "sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,"
    "launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic";

namespace {

constexpr size_t kNameChars = 120;  // a kernel's name in the record (templates can run to kilobytes)

// One CSV line of quoted fields ("a","b,c",""); false when it is not such a line.
bool csv_fields(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] != '"') return false;
    std::string f;
    for (++i;; ++i) {
      if (i >= line.size()) return false;
      if (line[i] == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          f += '"';
          ++i;
          continue;
        }
        ++i;
        break;
      }
      f += line[i];
    }
    out.push_back(std::move(f));
    if (i < line.size() && line[i] == ',') ++i;
    else if (i < line.size() && line[i] != '\r') return false;
    else break;
  }
  return !out.empty();
}

// "53,632" -> 53632; "" or text -> nothing.
bool number(std::string s, double* v) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end && *end == 0;
}

// A name as text the policy and the record can hold: printable ASCII, bounded.
std::string clean_name(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= kNameChars) {
      out += "...";
      break;
    }
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

std::string dtype_code(proto::DType d) {
  switch (d) {
    case proto::DType::FLOAT32: return "f32";
    case proto::DType::FLOAT64: return "f64";
    case proto::DType::FLOAT16: return "f16";
    case proto::DType::BFLOAT16: return "bf16";
    case proto::DType::INT32: return "i32";
    case proto::DType::INT64: return "i64";
  }
  return "f32";
}

std::string tensor_arg(proto::TensorSpec::Reader t, bool input) {
  std::ostringstream s;
  s << dtype_code(t.getDtype()) << ':';
  bool first = true;
  for (auto d : t.getShape()) {
    s << (first ? "" : ",") << d;
    first = false;
  }
  if (input) {
    auto d = t.getDistribution();
    const std::string kind = d.getKind().size() ? std::string(d.getKind().cStr()) : "normal";
    s << ':' << kind << ':' << d.getA() << ':' << (d.getB() != 0 || kind != "normal" ? d.getB() : 1.0);
  }
  return s.str();
}

std::string ncu_path() {
  if (const char* e = std::getenv("LEAP_NCU"); e && *e) return e;
  std::string p = executable_path("ncu");
  if (p != "ncu") return p;
  return std::filesystem::exists("/usr/local/cuda/bin/ncu") ? "/usr/local/cuda/bin/ncu" : "";
}

}  // namespace

std::vector<KernelProfile> parse_ncu_csv(const std::string& text) {
  std::istringstream in(text);
  std::map<std::string, size_t> column;
  std::map<std::string, size_t> launch_index;  // ncu's launch ID -> position in `out`
  std::vector<KernelProfile> out;
  std::vector<std::string> f;
  for (std::string line; std::getline(in, line);) {
    if (!csv_fields(line, f)) continue;
    if (column.empty()) {
      if (f[0] != "ID") continue;
      for (size_t i = 0; i < f.size(); ++i) column[f[i]] = i;
      for (const char* need : {"Kernel Name", "Metric Name", "Metric Unit", "Metric Value"})
        if (!column.count(need)) return {};
      continue;
    }
    if (f.size() != column.size()) continue;
    auto at = [&](const char* name) -> std::string {
      auto it = column.find(name);
      return it == column.end() ? "" : f[it->second];
    };
    auto [it, fresh] = launch_index.emplace(f[0], out.size());
    if (fresh) {
      KernelProfile k;
      k.kernel = clean_name(at("Kernel Name"));
      k.block = clean_name(at("Block Size"));
      k.grid = clean_name(at("Grid Size"));
      out.push_back(k);
    }
    KernelProfile& k = out[it->second];
    const std::string metric = at("Metric Name"), unit = at("Metric Unit");
    double v = 0;
    if (!number(at("Metric Value"), &v)) continue;
    if (metric == "gpu__time_duration.sum")
      k.duration_us = unit == "ns" ? v / 1e3 : unit == "ms" ? v * 1e3 : unit == "s" ? v * 1e6 : v;
    else if (metric == "sm__warps_active.avg.pct_of_peak_sustained_active") k.occupancy_pct = v;
    else if (metric == "dram__throughput.avg.pct_of_peak_sustained_elapsed") k.dram_pct = v;
    else if (metric == "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") k.memory_pct = v;
    else if (metric == "sm__throughput.avg.pct_of_peak_sustained_elapsed") k.sm_pct = v;
    else if (metric == "launch__registers_per_thread") k.registers = static_cast<uint32_t>(v);
    else if (metric == "launch__shared_mem_per_block_static" || metric == "launch__shared_mem_per_block_dynamic")
      k.shared_bytes += static_cast<uint64_t>(v * (unit == "Kbyte" ? 1e3 : unit == "Mbyte" ? 1e6 : 1));
  }
  return out;
}

std::string bottleneck_of(const KernelProfile& k) {
  const double memory = std::max(k.memory_pct, k.dram_pct);
  if (std::max(memory, k.sm_pct) < 40) return "latency-bound";
  return memory >= 0.8 * k.sm_pct ? "memory-bound" : "compute-bound";
}

const KernelProfile* longest_kernel(const std::vector<KernelProfile>& kernels) {
  const KernelProfile* longest = nullptr;
  for (const auto& k : kernels)
    if (!longest || k.duration_us > longest->duration_us) longest = &k;
  return longest;
}

std::string profile_feedback(const std::vector<KernelProfile>& kernels, size_t max_kernels) {
  const KernelProfile* longest = longest_kernel(kernels);
  if (!longest) return "";
  std::vector<const KernelProfile*> order;
  double total_us = 0;
  for (const auto& k : kernels) {
    order.push_back(&k);
    total_us += k.duration_us;
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const KernelProfile* a, const KernelProfile* b) { return a->duration_us > b->duration_us; });
  char buf[512];
  std::snprintf(buf, sizeof buf, "profile (Nsight Compute, one call: %zu kernel launch%s, %.1f us): %s\n",
                kernels.size(), kernels.size() == 1 ? "" : "es", total_us, bottleneck_of(*longest).c_str());
  std::string out = buf;
  for (size_t i = 0; i < order.size() && i < max_kernels; ++i) {
    const KernelProfile& k = *order[i];
    std::snprintf(buf, sizeof buf,
                  "- %.60s: %.1f us, grid %s x block %s, occupancy %.0f%%, DRAM %.0f%%, memory %.0f%%, SM %.0f%%, "
                  "%u registers/thread, %llu B shared/block: %s\n",
                  k.kernel.c_str(), k.duration_us, k.grid.c_str(), k.block.c_str(), k.occupancy_pct, k.dram_pct,
                  k.memory_pct, k.sm_pct, k.registers, static_cast<unsigned long long>(k.shared_bytes),
                  bottleneck_of(k).c_str());
    out += buf;
  }
  if (order.size() > max_kernels) out += "- ... " + std::to_string(order.size() - max_kernels) + " more\n";
  return out;
}

ProfileResult profile_candidate(const std::string& library, proto::TaskRef::Reader task, double timeout_s) {
  ProfileResult r;
  const auto t0 = Clock::now();
  const std::string ncu = ncu_path();
  const auto target = std::filesystem::path(exe_dir()) / "leap-profile";
  if (ncu.empty()) {
    r.error = "Nsight Compute (ncu) not found (PATH, /usr/local/cuda/bin, $LEAP_NCU)";
    return r;
  }
  if (!std::filesystem::exists(target)) {
    r.error = "leap-profile not found beside " + exe_dir();
    return r;
  }
  // ncu's report goes to a folder of the judge's, bound into the sandbox (the only writable one).
  char dir_template[] = "/tmp/leap-profile.XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (!dir) {
    r.error = "mkdtemp failed";
    return r;
  }
  const std::string log = std::string(dir) + "/ncu.csv";
  std::vector<std::string> argv = bwrap_gpu_tool("bwrap");
  const std::string ncu_home = std::filesystem::canonical(ncu).parent_path().string();
  // CUDA's ncu is a launcher that finds Nsight Compute beside the toolkit or under /opt/nvidia.
  bwrap_read_only(argv, {"/opt/nvidia"});
  const std::string exe = target.string();
  argv.insert(argv.end(), {"--ro-bind", ncu_home, ncu_home, "--ro-bind", exe, exe, "--ro-bind", library, library});
  argv.insert(argv.end(), {"--bind", dir, dir, "--setenv", "HOME", dir, "--"});
  argv.insert(argv.end(),
              {ncu, "--csv", "--log-file", log, "--profile-from-start", "off", "--metrics", kProfileMetrics});
  argv.insert(argv.end(), {exe, "--library", library});
  for (auto t : task.getInputs()) argv.insert(argv.end(), {"--in", tensor_arg(t, true)});
  for (auto t : task.getOutputs()) argv.insert(argv.end(), {"--out", tensor_arg(t, false)});
  CommandResult c = run_command(argv, timeout_s, 1 << 16);
  std::string csv;
  try {
    csv = read_file(log);
  } catch (const std::exception&) {
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  r.kernels = parse_ncu_csv(csv);
  r.wall_us = micros_since(t0);
  if (r.kernels.empty()) {
    const std::string tail = clean_text(c.output.size() > 600 ? c.output.substr(c.output.size() - 600) : c.output, 600);
    const std::string how =
        c.exit_code >= 0 ? "exit code " + std::to_string(c.exit_code) : "signal " + std::to_string(c.signal);
    r.error = (c.timed_out ? "the profiler ran past " + std::to_string(static_cast<int>(timeout_s)) + " s"
                           : "no kernel profiled (" + how + ")") +
              ": " + tail;
  }
  return r;
}

}  // namespace leap
