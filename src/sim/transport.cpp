#include "sim/transport.h"

#include <cstdlib>

namespace tpu::sim {

int mpiWorldSizeFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 1 << 20) return static_cast<int>(n);
  }
  return 1;
}

}  // namespace tpu::sim
