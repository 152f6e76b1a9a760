// Registers every pass of the project in PassRegistry::global(). Tools call
// this once at start-up (explicit registration: static-initialiser tricks do
// not survive linking from static libraries).
#pragma once

namespace tpu::passes {

void registerAllPasses();

}  // namespace tpu::passes
