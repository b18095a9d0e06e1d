// Command lines for bubblewrap (bwrap): the sandbox of candidate runners and of compilers.
// Every namespace unshared (user, pid, net, ipc, uts, cgroup), no capabilities, an empty
// environment, and a read-only view of the host's system directories; callers add what their
// process needs (a device, a job folder) and the command.
#pragma once
#include <string>
#include <vector>

namespace leap {

// bwrap and its options up to (not including) "--"; /tmp is a private tmpfs.
std::vector<std::string> bwrap_base(const std::string& bwrap);
// bwrap and its options up to "--" with no filesystem but `files` (each bound read-only where
// the loader finds it), /proc, /dev and a private /tmp: the view of a process that may load
// only those libraries.
std::vector<std::string> bwrap_files_only(const std::string& bwrap, const std::vector<std::string>& files);
// `name` as an absolute path, looked up on PATH when it has no slash (unchanged if not found).
std::string executable_path(const std::string& name);
// Appends a read-only bind of each path that exists (absolute paths only).
void bwrap_read_only(std::vector<std::string>& args, const std::vector<std::string>& paths);

}  // namespace leap
