// The one torch-facing file: defines torch.ops.flashcute.fwd, validates its inputs with messages that name
// the argument and what was expected, fills the plain FwdParams struct and dispatches to the kernel that was
// built for (backend, dtype, head dim). Kernels never see torch.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/flash_params.h"
#include "common/registry.h"
#include "sm90/requirements.h"

namespace flashcute {

namespace {

// Numbers in messages are formatted here and passed as strings: streaming integers through std::ostream from
// this library crashed on the H200 image (a libstdc++ mismatch inside the inlined numeric insertion), while
// string insertion is resolved in libstdc++ itself.
std::string str(int64_t value) { return std::to_string(value); }
std::string str(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}
std::string str(c10::IntArrayRef values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) { text += (i ? ", " : "") + std::to_string(values[i]); }
  return text + "]";
}

struct RegisteredKernel {
  Arch arch;
  DType dtype;
  int head_dim;
  FwdLauncher launcher;
};

std::vector<RegisteredKernel>& registered_kernels() {
  static std::vector<RegisteredKernel> kernels;  // filled by the instantiations' static initialisers
  return kernels;
}

char const* arch_name(Arch arch) { return arch == Arch::kSm90 ? "sm90" : "sm80"; }
char const* dtype_name(DType dtype) { return dtype == DType::kBFloat16 ? "bfloat16" : "float16"; }

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    default: return c10::toString(type);
  }
}

std::string built_kernel_list() {
  std::ostringstream out;
  char const* sep = "";
  for (auto const& k : registered_kernels()) {
    out << sep << arch_name(k.arch) << "/" << dtype_name(k.dtype) << "/hdim" << k.head_dim;
    sep = ", ";
  }
  std::string text = out.str();
  return text.empty() ? "none" : text;
}

// The smallest built kernel whose instantiated head dim covers head_dim (smaller dims are predicated).
RegisteredKernel const* find_kernel(Arch arch, DType dtype, int head_dim) {
  RegisteredKernel const* best = nullptr;
  for (auto const& k : registered_kernels()) {
    if (k.arch == arch && k.dtype == dtype && k.head_dim >= head_dim &&
        (best == nullptr || k.head_dim < best->head_dim)) {
      best = &k;
    }
  }
  return best;
}

bool arch_built(Arch arch) {
  auto const& ks = registered_kernels();
  return std::any_of(ks.begin(), ks.end(), [&](auto const& k) { return k.arch == arch; });
}

void check_tensor(at::Tensor const& t, char const* name, char const* dims) {
  TORCH_CHECK(t.is_cuda(), "flashcute.fwd: ", name, " must be a CUDA tensor, got a tensor on ", t.device());
  TORCH_CHECK(t.dim() == 4, "flashcute.fwd: ", name, " must have 4 dimensions ", dims, ", got ", str(t.dim()),
              " (shape ", str(t.sizes()), ")");
  TORCH_CHECK(t.stride(3) == 1 || t.size(3) <= 1, "flashcute.fwd: ", name,
              " must be contiguous in its last dimension (stride 1), got stride ", str(t.stride(3)),
              "; call .contiguous() on it");
  // 128-bit loads: the base address and every stride that moves the address must be 16-byte multiples.
  bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int i = 0; i < 3; ++i) { aligned = aligned && (t.size(i) <= 1 || (t.stride(i) * t.element_size()) % 16 == 0); }
  TORCH_CHECK(aligned, "flashcute.fwd: ", name, " must be 16-byte aligned (data pointer and the strides of "
              "its first three dimensions multiples of 8 elements), got strides ", str(t.strides()),
              " and storage offset ", str(t.storage_offset()), "; call .contiguous() on it");
}

struct DeviceInfo {
  int major, minor, num_sms;
};

DeviceInfo device_info(int device) {
  DeviceInfo info{};
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
  return info;
}

