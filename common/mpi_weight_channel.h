// Weight broadcast over MPI (CPU runs, ranks sharing a GPU) and over NCCL (each rank of the
// communicator on its own GPU; built when CUDA and NCCL are found). `comm` holds the learner
// (rank 0 of it, the root) and the workers.
#pragma once
#include <mpi.h>

#include <memory>

#include "common/weight_channel.h"

namespace leap {

std::unique_ptr<WeightChannel> make_mpi_weight_channel(MPI_Comm comm);
// nullptr when this build has no NCCL. `device`: the CUDA device of this rank.
std::unique_ptr<WeightChannel> make_nccl_weight_channel(MPI_Comm comm, int device);
bool have_nccl();

}  // namespace leap
