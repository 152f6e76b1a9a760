// The MPI implementation of tpu::sim::Transport (see src/sim/transport.h):
// MPI_COMM_WORLD, messages split into pieces of at most 1 GiB (MPI counts
// are ints), a size first.
#include "mpi_transport/mpi_transport.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

namespace {

constexpr uint64_t kPiece = 1ull << 30;
constexpr int kTag = 7015;

class MpiTransport final : public tpu::sim::Transport {
 public:
  MpiTransport() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void broadcast(int root, std::string& bytes) override {
    uint64_t n = bytes.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    if (rank_ != root) bytes.resize(n);
    for (uint64_t at = 0; at < n; at += kPiece)
      MPI_Bcast(bytes.data() + at, static_cast<int>(std::min(kPiece, n - at)), MPI_BYTE, root, MPI_COMM_WORLD);
  }
  void send(int to, const std::string& bytes) override {
    uint64_t n = bytes.size();
    MPI_Send(&n, 1, MPI_UINT64_T, to, kTag, MPI_COMM_WORLD);
    for (uint64_t at = 0; at < n; at += kPiece)
      MPI_Send(bytes.data() + at, static_cast<int>(std::min(kPiece, n - at)), MPI_BYTE, to, kTag, MPI_COMM_WORLD);
  }
  void receive(int from, std::string& bytes) override {
    uint64_t n = 0;
    MPI_Recv(&n, 1, MPI_UINT64_T, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    bytes.resize(n);
    for (uint64_t at = 0; at < n; at += kPiece)
      MPI_Recv(bytes.data() + at, static_cast<int>(std::min(kPiece, n - at)), MPI_BYTE, from, kTag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

namespace tpu::sim {

std::unique_ptr<Transport> createMpiTransport(std::string& error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    error = "MPI_Init failed";
    return nullptr;
  }
  return std::make_unique<MpiTransport>();
}

}  // namespace tpu::sim