// "auto" takes the SM90 kernel on Hopper when one is built for (dtype, head dim) and TMA can address the
// inputs (sm90_unsupported empty); otherwise the SM80 kernel, which runs on any sm_80+ GPU.
Arch choose_backend(std::string const& backend, DeviceInfo const& props, DType dtype, int head_dim,
                    std::string const& sm90_unsupported) {
  TORCH_CHECK(props.major >= 8, "flashcute.fwd: flashcute needs an NVIDIA GPU of compute capability 8.0 or newer "
              "(Ampere+), got ", str(int64_t(props.major)), ".", str(int64_t(props.minor)));
  if (backend == "sm90") {
    TORCH_CHECK(props.major == 9, "flashcute.fwd: backend 'sm90' needs a Hopper GPU (compute capability 9.x), got ",
                str(int64_t(props.major)), ".", str(int64_t(props.minor)), "; use backend='sm80' or 'auto'");
    TORCH_CHECK(arch_built(Arch::kSm90), "flashcute.fwd: backend 'sm90' is not in this build (built kernels: ",
                built_kernel_list(), "); build with FLASHCUTE_CUDA_ARCHS including 9.0a");
    TORCH_CHECK(sm90_unsupported.empty(), "flashcute.fwd: backend 'sm90' cannot take these inputs: ",
                sm90_unsupported, "; use backend='sm80' or 'auto', or pass contiguous tensors");
    return Arch::kSm90;
  }
  if (backend == "auto" && props.major == 9 && sm90_unsupported.empty() &&
      find_kernel(Arch::kSm90, dtype, head_dim) != nullptr) {
    return Arch::kSm90;
  }
  return Arch::kSm80;
}

}  // namespace

bool register_fwd(Arch arch, DType dtype, int head_dim, FwdLauncher launcher) {
  registered_kernels().push_back({arch, dtype, head_dim, launcher});
  return true;
}

