// The one torch-facing file: implements the ops whose schemas flashcute/_ops.py defines (torch.ops.flashcute.*),
// validates their inputs with messages that name the argument and what was expected, fills the plain params
// structs (common/params.h) and dispatches through the kernel registry (common/registry.h) to a kernel that was
// built for (op, backend, dtype, head dim) and says it can run the inputs. Kernels never see torch.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/registry.h"

namespace flashcute {

namespace {

template <class Params>
std::vector<Kernel<Params>>& registered() {
  static std::vector<Kernel<Params>> kernels;  // filled by the instantiations' static initialisers
  return kernels;
}

char const* op_name(Op op) { return op == Op::kFwd ? "fwd" : "bwd"; }
char const* arch_name(Arch arch) { return arch == Arch::kSm90 ? "sm90" : "sm80"; }
char const* dtype_short_name(DType dtype) { return dtype == DType::kBFloat16 ? "bf16" : "fp16"; }
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

std::string kernel_name(KernelKey const& key) {
  return std::string(op_name(key.op)) + "_" + arch_name(key.arch) + "_" + dtype_short_name(key.dtype) + "_hdim" +
         std::to_string(key.head_dim);
}

template <class Params>
std::string built_kernel_list() {
  std::string text;
  for (auto const& k : registered<Params>()) { text += (text.empty() ? "" : ", ") + kernel_name(k.key); }
  return text.empty() ? "none" : text;
}

// The smallest built kernel of (op, arch, dtype) whose instantiated head dim covers head_dim (smaller head dims
// run predicated).
template <class Params>
Kernel<Params> const* find_kernel(Op op, Arch arch, DType dtype, int head_dim) {
  Kernel<Params> const* best = nullptr;
  for (auto const& k : registered<Params>()) {
    KernelKey const& key = k.key;
    if (key.op == op && key.arch == arch && key.dtype == dtype && key.head_dim >= head_dim &&
        (best == nullptr || key.head_dim < best->key.head_dim)) {
      best = &k;
    }
  }
  return best;
}

// Empty when the kernel can run the params, else its reason.
template <class Params>
std::string cannot_run_reason(Kernel<Params> const& kernel, Params const& params) {
  char why[512] = {0};
  return kernel.can_run(params, why, sizeof(why)) ? std::string() : std::string(why[0] ? why : "no reason given");
}

void check_tensor(char const* op, at::Tensor const& t, char const* name, char const* dims) {
  TORCH_CHECK(t.is_cuda(), "flashcute.", op, ": ", name, " must be a CUDA tensor, got a tensor on ", t.device());
  TORCH_CHECK(t.dim() == 4, "flashcute.", op, ": ", name, " must have 4 dimensions ", dims, ", got ", t.dim(),
              " (shape ", t.sizes(), ")");
  TORCH_CHECK(t.stride(3) == 1 || t.size(3) <= 1, "flashcute.", op, ": ", name,
              " must be contiguous in its last dimension (stride 1), got stride ", t.stride(3),
              "; call .contiguous() on it");
  // 128-bit loads: the base address and every stride that moves the address must be 16-byte multiples.
  bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int i = 0; i < 3; ++i) { aligned = aligned && (t.size(i) <= 1 || (t.stride(i) * t.element_size()) % 16 == 0); }
  TORCH_CHECK(aligned, "flashcute.", op, ": ", name, " must be 16-byte aligned (data pointer and the strides of "
              "its first three dimensions multiples of 8 elements), got strides ", t.strides(),
              " and storage offset ", t.storage_offset(), "; call .contiguous() on it");
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

// "auto": the SM90 kernel on Hopper when one is built for (dtype, head dim) and can run the inputs; otherwise
// the SM80 kernel, which runs on any sm_80+ GPU. "sm80" / "sm90": that kernel, or an error saying why not.
template <class Params>
Kernel<Params> const& choose_kernel(Op op, std::string const& backend, DeviceInfo const& device, DType dtype,
                                    int head_dim, Params const& params) {
  char const* name = op_name(op);
  TORCH_CHECK(device.major >= 8, "flashcute.", name, ": flashcute needs an NVIDIA GPU of compute capability 8.0 or "
              "newer (Ampere+), got ", device.major, ".", device.minor);
  TORCH_CHECK(backend == "auto" || backend == "sm80" || backend == "sm90", "flashcute.", name,
              ": backend must be one of 'auto', 'sm80', 'sm90', got '", backend, "'");
  if (backend == "sm90") {
    TORCH_CHECK(device.major == 9, "flashcute.", name, ": backend 'sm90' needs a Hopper GPU (compute capability "
                "9.x), got ", device.major, ".", device.minor, "; use backend='sm80' or 'auto'");
  }
  if (backend == "sm90" || (backend == "auto" && device.major == 9)) {
    if (auto const* kernel = find_kernel<Params>(op, Arch::kSm90, dtype, head_dim)) {
      std::string const reason = cannot_run_reason(*kernel, params);
      if (reason.empty()) { return *kernel; }
      TORCH_CHECK(backend == "auto", "flashcute.", name, ": backend 'sm90' cannot take these inputs: ", reason,
                  "; use backend='sm80' or 'auto', or pass contiguous tensors");
    }
  }
  Arch const arch = backend == "sm90" ? Arch::kSm90 : Arch::kSm80;
  auto const* kernel = find_kernel<Params>(op, arch, dtype, head_dim);
  TORCH_CHECK(kernel != nullptr || op != Op::kBwd || arch != Arch::kSm90, "flashcute.bwd: backend 'sm90' has no "
              "backward kernels yet (the SM90 backward is planned); use backend='sm80' or 'auto'");
  TORCH_CHECK(kernel != nullptr, "flashcute.", name, ": no ", arch_name(arch), " kernel for ", dtype_name(dtype),
              " with head_dim ", head_dim, " is in this build (built kernels: ", built_kernel_list<Params>(),
              "); rebuild without FLASHCUTE_DTYPES / FLASHCUTE_HDIMS restrictions",
              arch == Arch::kSm90 ? " and with FLASHCUTE_CUDA_ARCHS including 9.0a" : "");
  std::string const reason = cannot_run_reason(*kernel, params);
  TORCH_CHECK(reason.empty(), "flashcute.", name, ": backend '", arch_name(arch), "' cannot take these inputs: ",
              reason);
  return *kernel;
}

}  // namespace

bool register_kernel(Kernel<FwdParams> const& kernel) {
  registered<FwdParams>().push_back(kernel);
  return true;
}

bool register_kernel(Kernel<BwdParams> const& kernel) {
  registered<BwdParams>().push_back(kernel);
  return true;
}

namespace {

struct QKVShape {
  int64_t batch, seqlen_q, heads_q, head_dim, seqlen_k, heads_kv;
};

// The checks fwd and bwd share: q, k, v themselves and the options. Returns their shape.
QKVShape check_qkv(char const* op, at::Tensor const& q, at::Tensor const& k, at::Tensor const& v) {
  check_tensor(op, q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_tensor(op, k, "k", "(batch, seqlen_k, heads_kv, head_dim)");
  check_tensor(op, v, "v", "(batch, seqlen_k, heads_kv, head_dim)");
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), "flashcute.", op,
              ": q, k and v must be on one device, got ", q.device(), ", ", k.device(), " and ", v.device());
  auto const dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16, "flashcute.", op,
              ": q must have dtype float16 or bfloat16, got ", dtype_name(dtype));
  TORCH_CHECK(k.scalar_type() == dtype, "flashcute.", op, ": k must have the same dtype as q (", dtype_name(dtype),
              "), got ", dtype_name(k.scalar_type()));
  TORCH_CHECK(v.scalar_type() == dtype, "flashcute.", op, ": v must have the same dtype as q (", dtype_name(dtype),
              "), got ", dtype_name(v.scalar_type()));
  TORCH_CHECK(k.sizes() == v.sizes(), "flashcute.", op, ": k and v must have the same shape, got k ", k.sizes(),
              " and v ", v.sizes());

