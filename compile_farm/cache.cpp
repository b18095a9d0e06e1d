#include "compile_farm/cache.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/hash.h"
#include "common/paths.h"

namespace leap {
namespace fs = std::filesystem;

std::string cache_key(const CacheKeyParts& p) {
  std::vector<std::string_view> parts{p.source, p.compiler_identity, p.target, p.abi_header};
  for (const auto& f : p.flags) parts.push_back(f);
  return content_hash(parts);
}

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "tmp", ec);
  if (ec) throw LeapError("compile cache " + dir_ + ": " + ec.message());
}

std::string CompileCache::entry_path(const std::string& key, const char* ext) const {
  return dir_ + "/" + key.substr(0, 2) + "/" + key + ext;
}

std::optional<CacheEntry> CompileCache::lookup(const std::string& key) const {
  auto so = entry_path(key, ".so");
  if (::access(so.c_str(), R_OK) == 0) return CacheEntry{true, so, ""};
  auto err = entry_path(key, ".err");
  if (::access(err.c_str(), R_OK) == 0) return CacheEntry{false, "", read_file(err)};
  return std::nullopt;
}

std::string CompileCache::store_library(const std::string& key, const std::string& built) const {
  auto dest = entry_path(key, ".so");
  fs::create_directories(fs::path(dest).parent_path());
  // rename(2) within one filesystem is atomic: readers see no entry or a whole one.
  auto staged = dest + ".tmp." + std::to_string(::getpid()) + "." + fs::path(built).parent_path().filename().string();
  fs::copy_file(built, staged, fs::copy_options::overwrite_existing);
  fs::rename(staged, dest);
  return dest;
}

void CompileCache::store_failure(const std::string& key, const std::string& diagnostics) const {
  auto dest = entry_path(key, ".err");
  fs::create_directories(fs::path(dest).parent_path());
  char tmpl[4096];
  snprintf(tmpl, sizeof tmpl, "%s.tmp.XXXXXX", dest.c_str());
  int fd = ::mkstemp(tmpl);
  if (fd < 0) throw_errno("compile cache: create " + dest);
  ::close(fd);
  {
    std::ofstream out(tmpl, std::ios::binary);
    out << diagnostics;
  }
  fs::rename(tmpl, dest);
}

std::string CompileCache::make_work_dir() const {
  std::string tmpl = dir_ + "/tmp/job.XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("compile cache: mkdtemp in " + dir_);
  return tmpl;
}

}  // namespace leap