std::tuple<at::Tensor, at::Tensor> fwd(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                       std::optional<double> softmax_scale, bool causal, bool causal_top_left,
                                       c10::string_view backend_arg) {
  check_tensor(q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_tensor(k, "k", "(batch, seqlen_k, heads_kv, head_dim)");
  check_tensor(v, "v", "(batch, seqlen_k, heads_kv, head_dim)");
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(),
              "flashcute.fwd: q, k and v must be on one device, got ", q.device(), ", ", k.device(), " and ",
              v.device());
  auto const dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16,
              "flashcute.fwd: q must have dtype float16 or bfloat16, got ", dtype_name(dtype));
  TORCH_CHECK(k.scalar_type() == dtype, "flashcute.fwd: k must have the same dtype as q (", dtype_name(dtype),
              "), got ", dtype_name(k.scalar_type()));
  TORCH_CHECK(v.scalar_type() == dtype, "flashcute.fwd: v must have the same dtype as q (", dtype_name(dtype),
              "), got ", dtype_name(v.scalar_type()));
  TORCH_CHECK(k.sizes() == v.sizes(), "flashcute.fwd: k and v must have the same shape, got k ", str(k.sizes()),
              " and v ", str(v.sizes()));

  int64_t const batch = q.size(0), seqlen_q = q.size(1), heads_q = q.size(2), head_dim = q.size(3);
  int64_t const seqlen_k = k.size(1), heads_kv = k.size(2);
  TORCH_CHECK(k.size(0) == batch, "flashcute.fwd: k must have the batch size of q (", str(batch), "), got ",
              str(k.size(0)));
  TORCH_CHECK(k.size(3) == head_dim, "flashcute.fwd: k must have the head_dim of q (", str(head_dim), "), got ",
              str(k.size(3)));
  TORCH_CHECK(head_dim > 0 && head_dim % 8 == 0 && head_dim <= 256,
              "flashcute.fwd: head_dim must be a multiple of 8 between 8 and 256, got ", str(head_dim));
  TORCH_CHECK(heads_kv > 0 && heads_q % heads_kv == 0, "flashcute.fwd: heads_q (", str(heads_q),
              ") must be a multiple of heads_kv (", str(heads_kv), ") for multi/grouped-query attention");
  TORCH_CHECK(batch <= 65535 && heads_q <= 65535, "flashcute.fwd: batch and heads_q must be at most 65535, got ",
              str(batch), " and ", str(heads_q));
  TORCH_CHECK(seqlen_q < (int64_t(1) << 31) && seqlen_k < (int64_t(1) << 31),
              "flashcute.fwd: sequence lengths must be below 2^31");
  double const scale = softmax_scale.value_or(1.0 / std::sqrt(double(head_dim)));
  // The online softmax tracks the row maximum of the unscaled scores, which is the maximum of the scaled ones
  // only for a positive scale.
  TORCH_CHECK(std::isfinite(scale) && scale > 0, "flashcute.fwd: softmax_scale must be positive and finite, got ",
              str(scale));
  std::string const backend(backend_arg);

  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const props = device_info(q.get_device());
  TORCH_CHECK(backend == "auto" || backend == "sm80" || backend == "sm90",
              "flashcute.fwd: backend must be one of 'auto', 'sm80', 'sm90', got '", backend, "'");
  DType const kernel_dtype = dtype == at::kBFloat16 ? DType::kBFloat16 : DType::kFloat16;

  at::Tensor out = at::empty({batch, seqlen_q, heads_q, head_dim}, q.options());
  at::Tensor lse = at::empty({batch, heads_q, seqlen_q}, q.options().dtype(at::kFloat));
  if (out.numel() == 0) { return {out, lse}; }
  if (seqlen_k == 0) {  // no keys at all: every row is empty
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }

  FwdParams params{};
  params.q_ptr = q.data_ptr();
  params.k_ptr = k.data_ptr();
  params.v_ptr = v.data_ptr();
  params.o_ptr = out.data_ptr();
  params.lse_ptr = lse.data_ptr<float>();
  params.q_batch_stride = q.stride(0), params.q_row_stride = q.stride(1), params.q_head_stride = q.stride(2);
  params.k_batch_stride = k.stride(0), params.k_row_stride = k.stride(1), params.k_head_stride = k.stride(2);
  params.v_batch_stride = v.stride(0), params.v_row_stride = v.stride(1), params.v_head_stride = v.stride(2);
  params.o_batch_stride = out.stride(0), params.o_row_stride = out.stride(1), params.o_head_stride = out.stride(2);
  params.batch = int(batch);
  params.heads_q = int(heads_q);
  params.heads_kv = int(heads_kv);
  params.seqlen_q = int(seqlen_q);
  params.seqlen_k = int(seqlen_k);
  params.head_dim = int(head_dim);
  params.softmax_scale = float(scale);
  params.softmax_scale_log2 = float(scale * M_LOG2E);
  params.causal = causal;
  params.causal_offset = causal_top_left ? 0 : int(seqlen_k - seqlen_q);
  params.num_sms = props.num_sms;

  Arch const arch = choose_backend(backend, props, kernel_dtype, int(head_dim),
                                   sm90::unsupported_reason(params, int(q.element_size())));
  RegisteredKernel const* kernel = find_kernel(arch, kernel_dtype, int(head_dim));
  TORCH_CHECK(kernel != nullptr, "flashcute.fwd: no ", arch_name(arch), " kernel for ", dtype_name(kernel_dtype),
              " with head_dim ", str(head_dim), " is in this build (built kernels: ", built_kernel_list(),
              "); rebuild without FLASHCUTE_DTYPES / FLASHCUTE_HDIMS restrictions");
  kernel->launcher(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, lse};
}

std::vector<std::string> built_kernels() {
  std::vector<std::string> names;
  for (auto const& k : registered_kernels()) {
    names.push_back(std::string(arch_name(k.arch)) + "_" + (k.dtype == DType::kBFloat16 ? "bf16" : "fp16") +
                    "_hdim" + std::to_string(k.head_dim));
  }
  std::sort(names.begin(), names.end());
  return names;
}

TORCH_LIBRARY(flashcute, m) {
  m.set_python_module("flashcute._ops");
  m.def("fwd(Tensor q, Tensor k, Tensor v, float? softmax_scale=None, bool causal=False, "
        "bool causal_top_left=False, str backend=\"auto\") -> (Tensor out, Tensor lse)");
  m.def("built_kernels() -> str[]", &built_kernels);
}

// CPU too, only so that CPU tensors get fwd's own "must be a CUDA tensor" message.
TORCH_LIBRARY_IMPL(flashcute, CUDA, m) { m.impl("fwd", &fwd); }
TORCH_LIBRARY_IMPL(flashcute, CPU, m) { m.impl("fwd", &fwd); }

}  // namespace flashcute