  QKVShape const s{q.size(0), q.size(1), q.size(2), q.size(3), k.size(1), k.size(2)};
  TORCH_CHECK(k.size(0) == s.batch, "flashcute.", op, ": k must have the batch size of q (", s.batch, "), got ",
              k.size(0));
  TORCH_CHECK(k.size(3) == s.head_dim, "flashcute.", op, ": k must have the head_dim of q (", s.head_dim, "), got ",
              k.size(3));
  TORCH_CHECK(s.head_dim > 0 && s.head_dim % 8 == 0 && s.head_dim <= 256, "flashcute.", op,
              ": head_dim must be a multiple of 8 between 8 and 256, got ", s.head_dim);
  TORCH_CHECK(s.heads_kv > 0 && s.heads_q % s.heads_kv == 0, "flashcute.", op, ": heads_q (", s.heads_q,
              ") must be a multiple of heads_kv (", s.heads_kv, ") for multi/grouped-query attention");
  TORCH_CHECK(s.batch <= 65535 && s.heads_q <= 65535, "flashcute.", op,
              ": batch and heads_q must be at most 65535, got ", s.batch, " and ", s.heads_q);
  TORCH_CHECK(s.seqlen_q < (int64_t(1) << 31) && s.seqlen_k < (int64_t(1) << 31), "flashcute.", op,
              ": sequence lengths must be below 2^31");
  return s;
}

