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
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/registry.h"
#include "common/seqlen.h"
#include "instantiations/kernel_table.h"
#include "sm80/decode_plan.h"

namespace flashcute {

namespace {

template <class Params>
std::vector<Kernel<Params>>& registered() {
  static std::vector<Kernel<Params>> kernels;  // filled by the instantiations' static initialisers
  return kernels;
}

char const* op_name(Op op) { return op == Op::kFwd ? "fwd" : op == Op::kBwd ? "bwd" : "decode"; }
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

// dims: the expected shape in words; its rank is 4 for fixed-length batches, 3 for packed (varlen) ones.
// The schema lets None through for a Tensor argument: it arrives undefined (the same message as the ops' Python
// kernel, flashcute/_ops.py _require_cuda, which serves the calls before the library is loaded).
void check_defined(char const* op, at::Tensor const& t, char const* name) {
  TORCH_CHECK_TYPE(t.defined(), "flashcute.", op, ": ", name, " must be a tensor, got NoneType");
}

void check_tensor(char const* op, at::Tensor const& t, char const* name, char const* dims, int rank = 4) {
  check_defined(op, t, name);
  TORCH_CHECK(t.is_cuda(), "flashcute.", op, ": ", name, " must be a CUDA tensor, got a tensor on ", t.device());
  TORCH_CHECK(t.dim() == rank, "flashcute.", op, ": ", name, " must have ", rank, " dimensions ", dims, ", got ",
              t.dim(), " (shape ", t.sizes(), ")");
  TORCH_CHECK(t.stride(rank - 1) == 1 || t.size(rank - 1) <= 1, "flashcute.", op, ": ", name,
              " must be contiguous in its last dimension (stride 1), got stride ", t.stride(rank - 1),
              "; call .contiguous() on it");
  // 128-bit loads: the base address and every stride that moves the address must be 16-byte multiples.
  bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  for (int i = 0; i < rank - 1; ++i) {
    aligned = aligned && (t.size(i) <= 1 || (t.stride(i) * t.element_size()) % 16 == 0);
  }
  TORCH_CHECK(aligned, "flashcute.", op, ": ", name, " must be 16-byte aligned (data pointer and the strides of "
              "all but its last dimension multiples of 8 elements), got strides ", t.strides(),
              " and storage offset ", t.storage_offset(), "; call .contiguous() on it");
}

struct DeviceInfo {
  int major, minor, num_sms, smem_per_sm;
  double dram_gbps;  // peak: memory clock x bus width x 2 (double data rate); 0 where the device does not say
};

// Queried once per device: six attribute queries on every call add to a decoding step's host time.
DeviceInfo device_info(int device) {
  static std::mutex mutex;
  static std::vector<std::optional<DeviceInfo>> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= int(known.size())) { known.resize(device + 1); }
  if (!known[device]) {
    DeviceInfo info{};
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.num_sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    int memory_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
      (void)cudaGetLastError();
      memory_khz = bus_bits = 0;
    }
    info.dram_gbps = 1e3 * memory_khz * bus_bits * 2 / 8 / 1e9;
    known[device] = info;
  }
  return *known[device];
}

