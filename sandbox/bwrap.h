// Command lines for bubblewrap (bwrap) from the sandbox policy (sandbox/policy.toml): the
// sandboxes of candidate runners and of compilers. Callers add what their process needs (a job
// folder, limits) and the command.
#pragma once
#include <string>
#include <vector>

namespace leap {

// bwrap and its options up to (not including) "--" for a compiler: [isolation] and [compiler].
std::vector<std::string> bwrap_base(const std::string& bwrap);
// bwrap and its options up to "--" with no filesystem but `files` (each bound read-only where
// the loader finds it), /proc, /dev and a private /tmp: the view of a process that may load
// only those libraries.
std::vector<std::string> bwrap_files_only(const std::string& bwrap, const std::vector<std::string>& files);
// A runner's view ([runner]): `runner_path` and the libraries the policy lets it load, each with
// what it needs (resolved by ldd once: the result is what a pool passes to runner_view_args).
std::vector<std::string> runner_libraries(const std::string& runner_path, bool cuda);
// bwrap and its options up to "--" for a runner: its libraries, its executable, and on CUDA the
// policy's device files and read-only folders.
std::vector<std::string> runner_view_args(const std::string& bwrap, const std::string& runner_path,
                                          const std::vector<std::string>& libraries, bool cuda);
// bwrap and its options up to "--" for a GPU tool that runs a candidate after its verdict (the
// profiler): the compiler's view (system files read-only, no network, a private /tmp) and the
// runner's device files.
std::vector<std::string> bwrap_gpu_tool(const std::string& bwrap);
// A Python runner's view: the files and folders that importing what candidates use needs, found
// by running `script --view` with `python` once, outside the sandbox (the imports the runner makes
// at its start), plus `native` (the runner's own library) and what ldd resolves for it.
struct PythonView {
  std::vector<std::string> files, folders;
};
PythonView python_view(const std::string& python, const std::string& script, const std::string& native, bool cuda);
// Appends read-only binds of `folders` (whole) to a view.
void bwrap_folders(std::vector<std::string>& args, const std::vector<std::string>& folders);
// `name` as an absolute path, looked up on PATH when it has no slash (unchanged if not found).
std::string executable_path(const std::string& name);
// Appends a read-only bind of each path that exists (absolute paths only).
void bwrap_read_only(std::vector<std::string>& args, const std::vector<std::string>& paths);

}  // namespace leap
