// Kernel registry: each generated instantiation (csrc/instantiations/*.cu) registers its launcher at load
// time, so the torch-facing file dispatches to whatever subset of (arch, dtype, head dim) was built.
#pragma once

#include <cuda_runtime.h>

#include "flash_params.h"

namespace flashcute {

enum class Arch { kSm80 = 80, kSm90 = 90 };
enum class DType { kFloat16, kBFloat16 };

using FwdLauncher = void (*)(const FwdParams&, cudaStream_t);

// Defined in flash_api.cpp.
bool register_fwd(Arch arch, DType dtype, int head_dim, FwdLauncher launcher);

}  // namespace flashcute

// Used once per instantiation file, at namespace scope.
#define FLASHCUTE_REGISTER_FWD(ARCH, DTYPE, ELEMENT, HEAD_DIM, LAUNCHER)                            \
  static const bool flashcute_registered_##HEAD_DIM =                                              \
      ::flashcute::register_fwd(::flashcute::Arch::ARCH, ::flashcute::DType::DTYPE, HEAD_DIM,     \
                                &LAUNCHER<ELEMENT, HEAD_DIM>)