// "auto": the SM90 kernel on Hopper when one is built for (dtype, head dim) and can run the inputs; otherwise
// the SM80 kernel, which runs on any sm_80+ GPU. "sm80" / "sm90": that kernel, or an error saying why not.
template <class Params>
Kernel<Params> const& choose_kernel(Op op, char const* name, std::string const& backend, DeviceInfo const& device,
                                    DType dtype, int head_dim, Params const& params) {
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
  TORCH_CHECK(kernel != nullptr, "flashcute.", name, ": no ", arch_name(arch), " kernel for ", dtype_name(dtype),
              " with head_dim ", head_dim, " is in this build (built kernels: ", built_kernel_list<Params>(),
              "); flashcute/kernel_table.py lists the shipped kernels, and FLASHCUTE_DTYPES / FLASHCUTE_HDIMS / "
              "FLASHCUTE_KERNELS / FLASHCUTE_CUDA_ARCHS restrict a build");
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

bool register_kernel(Kernel<DecodeParams> const& kernel) {
  registered<DecodeParams>().push_back(kernel);
  return true;
}

namespace {

struct QKVShape {
  int64_t batch, seqlen_q, heads_q, head_dim, seqlen_k, heads_kv;
};

// The checks every op shares on q, k, v, whose ranks check_tensor has checked: dtypes, devices, and the shape s
// read from them (batch and seqlens from the caller for packed batches). k_name / v_name: the arguments' names.
void check_qkv_agree(char const* op, at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                     QKVShape const& s, char const* k_name = "k", char const* v_name = "v") {
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), "flashcute.", op, ": q, ", k_name, " and ",
              v_name, " must be on one device, got ", q.device(), ", ", k.device(), " and ", v.device());
  auto const dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kHalf || dtype == at::kBFloat16, "flashcute.", op,
              ": q must have dtype float16 or bfloat16, got ", dtype_name(dtype));
  TORCH_CHECK(k.scalar_type() == dtype, "flashcute.", op, ": ", k_name, " must have the same dtype as q (",
              dtype_name(dtype), "), got ", dtype_name(k.scalar_type()));
  TORCH_CHECK(v.scalar_type() == dtype, "flashcute.", op, ": ", v_name, " must have the same dtype as q (",
              dtype_name(dtype), "), got ", dtype_name(v.scalar_type()));
  TORCH_CHECK(k.sizes() == v.sizes(), "flashcute.", op, ": ", k_name, " and ", v_name, " must have the same shape, got ",
              k_name, " ", k.sizes(), " and ", v_name, " ", v.sizes());
  TORCH_CHECK(k.size(-1) == s.head_dim, "flashcute.", op, ": ", k_name, " must have the head_dim of q (", s.head_dim,
              "), got ", k.size(-1));
  TORCH_CHECK(s.head_dim > 0 && s.head_dim % 8 == 0 && s.head_dim <= 256, "flashcute.", op,
              ": head_dim must be a multiple of 8 between 8 and 256, got ", s.head_dim);
  TORCH_CHECK(s.heads_kv > 0 && s.heads_q % s.heads_kv == 0, "flashcute.", op, ": heads_q (", s.heads_q,
              ") must be a multiple of heads_kv (", s.heads_kv, ") for multi/grouped-query attention");
  TORCH_CHECK(s.batch <= 65535 && s.heads_q <= 65535, "flashcute.", op,
              ": batch and heads_q must be at most 65535, got ", s.batch, " and ", s.heads_q);
  TORCH_CHECK(s.seqlen_q < (int64_t(1) << 31) && s.seqlen_k < (int64_t(1) << 31), "flashcute.", op,
              ": sequence lengths must be below 2^31");
}

// Fixed-length batches: q (batch, seqlen_q, heads_q, head_dim), k and v (batch, seqlen_k, heads_kv, head_dim).
QKVShape check_qkv(char const* op, at::Tensor const& q, at::Tensor const& k, at::Tensor const& v) {
  check_tensor(op, q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_tensor(op, k, "k", "(batch, seqlen_k, heads_kv, head_dim)");
  check_tensor(op, v, "v", "(batch, seqlen_k, heads_kv, head_dim)");
  QKVShape const s{q.size(0), q.size(1), q.size(2), q.size(3), k.size(1), k.size(2)};
  TORCH_CHECK(k.size(0) == s.batch, "flashcute.", op, ": k must have the batch size of q (", s.batch, "), got ",
              k.size(0));
  check_qkv_agree(op, q, k, v, s);
  return s;
}

// What varlen ops take besides q, k, v: where each sequence's rows are, and the bounds of their lengths.
struct Varlen {
  at::Tensor const& cu_seqlens_q;
  at::Tensor const& cu_seqlens_k;
  std::optional<at::Tensor> const& seqused_k;
  int64_t max_seqlen_q, max_seqlen_k;
};

void check_index_tensor(char const* op, at::Tensor const& t, char const* name, int64_t length, char const* shape,
                        at::Tensor const& q) {
  check_defined(op, t, name);
  TORCH_CHECK(t.is_cuda() && t.device() == q.device(), "flashcute.", op, ": ", name,
              " must be a CUDA tensor on q's device (", q.device(), "), got a tensor on ", t.device());
  TORCH_CHECK(t.scalar_type() == at::kInt, "flashcute.", op, ": ", name, " must have dtype int32, got ",
              dtype_name(t.scalar_type()));
  TORCH_CHECK(t.dim() == 1 && (length < 0 || t.size(0) == length), "flashcute.", op, ": ", name, " must have shape ",
              shape, ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), "flashcute.", op, ": ", name, " must be contiguous; call .contiguous() on it");
}