double check_softmax_scale(char const* op, std::optional<double> softmax_scale, int64_t head_dim) {
  double const scale = softmax_scale.value_or(1.0 / std::sqrt(double(head_dim)));
  // The online softmax tracks the row maximum of the unscaled scores, which is the maximum of the scaled ones
  // only for a positive scale.
  TORCH_CHECK(std::isfinite(scale) && scale > 0, "flashcute.", op, ": softmax_scale must be positive and finite, got ",
              scale);
  return scale;
}

// The params both ops fill alike: q, k, v, the output o (fwd: written; bwd: read), the LSE, shapes and mask.
void fill_attn_params(AttnParams& params, QKVShape const& s, at::Tensor const& q, at::Tensor const& k,
                      at::Tensor const& v, at::Tensor const& out, at::Tensor const& lse, double scale, bool causal,
                      bool causal_top_left, int num_sms) {
  params.q_ptr = q.data_ptr();
  params.k_ptr = k.data_ptr();
  params.v_ptr = v.data_ptr();
  params.o_ptr = out.data_ptr();
  params.lse_ptr = lse.data_ptr<float>();
  params.q_batch_stride = q.stride(0), params.q_row_stride = q.stride(1), params.q_head_stride = q.stride(2);
  params.k_batch_stride = k.stride(0), params.k_row_stride = k.stride(1), params.k_head_stride = k.stride(2);
  params.v_batch_stride = v.stride(0), params.v_row_stride = v.stride(1), params.v_head_stride = v.stride(2);
  params.o_batch_stride = out.stride(0), params.o_row_stride = out.stride(1), params.o_head_stride = out.stride(2);
  params.batch = int(s.batch);
  params.heads_q = int(s.heads_q);
  params.heads_kv = int(s.heads_kv);
  params.seqlen_q = int(s.seqlen_q);
  params.seqlen_k = int(s.seqlen_k);
  params.head_dim = int(s.head_dim);
  params.softmax_scale = float(scale);
  params.softmax_scale_log2 = float(scale * M_LOG2E);
  params.causal = causal;
  params.causal_top_left = causal_top_left;
  params.causal_offset = causal_top_left ? 0 : int(s.seqlen_k - s.seqlen_q);
  params.num_sms = num_sms;
}

DType kernel_dtype(at::Tensor const& q) { return q.scalar_type() == at::kBFloat16 ? DType::kBFloat16 : DType::kFloat16; }

}  // namespace

