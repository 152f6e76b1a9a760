// The branch of a chunked DMA loop whose last chunk is shorter.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/emitter.h"

namespace tpu::codegen {

// A loop of `steps` steps (step number in `stepReg`) whose last step moves
// fewer elements: emits full() for the other steps and last() for the last,
// behind a branch on the step only when both kinds occur (one step: last()
// alone; a last step as long as the others: full() alone). full() is emitted
// first, so descriptors they create keep their order.
template <class Full, class Last>
void emitFullOrLastStep(Emitter& e, const std::string& stepReg, int64_t steps, bool lastIsFull, Full full, Last last) {
  if (steps == 1) {
    last();
    return;
  }
  if (lastIsFull) {
    full();
    return;
  }
  std::string lt = e.newLabel("tail"), ld = e.newLabel("dmadone");
  e.op("br.eq {}, {}, {}", stepReg, steps - 1, lt);
  full();
  e.op("jmp {}", ld);
  e.label(lt);
  last();
  e.label(ld);
}

}  // namespace tpu::codegen
