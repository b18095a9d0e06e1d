// The ranks of `mpirun -np N leap serve|agent`: rank 0 the front (the HTTP front door, or the
// agent), ranks >= 1 evaluation workers (serve/serve_worker.h). MPI only exchanges the ZeroMQ
// endpoints; after that only ZeroMQ is used, so the others outlive a lost worker.
#pragma once
#include <memory>

#include <zmq.hpp>

#include "common/loop_links.h"

namespace leap {

// Started by mpirun / srun (an MPI launcher's environment).
bool launched_by_mpi();

struct Cluster {
  int rank = 0, size = 1;
  std::unique_ptr<LoopLinks> links;  // null outside MPI
};

// MPI_Init and the endpoint exchange when launched by MPI; a one-rank cluster otherwise.
Cluster join_cluster(zmq::context_t& ctx);
// Closes the links and finalises MPI (nothing outside MPI).
void leave_cluster(Cluster& c);

}  // namespace leap
