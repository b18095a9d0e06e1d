// Bootstrap of the MPI program: roles by rank (0 coordinator, 1 learner, 2.. workers), the
// launch checks that stop a wrong launch with a message saying how to launch, node-local
// ranks for GPU choice, and the exchange of ZeroMQ endpoints (Allreduce of the longest
// length, then Allgather of fixed-size records).
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace leap {

enum class Role { coordinator, learner, worker };
std::string to_string(Role r);
Role role_of(int rank);

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the ranks on this host
  int local_size = 1;
  std::string host;
};

// Throws LeapError with launch instructions when `size` < 3, or when the environment shows a
// scheduler started several tasks but MPI sees a world of one (srun without PMI support).
void check_launch(int size, const std::vector<std::string>& env);
// Before MPI_Init: a Slurm step of several tasks without any PMI in the environment (srun
// --mpi=none). Open MPI would abort in MPI_Init with its own message; leap says how to launch.
void check_launch_before_init(const std::vector<std::string>& env);
LaunchInfo launch_info(MPI_Comm comm);
// Every rank's string, in rank order.
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
// An address other hosts can reach: LEAP_BIND_ADDRESS if set, else the host's first non-loopback
// IPv4 address, else 127.0.0.1 (every rank on one host).
std::string routable_address();

}  // namespace leap
