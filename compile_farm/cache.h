// Content-addressed cache of compiled candidates. Key = hash of source, compiler identity
// and version, flags, target and ABI header. Entries are written to a temporary file and
// renamed into place, so any number of processes may share one cache directory.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace leap {

struct CacheKeyParts {
  std::string source;
  std::string compiler_identity;  // resolved path + full version output
  std::vector<std::string> flags;
  std::string target;             // backend and architecture
  std::string abi_header;         // contents of leap/candidate.h
};

std::string cache_key(const CacheKeyParts& parts);

struct CacheEntry {
  bool ok = false;
  std::string library_path;  // with ok
  std::string diagnostics;   // without ok: the compiler's feedback
};

class CompileCache {
 public:
  explicit CompileCache(std::string dir);
  std::optional<CacheEntry> lookup(const std::string& key) const;
  // Moves `built_library` into the cache; returns the cached path.
  std::string store_library(const std::string& key, const std::string& built_library) const;
  void store_failure(const std::string& key, const std::string& diagnostics) const;
  // A fresh private directory for one compile job.
  std::string make_work_dir() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string entry_path(const std::string& key, const char* ext) const;
  std::string dir_;
};

}  // namespace leap