// Packed batches: q (total_q, heads_q, head_dim), k and v (total_k, heads_kv, head_dim); cu_seqlens_q/k int32
// (batch + 1); seqused_k int32 (batch). What needs the values of cu_seqlens (their order, their last entry, the
// lengths against max_seqlen) is not checked, which would need a host synchronisation: common/seqlen.h clamps
// instead, so that no kernel reads or writes outside the tensors.
QKVShape check_qkv_varlen(char const* op, at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                          Varlen const& varlen) {
  check_tensor(op, q, "q", "(total_q, heads_q, head_dim)", 3);
  check_tensor(op, k, "k", "(total_k, heads_kv, head_dim)", 3);
  check_tensor(op, v, "v", "(total_k, heads_kv, head_dim)", 3);
  check_index_tensor(op, varlen.cu_seqlens_q, "cu_seqlens_q", -1, "(batch + 1,)", q);
  int64_t const batch = varlen.cu_seqlens_q.size(0) - 1;
  TORCH_CHECK(batch >= 0, "flashcute.", op, ": cu_seqlens_q must have batch + 1 >= 1 entries, got none");
  check_index_tensor(op, varlen.cu_seqlens_k, "cu_seqlens_k", batch + 1,
                     "(batch + 1,), the length of cu_seqlens_q", q);
  if (varlen.seqused_k) { check_index_tensor(op, *varlen.seqused_k, "seqused_k", batch, "(batch,)", q); }
  TORCH_CHECK(varlen.max_seqlen_q >= 0 && varlen.max_seqlen_k >= 0, "flashcute.", op,
              ": max_seqlen_q and max_seqlen_k must be >= 0, got ", varlen.max_seqlen_q, " and ", varlen.max_seqlen_k);
  TORCH_CHECK(q.size(0) < (int64_t(1) << 31) && k.size(0) < (int64_t(1) << 31), "flashcute.", op,
              ": total_q and total_k must be below 2^31");
  QKVShape const s{batch, varlen.max_seqlen_q, q.size(1), q.size(2), varlen.max_seqlen_k, k.size(1)};
  check_qkv_agree(op, q, k, v, s);
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

// (batch, row, head) strides of a (batch, seqlen, heads, head_dim) tensor, or of a packed (total, heads, head_dim)
// one (no batch stride: common/seqlen.h finds a sequence's rows from cu_seqlens).
void set_strides(at::Tensor const& t, int64_t& batch_stride, int64_t& row_stride, int64_t& head_stride) {
  bool const packed = t.dim() == 3;
  batch_stride = packed ? 0 : t.stride(0);
  row_stride = t.stride(packed ? 0 : 1);
  head_stride = t.stride(packed ? 1 : 2);
}

// The params every op fills alike: q, k, v, the output o (fwd: written; bwd: read), the LSE, shapes and mask.
void fill_attn_params(AttnParams& params, QKVShape const& s, at::Tensor const& q, at::Tensor const& k,
                      at::Tensor const& v, at::Tensor const& out, at::Tensor const& lse, double scale, bool causal,
                      bool causal_top_left, int num_sms) {
  params.q_ptr = q.data_ptr();
  params.k_ptr = k.data_ptr();
  params.v_ptr = v.data_ptr();
  params.o_ptr = out.data_ptr();
  params.lse_ptr = lse.data_ptr<float>();
  set_strides(q, params.q_batch_stride, params.q_row_stride, params.q_head_stride);
  set_strides(k, params.k_batch_stride, params.k_row_stride, params.k_head_stride);
  set_strides(v, params.v_batch_stride, params.v_row_stride, params.v_head_stride);
  set_strides(out, params.o_batch_stride, params.o_row_stride, params.o_head_stride);
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

void fill_varlen_params(AttnParams& params, Varlen const& varlen, at::Tensor const& q, at::Tensor const& k) {
  params.cu_seqlens_q = varlen.cu_seqlens_q.data_ptr<int>();
  params.cu_seqlens_k = varlen.cu_seqlens_k.data_ptr<int>();
  params.seqused_k = varlen.seqused_k ? varlen.seqused_k->data_ptr<int>() : nullptr;
  params.total_q = int(q.size(0));
  params.total_k = int(k.size(0));
}

DType kernel_dtype(at::Tensor const& q) { return q.scalar_type() == at::kBFloat16 ? DType::kBFloat16 : DType::kFloat16; }

}  // namespace

namespace {

// The forward of fwd and fwd_varlen, after their checks: out and lse allocated in q's layout (varlen: packed),
// the params filled, the kernel chosen and launched.
std::tuple<at::Tensor, at::Tensor> run_fwd(char const* op, QKVShape const& s, at::Tensor const& q, at::Tensor const& k,
                                           at::Tensor const& v, double scale, bool causal, bool causal_top_left,
                                           std::string const& backend, Varlen const* varlen) {
  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const device = device_info(q.get_device());

  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = varlen ? at::empty({s.heads_q, q.size(0)}, q.options().dtype(at::kFloat))
                          : at::empty({s.batch, s.heads_q, s.seqlen_q}, q.options().dtype(at::kFloat));

  FwdParams params{};
  fill_attn_params(params, s, q, k, v, out, lse, scale, causal, causal_top_left, device.num_sms);
  if (varlen) { fill_varlen_params(params, *varlen, q, k); }

  // Chosen (and its errors raised) before the early returns, so a bad backend fails on every shape.
  Kernel<FwdParams> const& kernel = choose_kernel(Op::kFwd, op, backend, device, kernel_dtype(q), int(s.head_dim), params);
  if (out.numel() == 0) { return {out, lse}; }
  bool const no_packed_keys = varlen && k.size(0) == 0;
  if (s.seqlen_k == 0 || s.seqlen_q == 0 || s.batch == 0 || no_packed_keys) {  // no keys, or no rows: all empty
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }
  at::Tensor varlen_schedule;  // the SM90 kernel's order of the sequences (FwdParams::varlen_schedule)
  if (varlen && kernel.key.arch == Arch::kSm90) {
    varlen_schedule = at::empty({2 * s.batch + 1}, q.options().dtype(at::kInt));
    params.varlen_schedule = varlen_schedule.data_ptr<int>();
  }
  kernel.launch(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, lse};
}

// The backward of bwd and bwd_varlen, after their checks on q, k, v: checks dout, out and lse against q, then
// allocates the gradients and float32 workspaces (sized per common/seqlen.h SeqInfo) and launches.
std::tuple<at::Tensor, at::Tensor, at::Tensor> run_bwd(char const* op, QKVShape const& s, at::Tensor const& dout,
                                                       at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                                       at::Tensor const& out, at::Tensor const& lse, double scale,
                                                       bool causal, bool causal_top_left, bool deterministic,
                                                       std::string const& backend, Varlen const* varlen) {
  int const rank = varlen ? 3 : 4;
  char const* const q_dims = varlen ? "(total_q, heads_q, head_dim), like q" : "(batch, seqlen_q, heads_q, head_dim), like q";
  check_tensor(op, dout, "dout", q_dims, rank);
  check_tensor(op, out, "out", q_dims, rank);
  for (auto const& [t, name] : {std::pair{&dout, "dout"}, std::pair{&out, "out"}}) {
    TORCH_CHECK(t->device() == q.device(), "flashcute.", op, ": ", name, " must be on q's device (", q.device(),
                "), got ", t->device());
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "flashcute.", op, ": ", name, " must have q's dtype (",
                dtype_name(q.scalar_type()), "), got ", dtype_name(t->scalar_type()));
    TORCH_CHECK(t->sizes() == q.sizes(), "flashcute.", op, ": ", name, " must have q's shape ", q.sizes(), ", got ",
                t->sizes());
  }
  TORCH_CHECK(lse.is_cuda() && lse.device() == q.device(), "flashcute.", op, ": lse must be on q's device (",
              q.device(), "), got ", lse.device());
  TORCH_CHECK(lse.scalar_type() == at::kFloat, "flashcute.", op,
              ": lse must have dtype float32 (as the forward returns it), got ", dtype_name(lse.scalar_type()));
  std::vector<int64_t> const lse_shape = varlen ? std::vector<int64_t>{s.heads_q, q.size(0)}
                                                : std::vector<int64_t>{s.batch, s.heads_q, s.seqlen_q};
  TORCH_CHECK(lse.sizes() == at::IntArrayRef(lse_shape), "flashcute.", op, ": lse must have shape ",
              varlen ? "(heads_q, total_q) = " : "(batch, heads_q, seqlen_q) = ", at::IntArrayRef(lse_shape),
              ", got ", lse.sizes());
  at::Tensor const lse_rows = lse.contiguous();  // the kernels read it as contiguous rows

  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const device = device_info(q.get_device());

  // Keys that no sequence uses (seqused_k) get no gradient from the kernels: zeros.
  bool const unused_keys = varlen && varlen->seqused_k;
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = unused_keys ? at::zeros(k.sizes(), k.options()) : at::empty(k.sizes(), k.options());
  at::Tensor dv = unused_keys ? at::zeros(v.sizes(), v.options()) : at::empty(v.sizes(), v.options());

  BwdParams params{};
  fill_attn_params(params, s, q, k, v, out, lse_rows, scale, causal, causal_top_left, device.num_sms);
  if (varlen) { fill_varlen_params(params, *varlen, q, k); }
  params.do_ptr = dout.data_ptr();
  set_strides(dout, params.do_batch_stride, params.do_row_stride, params.do_head_stride);
  params.dq_ptr = dq.data_ptr(), params.dk_ptr = dk.data_ptr(), params.dv_ptr = dv.data_ptr();
  set_strides(dq, params.dq_batch_stride, params.dq_row_stride, params.dq_head_stride);
  set_strides(dk, params.dk_batch_stride, params.dk_row_stride, params.dk_head_stride);
  set_strides(dv, params.dv_batch_stride, params.dv_row_stride, params.dv_head_stride);

  Kernel<BwdParams> const& kernel = choose_kernel(Op::kBwd, op, backend, device, kernel_dtype(q), int(s.head_dim), params);
  bool const no_packed_rows = varlen && (q.size(0) == 0 || k.size(0) == 0);
  if (s.seqlen_q == 0 || s.seqlen_k == 0 || s.heads_q == 0 || s.batch == 0 || no_packed_rows) {  // nothing flows
    dq.zero_(), dk.zero_(), dv.zero_();
    return {dq, dk, dv};
  }

  // float32 workspaces (common/params.h BwdParams), freed when this call returns (stream-ordered allocator). Rows
  // per head, as common/seqlen.h SeqInfo places the sequences in them.
  auto const accum_rows = [&](int64_t seqlen, int64_t total) {
    return varlen ? SeqInfo::accum_rows_varlen(total, int(s.batch)) : SeqInfo::round_up_accum_rows(seqlen);
  };
  auto const semaphores = [&](int64_t seqlen, int64_t total) {
    return varlen ? SeqInfo::semaphores_varlen(total, int(s.batch)) : SeqInfo::semaphores_for(seqlen);
  };
  int64_t const sequences = varlen ? 1 : s.batch;  // fixed length: (batch, heads, rows); varlen: (heads, rows)
  auto const f32 = q.options().dtype(at::kFloat);
  int64_t const kernel_head_dim = kernel.key.head_dim;
  int64_t const q_accum_rows = accum_rows(s.seqlen_q, q.size(0));
  at::Tensor dq_accum = at::empty({sequences, s.heads_q, q_accum_rows * kernel_head_dim}, f32);
  at::Tensor dsoftmax_sum = at::empty({sequences, s.heads_q, q_accum_rows}, f32);
  params.dq_accum_ptr = dq_accum.data_ptr<float>();
  params.dsoftmax_sum_ptr = dsoftmax_sum.data_ptr<float>();
  at::Tensor lse_log2;  // the SM90 kernel's copy of the LSE in its row blocks
  at::Tensor block_tables;  // the SM90 grids over a packed batch (BwdParams kv_block_table, q_block_table, ...)
  bool const sm90 = kernel.key.arch == Arch::kSm90;
  if (sm90) {
    lse_log2 = at::empty({sequences, s.heads_q, q_accum_rows}, f32);
    params.lse_log2_ptr = lse_log2.data_ptr<float>();
    if (varlen) {
      int64_t const kv_table_ints = 2 * varlen_block_table_entries(k.size(0), s.batch);
      int64_t const q_table_ints = 2 * varlen_block_table_entries(q.size(0), s.batch);
      block_tables = at::empty({kv_table_ints + q_table_ints + 2 * (s.batch + 1)}, q.options().dtype(at::kInt));
      int* const ints = block_tables.data_ptr<int>();  // the tables first, so 8-byte aligned
      params.kv_block_table = ints;
      params.q_block_table = ints + kv_table_ints;
      params.first_kv_block = ints + kv_table_ints + q_table_ints;
      params.first_q_block = params.first_kv_block + s.batch + 1;
    }
  }
  bool const grouped = s.heads_q != s.heads_kv;
  at::Tensor dk_accum, dv_accum, dq_semaphore, dkv_semaphore;
  if (grouped) {
    int64_t const rows = accum_rows(s.seqlen_k, k.size(0)) * kernel_head_dim;
    dk_accum = at::zeros({sequences, s.heads_kv, rows}, f32);
    dv_accum = at::zeros({sequences, s.heads_kv, rows}, f32);
    params.dk_accum_ptr = dk_accum.data_ptr<float>();
    params.dv_accum_ptr = dv_accum.data_ptr<float>();
  }
  auto const i32 = q.options().dtype(at::kInt);
  at::Tensor dq_counters;  // SM90, not deterministic: dq_done, and dq_claims for short queries
  if (sm90 && !deterministic) {
    // Zeroed whole, in one fill, not by the preprocess per block: the kernel may start, and the dQ postprocess
    // read them, before the preprocess ends (programmatic launches), and a Q block the preprocess skips
    // (cu_seqlens beyond the grid) must not leave a claim counter no K/V block can win.
    bool const claims = s.seqlen_q <= kBwdDqClaimsMaxSeqlenQ;
    dq_counters = at::zeros({claims ? 2 : 1, sequences, s.heads_q, semaphores(s.seqlen_q, q.size(0))}, i32);
    params.dq_done = dq_counters[0].data_ptr<int>();
    if (claims) { params.dq_claims = dq_counters[1].data_ptr<int>(); }
  }
  if (deterministic) {
    dq_semaphore = at::zeros({sequences, s.heads_q, semaphores(s.seqlen_q, q.size(0))}, i32);
    params.dq_semaphore = dq_semaphore.data_ptr<int>();
    if (sm90) { params.dq_done = params.dq_semaphore; }  // the turnstile counts completed additions
    if (grouped) {
      dkv_semaphore = at::zeros({sequences, s.heads_kv, semaphores(s.seqlen_k, k.size(0))}, i32);
      params.dkv_semaphore = dkv_semaphore.data_ptr<int>();
    }
  }
  kernel.launch(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dq, dk, dv};
}

// fwd_kvcache's own inputs: the cache's layout and what to append to it.
struct KVCache {
  std::optional<at::Tensor> const& k_new;
  std::optional<at::Tensor> const& v_new;
  std::optional<at::Tensor> const& cache_seqlens;
  std::optional<at::Tensor> const& block_table;
  std::optional<at::Tensor> const& cache_leftpad;
  int64_t num_splits;  // 0: the kernel's plan
};

// The decode kernel (split-KV, sm80/decode_kernel.h), after the callers' checks: fixed-length q, k, v (or a paged
// cache), out and lse allocated like run_fwd's, the split workspaces sized by the kernel's plan.
std::tuple<at::Tensor, at::Tensor> run_decode(char const* op, QKVShape const& s, at::Tensor const& q,
                                              at::Tensor const& k, at::Tensor const& v, double scale, bool causal,
                                              bool causal_top_left, std::string const& backend, KVCache const* cache) {
  c10::cuda::CUDAGuard device_guard(q.device());
  DeviceInfo const device = device_info(q.get_device());
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = at::empty({s.batch, s.heads_q, s.seqlen_q}, q.options().dtype(at::kFloat));

  DecodeParams params{};
  fill_attn_params(params, s, q, k, v, out, lse, scale, causal, causal_top_left, device.num_sms);
  // The query heads of a K/V head (1 also where there are none: an append without queries).
  params.pack_group = int(std::max<int64_t>(s.heads_q / s.heads_kv, 1));
  params.smem_per_sm = device.smem_per_sm;
  params.arch = device.major * 10 + device.minor;
  params.fast_memory = sm80::decode_fast_memory(device.dram_gbps, device.num_sms);

  if (cache != nullptr) {
    if (cache->block_table) {
      params.block_table = cache->block_table->data_ptr<int>();
      params.block_table_batch_stride = cache->block_table->stride(0);
      params.page_size = int(k.size(1));
      params.num_pages = int(k.size(0));
    }
    if (cache->cache_seqlens) { params.seqused_k = cache->cache_seqlens->data_ptr<int>(); }
    if (cache->cache_leftpad) { params.cache_leftpad = cache->cache_leftpad->data_ptr<int>(); }
    if (cache->k_new && cache->k_new->size(1) > 0) {
      at::Tensor const& k_new = *cache->k_new;
      at::Tensor const& v_new = *cache->v_new;
      params.k_new_ptr = k_new.data_ptr(), params.v_new_ptr = v_new.data_ptr();
      set_strides(k_new, params.k_new_batch_stride, params.k_new_row_stride, params.k_new_head_stride);
      set_strides(v_new, params.v_new_batch_stride, params.v_new_row_stride, params.v_new_head_stride);
      params.seqlen_new = int(k_new.size(1));
      params.cache_seqlens = cache->cache_seqlens->data_ptr<int>();
      params.seqused_k_appended = params.seqlen_new;  // the attention sees the appended keys
    }
    params.num_splits = int(cache->num_splits);
  }

  Kernel<DecodeParams> const& kernel =
      choose_kernel(Op::kDecode, op, backend, device, kernel_dtype(q), int(s.head_dim), params);
  bool const appending = params.k_new_ptr != nullptr;
  if (s.batch == 0 || (out.numel() == 0 && !appending)) { return {out, lse}; }
  if (s.seqlen_k == 0) {  // no key in any sequence, and no room to append one
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out, lse};
  }
  if (kernel.plan != nullptr) { kernel.plan(params); }
  at::Tensor lse_accum, o_accum;  // the shares' partial results; one split writes out and lse itself
  if (params.num_splits > 1) {
    auto const f32 = q.options().dtype(at::kFloat);
    lse_accum = at::empty({params.partial_slots, params.unit_rows}, f32);
    o_accum = at::empty({params.partial_slots, params.unit_rows, kernel.key.head_dim}, f32);
    params.lse_accum_ptr = lse_accum.data_ptr<float>();
    params.o_accum_ptr = o_accum.data_ptr<float>();
  }
  kernel.launch(params, c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, lse};
}

}  // namespace