// `deterministic` is for the backward (fwd's autograd formula hands it to bwd); the forward is deterministic.
std::tuple<at::Tensor, at::Tensor> fwd(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                       std::optional<double> softmax_scale, bool causal, bool causal_top_left,
                                       c10::string_view backend, bool /*deterministic*/) {
  QKVShape const s = check_qkv("fwd", q, k, v);
  double const scale = check_softmax_scale("fwd", softmax_scale, s.head_dim);

  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const device = device_info(q.get_device());

  at::Tensor out = at::empty({s.batch, s.seqlen_q, s.heads_q, s.head_dim}, q.options());
  at::Tensor lse = at::empty({s.batch, s.heads_q, s.seqlen_q}, q.options().dtype(at::kFloat));

  FwdParams params{};
  fill_attn_params(params, s, q, k, v, out, lse, scale, causal, causal_top_left, device.num_sms);

  // Chosen (and its errors raised) before the early returns, so a bad backend fails on every shape.
  Kernel<FwdParams> const& kernel =
      choose_kernel(Op::kFwd, std::string(backend), device, kernel_dtype(q), int(s.head_dim), params);
  if (out.numel() == 0) { return {out, lse}; }
  if (s.seqlen_k == 0) {  // no keys at all: every row is empty
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }
  kernel.launch(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, lse};
}

