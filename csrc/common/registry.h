// Kernel registry: each generated instantiation (csrc/instantiations/*.cu) registers its kernel at load time
// under (op, arch, dtype, head dim), so the torch-facing file dispatches to whatever subset was built.
// A kernel's variants (causal or not, the long-seqlen_k tile) are template flags inside its file, chosen by
// its launcher from the params.
//
// Only plain types cross between the kernels' files and flash_api.cpp: a kernel says why it cannot take some
// parameters by writing the reason into a caller's buffer.
#pragma once

#include <cuda_runtime.h>

#include "params.h"

namespace flashcute {

enum class Op { kFwd, kBwd, kDecode };
enum class Arch { kSm80 = 80, kSm90 = 90 };
enum class DType { kFloat16, kBFloat16 };

struct KernelKey {
  Op op;
  Arch arch;
  DType dtype;
  int head_dim;  // the instantiated head dim: smaller ones run predicated
};

template <class Params>
struct Kernel {
  using Launch = void (*)(Params const&, cudaStream_t);
  // True when the kernel can run these params; otherwise false, with the reason (naming the tensor) in `why`.
  using CanRun = bool (*)(Params const&, char* why, int why_size);
  // Fills in what the kernel decides for itself before the caller sizes workspaces (the decode kernels: the split
  // count); null for kernels with nothing to decide.
  using Plan = void (*)(Params&);
  KernelKey key;
  Launch launch;
  CanRun can_run;
  Plan plan = nullptr;
};

// Defined in flash_api.cpp, one overload per op's params.
bool register_kernel(Kernel<FwdParams> const& kernel);
bool register_kernel(Kernel<BwdParams> const& kernel);
bool register_kernel(Kernel<DecodeParams> const& kernel);

}  // namespace flashcute

// Once per instantiation file, at namespace scope. IMPL<ELEMENT, HEAD_DIM> provides static launch / can_run.
#define FLASHCUTE_REGISTER_KERNEL(OP, ARCH, DTYPE, ELEMENT, HEAD_DIM, IMPL)                                \
  static bool const flashcute_registered = ::flashcute::register_kernel(                                   \
      {{::flashcute::Op::OP, ::flashcute::Arch::ARCH, ::flashcute::DType::DTYPE, HEAD_DIM},                 \
       &IMPL<ELEMENT, HEAD_DIM>::launch, &IMPL<ELEMENT, HEAD_DIM>::can_run})
// The same for kernels with a plan (Kernel::plan).
#define FLASHCUTE_REGISTER_PLANNED_KERNEL(OP, ARCH, DTYPE, ELEMENT, HEAD_DIM, IMPL)                        \
  static bool const flashcute_registered = ::flashcute::register_kernel(                                   \
      {{::flashcute::Op::OP, ::flashcute::Arch::ARCH, ::flashcute::DType::DTYPE, HEAD_DIM},                 \
       &IMPL<ELEMENT, HEAD_DIM>::launch, &IMPL<ELEMENT, HEAD_DIM>::can_run, &IMPL<ELEMENT, HEAD_DIM>::plan})
