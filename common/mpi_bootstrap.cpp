#include "common/mpi_bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace leap {

std::string to_string(Role r) {
  switch (r) {
    case Role::coordinator: return "coordinator";
    case Role::learner: return "learner";
    case Role::worker: return "worker";
  }
  return "?";
}

Role role_of(int rank) { return rank == 0 ? Role::coordinator : rank == 1 ? Role::learner : Role::worker; }

namespace {

const char* kHowToLaunch =
    "launch leap with at least 3 ranks (0 coordinator, 1 learner, 2.. one worker per GPU), e.g.\n"
    "  mpirun -np 4 leap run ...\n"
    "  srun --mpi=pmix -n 4 leap run ...   (Slurm; needs PMIx support in Open MPI)";

std::string env_value(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& e : env)
    if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
  return "";
}

}  // namespace

void check_launch(int size, const std::vector<std::string>& env) {
  // A scheduler that started N > 1 tasks while MPI sees a world of one: each task believes it
  // is rank 0 of 1 (srun without --mpi=pmix, or an MPI without PMI support).
  for (const char* var : {"SLURM_NTASKS", "SLURM_NPROCS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"}) {
    std::string v = env_value(env, var);
    if (size == 1 && !v.empty() && std::atoi(v.c_str()) > 1)
      throw LeapError(std::string(var) + "=" + v + " tasks were started but MPI sees a world of 1: every task "
                      "would run as rank 0. The launcher did not connect the tasks to MPI (srun needs --mpi=pmix)." +
                      "\n" + kHowToLaunch);
  }
  if (size < 3) throw LeapError("leap needs at least 3 ranks, this launch has " + std::to_string(size) + ".\n" + kHowToLaunch);
}

void check_launch_before_init(const std::vector<std::string>& env) {
  std::string tasks = env_value(env, "SLURM_STEP_NUM_TASKS");
  if (tasks.empty() || std::atoi(tasks.c_str()) <= 1) return;
  for (const char* pmi : {"PMIX_RANK", "PMI_RANK", "PMI_FD", "OMPI_COMM_WORLD_RANK"})
    if (!env_value(env, pmi).empty()) return;
  throw LeapError("srun started " + tasks + " tasks without PMI (no PMIX_RANK / PMI_RANK in their environment): "
                  "MPI cannot connect them and every task would be rank 0 of 1. Launch with srun --mpi=pmix "
                  "(srun --mpi=list shows what this Slurm offers), or with mpirun inside the allocation "
                  "(LEAP_LAUNCHER=mpirun with slurm/leap.sbatch).\n" + std::string(kHowToLaunch));
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size()), longest = 0;
  MPI_Allreduce(&len, &longest, 1, MPI_INT, MPI_MAX, comm);
  std::vector<char> send(static_cast<size_t>(longest) + 1, '\0'), recv(send.size() * static_cast<size_t>(size));
  std::memcpy(send.data(), mine.data(), mine.size());
  MPI_Allgather(send.data(), longest + 1, MPI_CHAR, recv.data(), longest + 1, MPI_CHAR, comm);
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(recv.data() + static_cast<size_t>(r) * send.size());
  return out;
}

LaunchInfo launch_info(MPI_Comm comm) {
  LaunchInfo info;
  MPI_Comm_rank(comm, &info.rank);
  MPI_Comm_size(comm, &info.size);
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &info.local_rank);
  MPI_Comm_size(local, &info.local_size);
  MPI_Comm_free(&local);
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  info.host = host;
  return info;
}

std::string routable_address() {
  if (const char* a = std::getenv("LEAP_BIND_ADDRESS"); a && *a) return a;
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) == 0) {
    for (auto* it = list; it; it = it->ifa_next) {
      if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
      auto* in = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
      char buf[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
      if (std::string(buf).rfind("127.", 0) != 0) {
        found = buf;
        break;
      }
    }
    ::freeifaddrs(list);
  }
  return found;
}

}  // namespace leap