// dout and out: like q; lse: (batch, heads_q, seqlen_q) float32, as fwd returned them. Returns (dq, dk, dv),
// contiguous, in q's dtype.
std::tuple<at::Tensor, at::Tensor, at::Tensor> bwd(at::Tensor const& dout, at::Tensor const& q, at::Tensor const& k,
                                                   at::Tensor const& v, at::Tensor const& out, at::Tensor const& lse,
                                                   std::optional<double> softmax_scale, bool causal,
                                                   bool causal_top_left, bool deterministic, c10::string_view backend) {
  QKVShape const s = check_qkv("bwd", q, k, v);
  double const scale = check_softmax_scale("bwd", softmax_scale, s.head_dim);
  check_tensor("bwd", dout, "dout", "(batch, seqlen_q, heads_q, head_dim), like q");
  check_tensor("bwd", out, "out", "(batch, seqlen_q, heads_q, head_dim), as fwd returned it");
  for (auto const& [t, name] : {std::pair{&dout, "dout"}, std::pair{&out, "out"}}) {
    TORCH_CHECK(t->device() == q.device(), "flashcute.bwd: ", name, " must be on q's device (", q.device(), "), got ",
                t->device());
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "flashcute.bwd: ", name, " must have q's dtype (",
                dtype_name(q.scalar_type()), "), got ", dtype_name(t->scalar_type()));
    TORCH_CHECK(t->sizes() == q.sizes(), "flashcute.bwd: ", name, " must have q's shape ", q.sizes(), ", got ",
                t->sizes());
  }
  TORCH_CHECK(lse.is_cuda() && lse.device() == q.device(), "flashcute.bwd: lse must be on q's device (", q.device(),
              "), got ", lse.device());
  TORCH_CHECK(lse.scalar_type() == at::kFloat, "flashcute.bwd: lse must have dtype float32 (as fwd returns it), got ",
              dtype_name(lse.scalar_type()));
  TORCH_CHECK(lse.dim() == 3 && lse.size(0) == s.batch && lse.size(1) == s.heads_q && lse.size(2) == s.seqlen_q,
              "flashcute.bwd: lse must have shape (batch, heads_q, seqlen_q) = (", s.batch, ", ", s.heads_q, ", ",
              s.seqlen_q, "), got ", lse.sizes());
  at::Tensor const lse_rows = lse.contiguous();  // the kernels read it as (batch, heads_q, seqlen_q) rows

  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const device = device_info(q.get_device());

  at::Tensor dq = at::empty({s.batch, s.seqlen_q, s.heads_q, s.head_dim}, q.options());
  at::Tensor dk = at::empty({s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, q.options());
  at::Tensor dv = at::empty({s.batch, s.seqlen_k, s.heads_kv, s.head_dim}, q.options());

  BwdParams params{};
  fill_attn_params(params, s, q, k, v, out, lse_rows, scale, causal, causal_top_left, device.num_sms);
  params.do_ptr = dout.data_ptr();
  params.do_batch_stride = dout.stride(0), params.do_row_stride = dout.stride(1), params.do_head_stride = dout.stride(2);
  params.dq_ptr = dq.data_ptr(), params.dk_ptr = dk.data_ptr(), params.dv_ptr = dv.data_ptr();
  params.dq_batch_stride = dq.stride(0), params.dq_row_stride = dq.stride(1), params.dq_head_stride = dq.stride(2);
  params.dk_batch_stride = dk.stride(0), params.dk_row_stride = dk.stride(1), params.dk_head_stride = dk.stride(2);
  params.dv_batch_stride = dv.stride(0), params.dv_row_stride = dv.stride(1), params.dv_head_stride = dv.stride(2);

  Kernel<BwdParams> const& kernel =
      choose_kernel(Op::kBwd, std::string(backend), device, kernel_dtype(q), int(s.head_dim), params);
  if (s.seqlen_q == 0 || s.seqlen_k == 0 || s.heads_q == 0 || s.batch == 0) {  // nothing flows anywhere
    dq.zero_(), dk.zero_(), dv.zero_();
    return {dq, dk, dv};
  }

  // float32 workspaces (common/params.h BwdParams), freed when this call returns (stream-ordered allocator).
  auto const f32 = q.options().dtype(at::kFloat);
  auto const accum_rows = [](int64_t rows) { return (rows + kBwdAccumRowAlign - 1) / kBwdAccumRowAlign * kBwdAccumRowAlign; };
  int64_t const kernel_head_dim = kernel.key.head_dim;
  at::Tensor dq_accum = at::empty({s.batch, s.heads_q, accum_rows(s.seqlen_q) * kernel_head_dim}, f32);
  at::Tensor dsoftmax_sum = at::empty({s.batch, s.heads_q, s.seqlen_q}, f32);
  params.dq_accum_ptr = dq_accum.data_ptr<float>();
  params.dsoftmax_sum_ptr = dsoftmax_sum.data_ptr<float>();
  bool const grouped = s.heads_q != s.heads_kv;
  at::Tensor dk_accum, dv_accum, dq_semaphore, dkv_semaphore;
  if (grouped) {
    dk_accum = at::zeros({s.batch, s.heads_kv, accum_rows(s.seqlen_k) * kernel_head_dim}, f32);
    dv_accum = at::zeros({s.batch, s.heads_kv, accum_rows(s.seqlen_k) * kernel_head_dim}, f32);
    params.dk_accum_ptr = dk_accum.data_ptr<float>();
    params.dv_accum_ptr = dv_accum.data_ptr<float>();
  }
  if (deterministic) {
    auto const blocks = [](int64_t rows) { return (rows + kBwdSemaphoreRows - 1) / kBwdSemaphoreRows; };
    auto const i32 = q.options().dtype(at::kInt);
    dq_semaphore = at::zeros({s.batch, s.heads_q, blocks(s.seqlen_q)}, i32);
    params.dq_semaphore = dq_semaphore.data_ptr<int>();
    if (grouped) {
      dkv_semaphore = at::zeros({s.batch, s.heads_kv, blocks(s.seqlen_k)}, i32);
      params.dkv_semaphore = dkv_semaphore.data_ptr<int>();
    }
  }
  kernel.launch(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dq, dk, dv};
}

std::vector<std::string> built_kernels() {
  std::vector<std::string> names;
  for (auto const& k : registered<FwdParams>()) { names.push_back(kernel_name(k.key)); }
  for (auto const& k : registered<BwdParams>()) { names.push_back(kernel_name(k.key)); }
  std::sort(names.begin(), names.end());
  return names;
}

// The schemas of the tensor ops are defined in Python (flashcute/_ops.py), so the ops exist before this library
// is loaded; it adds only its CUDA kernels, and this introspection op.
TORCH_LIBRARY_FRAGMENT(flashcute, m) { m.def("built_kernels() -> str[]", &built_kernels); }
TORCH_LIBRARY_IMPL(flashcute, CUDA, m) {
  m.impl("fwd", &fwd);
  m.impl("bwd", &bwd);
}

}  // namespace flashcute
