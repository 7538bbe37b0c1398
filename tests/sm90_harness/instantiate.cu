// One SM90 launcher for the harness, chosen at compile time:
//   -DFC_ELEMENT=cutlass::bfloat16_t -DFC_DTYPE=kBFloat16 -DFC_HEAD_DIM=128
// registered exactly as the generated csrc/instantiations/fwd_sm90_*.cu files do.
#include "common/registry.h"
#include "sm90/launch.h"

FLASHCUTE_REGISTER_KERNEL(kFwd, kSm90, FC_DTYPE, FC_ELEMENT, FC_HEAD_DIM, flashcute::sm90::FwdKernel);
