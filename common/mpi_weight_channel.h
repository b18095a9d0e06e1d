// Weight broadcast over MPI (CPU runs, ranks of several machines sharing GPUs), over NCCL (each
// rank of the communicator on its own GPU; built when CUDA and NCCL are found) and through CUDA
// IPC (every rank on one GPU of one machine; built with CUDA). `comm` holds the learner (rank 0
// of it, the root) and the workers.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "common/weight_channel.h"

namespace leap {

std::unique_ptr<WeightChannel> make_mpi_weight_channel(MPI_Comm comm);
// nullptr when this build has no NCCL. `device`: the CUDA device of this rank.
std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm comm, int device);
bool have_nccl();
// nullptr when this build has no CUDA, or when the ranks cannot map each other's device memory
// (checked with a probe buffer, collectively: every rank gets the same answer, `why` says why).
// Every rank of `comm` must be on the same GPU of one machine.
std::unique_ptr<WeightChannel> make_ipc_weight_channel(MPI_Comm comm, std::string* why);

// `n` bytes at `data` from rank 0 of `comm` to every other rank (counts above INT_MAX in pieces).
void mpi_broadcast_bytes(MPI_Comm comm, void* data, size_t n);

}  // namespace leap
