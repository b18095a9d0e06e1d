#include "common/mpi_cluster.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>

#include "common/message_socket.h"
#include "common/mpi_bootstrap.h"

namespace leap {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

Cluster join_cluster(zmq::context_t& ctx) {
  Cluster c;
  if (!launched_by_mpi()) return c;
  MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.size);
  auto hosts = allgather_strings(MPI_COMM_WORLD, launch_info(MPI_COMM_WORLD).host);
  const bool one_host = std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h == hosts[0]; });
  auto inbox = std::make_unique<MessageSocket>(ctx, zmq::socket_type::pull);
  auto endpoint = inbox->bind("tcp://" + std::string(one_host ? "127.0.0.1" : routable_address()) + ":*");
  auto endpoints = allgather_strings(MPI_COMM_WORLD, endpoint);
  c.links = std::make_unique<LoopLinks>(ctx, c.rank, std::move(inbox), endpoints);
  return c;
}

void leave_cluster(Cluster& c) {
  if (!c.links) return;
  c.links.reset();
  MPI_Finalize();
}

}  // namespace leap