// `deterministic` is for the backward (fwd's autograd formula hands it to bwd); the forward is deterministic.
std::tuple<at::Tensor, at::Tensor> fwd(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                       std::optional<double> softmax_scale, bool causal, bool causal_top_left,
                                       c10::string_view backend, bool /*deterministic*/) {
  QKVShape const s = check_qkv("fwd", q, k, v);
  double const scale = check_softmax_scale("fwd", softmax_scale, s.head_dim);
  std::string const backend_name(backend);
  if (s.seqlen_q <= kDecodeMaxSeqlenQ && (backend_name == "auto" || backend_name == "sm80") &&
      find_kernel<DecodeParams>(Op::kDecode, Arch::kSm80, kernel_dtype(q), int(s.head_dim)) != nullptr) {
    return run_decode("fwd", s, q, k, v, scale, causal, causal_top_left, backend_name, nullptr);
  }
  return run_fwd("fwd", s, q, k, v, scale, causal, causal_top_left, backend_name, nullptr);
}

// Decoding against a KV cache: q (batch, seqlen_q, heads_q, head_dim); k_cache, v_cache (batch, capacity, heads_kv,
// head_dim), or with block_table (batch, max_blocks) int32 paged (num_pages, page_size, heads_kv, head_dim);
// cache_seqlens int32 (batch): the keys in each cache (none: full). k, v (batch, seqlen_new, heads_kv, head_dim): new
// keys written into the caches at cache_seqlens (in place, where they fit) and attended to. cache_leftpad int32
// (batch), contiguous caches only: each sequence's keys start at that row (left padding before it). Causal aligns
// each sequence's diagonal bottom-right. The values of cache_seqlens, cache_leftpad and block_table are not checked
// (a host synchronisation): the kernels clamp them to the caches.
std::tuple<at::Tensor, at::Tensor> fwd_kvcache(at::Tensor const& q, at::Tensor const& k_cache, at::Tensor const& v_cache,
                                               std::optional<at::Tensor> const& k, std::optional<at::Tensor> const& v,
                                               std::optional<at::Tensor> const& cache_seqlens,
                                               std::optional<at::Tensor> const& block_table,
                                               std::optional<double> softmax_scale, bool causal, int64_t num_splits,
                                               c10::string_view backend,
                                               std::optional<at::Tensor> const& cache_leftpad) {
  char const* const op = "fwd_kvcache";
  bool const paged = block_table.has_value();
  char const* const cache_dims = paged ? "(num_pages, page_size, heads_kv, head_dim), paged by block_table"
                                       : "(batch, capacity, heads_kv, head_dim)";
  check_tensor(op, q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_tensor(op, k_cache, "k_cache", cache_dims);
  check_tensor(op, v_cache, "v_cache", cache_dims);
  int64_t const batch = q.size(0);
  int64_t capacity = k_cache.size(1);
  if (paged) {
    at::Tensor const& table = *block_table;
    TORCH_CHECK(table.is_cuda() && table.device() == q.device(), "flashcute.", op,
                ": block_table must be a CUDA tensor on q's device (", q.device(), "), got a tensor on ", table.device());
    TORCH_CHECK(table.scalar_type() == at::kInt, "flashcute.", op, ": block_table must have dtype int32, got ",
                dtype_name(table.scalar_type()));
    TORCH_CHECK(table.dim() == 2 && table.size(0) == batch, "flashcute.", op,
                ": block_table must have shape (batch, max_blocks) with batch = ", batch, " (q's), got ", table.sizes());
    TORCH_CHECK(table.stride(1) == 1 || table.size(1) <= 1, "flashcute.", op,
                ": block_table must be contiguous in its last dimension; call .contiguous() on it");
    TORCH_CHECK(k_cache.size(0) > 0 && k_cache.size(1) > 0, "flashcute.", op,
                ": a paged k_cache needs at least one page of at least one row, got shape ", k_cache.sizes());
    capacity = table.size(1) * k_cache.size(1);
  } else {
    TORCH_CHECK(k_cache.size(0) == batch, "flashcute.", op, ": k_cache must have the batch size of q (", batch,
                "), got ", k_cache.size(0), "; a paged cache needs block_table");
  }
  QKVShape const s{batch, q.size(1), q.size(2), q.size(3), capacity, k_cache.size(2)};
  check_qkv_agree(op, q, k_cache, v_cache, s, "k_cache", "v_cache");
  if (cache_seqlens) { check_index_tensor(op, *cache_seqlens, "cache_seqlens", batch, "(batch,)", q); }
  if (cache_leftpad) {
    TORCH_CHECK(!paged, "flashcute.", op, ": cache_leftpad needs contiguous caches; it cannot be combined with "
                "block_table (a paged cache's sequences start on a page of their own)");
    check_index_tensor(op, *cache_leftpad, "cache_leftpad", batch, "(batch,)", q);
  }
  TORCH_CHECK(k.has_value() == v.has_value(), "flashcute.", op, ": k and v (the new keys and values) must be given "
              "together, got ", k ? "k without v" : "v without k");
  if (k) {
    TORCH_CHECK(cache_seqlens.has_value(), "flashcute.", op, ": appending k and v needs cache_seqlens (where each "
                "sequence's new keys go)");
    check_tensor(op, *k, "k", "(batch, seqlen_new, heads_kv, head_dim)");
    check_tensor(op, *v, "v", "(batch, seqlen_new, heads_kv, head_dim)");
    check_qkv_agree(op, q, *k, *v, s);
    TORCH_CHECK(k->size(0) == batch && k->size(2) == s.heads_kv, "flashcute.", op,
                ": k must have shape (batch, seqlen_new, heads_kv, head_dim) with batch = ", batch, " and heads_kv = ",
                s.heads_kv, " (k_cache's), got ", k->sizes());
  }
  TORCH_CHECK(num_splits >= 0 && num_splits <= 256, "flashcute.", op,
              ": num_splits must be 0 (chosen from the SM count) or between 1 and 256, got ", num_splits);
  std::string const backend_name(backend);
  TORCH_CHECK(backend_name != "sm90", "flashcute.", op, ": backend 'sm90' has no KV-cache decode kernel; use 'auto' "
              "or 'sm80' (the SM80 decode kernel runs on Hopper too)");
  double const scale = check_softmax_scale(op, softmax_scale, s.head_dim);
  KVCache const cache{k, v, cache_seqlens, block_table, cache_leftpad, num_splits};
  return run_decode(op, s, q, k_cache, v_cache, scale, causal, false, backend_name, &cache);
}

// Packed sequences: out (total_q, heads_q, head_dim), lse (heads_q, total_q); causal aligns each sequence's
// diagonal bottom-right.
std::tuple<at::Tensor, at::Tensor> fwd_varlen(at::Tensor const& q, at::Tensor const& k, at::Tensor const& v,
                                              at::Tensor const& cu_seqlens_q, at::Tensor const& cu_seqlens_k,
                                              int64_t max_seqlen_q, int64_t max_seqlen_k,
                                              std::optional<double> softmax_scale, bool causal,
                                              std::optional<at::Tensor> const& seqused_k, c10::string_view backend,
                                              bool /*deterministic*/) {
  Varlen const varlen{cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k};
  QKVShape const s = check_qkv_varlen("fwd_varlen", q, k, v, varlen);
  double const scale = check_softmax_scale("fwd_varlen", softmax_scale, s.head_dim);
  return run_fwd("fwd_varlen", s, q, k, v, scale, causal, false, std::string(backend), &varlen);
}

// dout and out: like q; lse: (batch, heads_q, seqlen_q) float32, as fwd returned them. Returns (dq, dk, dv),
// contiguous, in q's dtype.
std::tuple<at::Tensor, at::Tensor, at::Tensor> bwd(at::Tensor const& dout, at::Tensor const& q, at::Tensor const& k,
                                                   at::Tensor const& v, at::Tensor const& out, at::Tensor const& lse,
                                                   std::optional<double> softmax_scale, bool causal,
                                                   bool causal_top_left, bool deterministic, c10::string_view backend) {
  QKVShape const s = check_qkv("bwd", q, k, v);
  double const scale = check_softmax_scale("bwd", softmax_scale, s.head_dim);
  return run_bwd("bwd", s, dout, q, k, v, out, lse, scale, causal, causal_top_left, deterministic,
                 std::string(backend), nullptr);
}

// dout and out: like q; lse: (heads_q, total_q) float32, as fwd_varlen returned them.
std::tuple<at::Tensor, at::Tensor, at::Tensor> bwd_varlen(
    at::Tensor const& dout, at::Tensor const& q, at::Tensor const& k, at::Tensor const& v, at::Tensor const& out,
    at::Tensor const& lse, at::Tensor const& cu_seqlens_q, at::Tensor const& cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, std::optional<double> softmax_scale, bool causal, std::optional<at::Tensor> const& seqused_k,
    bool deterministic, c10::string_view backend) {
  Varlen const varlen{cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k};
  QKVShape const s = check_qkv_varlen("bwd_varlen", q, k, v, varlen);
  double const scale = check_softmax_scale("bwd_varlen", softmax_scale, s.head_dim);
  return run_bwd("bwd_varlen", s, dout, q, k, v, out, lse, scale, causal, false, deterministic, std::string(backend),
                 &varlen);
}

std::vector<std::string> built_kernels() {
  std::vector<std::string> names;
  for (auto const& k : registered<FwdParams>()) { names.push_back(kernel_name(k.key)); }
  for (auto const& k : registered<BwdParams>()) { names.push_back(kernel_name(k.key)); }
  for (auto const& k : registered<DecodeParams>()) { names.push_back(kernel_name(k.key)); }
  std::sort(names.begin(), names.end());
  return names;
}

// The schemas of the tensor ops are defined in Python (flashcute/_ops.py), so the ops exist before this library
// is loaded; it adds only its CUDA kernels, and this introspection op.
TORCH_LIBRARY_FRAGMENT(flashcute, m) { m.def("built_kernels() -> str[]", &built_kernels); }
TORCH_LIBRARY_IMPL(flashcute, CUDA, m) {
  m.impl("fwd", &fwd);
  m.impl("bwd", &bwd);
  m.impl("fwd_varlen", &fwd_varlen);
  m.impl("bwd_varlen", &bwd_varlen);
  m.impl("fwd_kvcache", &fwd_kvcache);
}

}  // namespace flashcute
