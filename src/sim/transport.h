// Moving bytes between the processes of a pod spread over several hosts
// (`mpirun -np K tpu-run ...`). The simulator only needs a broadcast from
// one rank to all and ordered point-to-point messages. The MPI
// implementation lives in its own library (src/mpi_transport), linked only
// into tpu-run-mpi, so tpu-run neither links nor needs MPI: under mpirun it
// hands over to tpu-run-mpi (see tools/tpu-run.cpp).
#pragma once

#include <string>

namespace tpu::sim {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank calls it with the same `root`; afterwards every rank holds
  // root's `bytes`.
  virtual void broadcast(int root, std::string& bytes) = 0;
  // Ordered, blocking messages between two ranks.
  virtual void send(int to, const std::string& bytes) = 0;
  virtual void receive(int from, std::string& bytes) = 0;
};

// The number of processes when this one was started by mpirun (Open MPI's
// OMPI_COMM_WORLD_SIZE, or PMIX_SIZE / PMI_SIZE of other launchers); 1
// otherwise.
int mpiWorldSizeFromEnvironment();

}  // namespace tpu::sim
