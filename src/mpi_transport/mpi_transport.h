// The pod simulator's transport over MPI (Open MPI): MPI_Init on creation,
// MPI_Finalize when destroyed. Only tpu-run-mpi links it.
#pragma once

#include <memory>
#include <string>

#include "sim/transport.h"

namespace tpu::sim {

// Null with a message in `error` if MPI does not start.
std::unique_ptr<Transport> createMpiTransport(std::string& error);

}  // namespace tpu::sim
