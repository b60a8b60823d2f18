// Matrix-vector and matrix-matrix products on the GPU: y[t, :] = W · x[t, :] with W [rows, cols] in
// F32/BF16/Q8_0/Q4_0, x and y f32. Small T runs shaders/matvec.comp (W streamed once per few
// tokens), large T (prefill) the tiled shaders/matmul.comp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "gpu/tuning.h"
#include "model/matrix.h"

namespace infer::gpu {

class VulkanContext;
struct DeviceInfo;

// The device layout of weight rows (shaders/common/weights.glsl says it in full): each row a whole
// number of 16-byte vectors so that shaders read weights with 128-bit loads. F32 rows pad to 4
// columns; BF16 rows interleave groups of 64 columns; Q8_0/Q4_0 rows hold groups of 8 GGML blocks
// (256 columns) as 16-byte-aligned quants, interleaved, then one vector of 8 f16 scales a group.
// Padding columns have zero weights. The CPU keeps model/matrix.h's bytes; only the device copy
// is repacked.
size_t device_row_bytes(WeightFormat f, int64_t cols);
// The 16-byte weight vectors of a device row, scale vectors not counted (weights.glsl's w_vecs()).
int64_t device_row_vectors(WeightFormat f, int64_t cols);
// Writes rows [r0, r0 + n) of m in the device layout to dst (n * device_row_bytes bytes).
void repack_rows(const Matrix& m, int64_t r0, int64_t n, uint8_t* dst);
// out: [cols] f32 <- one row in the device layout (what the shaders decode; tests).
void dequantize_device_row(WeightFormat f, int64_t cols, const uint8_t* row, float* out);
// Repacks m's rows in bounded chunks and uploads them to dst at `offset`
// (m.rows * device_row_bytes bytes); with a pool, its threads repack (and copy) side by side.
Result<void> upload_rows(const VulkanContext& ctx, const Matrix& m, Buffer& dst,
                         VkDeviceSize offset, ThreadPool* pool = nullptr);

// A weight matrix in a device buffer, rows in the device layout.
struct GpuMatrix {
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  Buffer buffer;
};

Result<GpuMatrix> upload_matrix(const VulkanContext& ctx, const Matrix& m, std::string name,
                                ThreadPool* pool = nullptr);

// Whether Q8_0/Q4_0 products at small T quantize activations to int8 blocks of 32 and use integer
// dot products (shaders/matvec_dot.comp), x quantized once a product by a dispatch before it
// (coop_x_prep_int8) or by the add_norm before it. The forward decides per model (gpu/tuning.h's
// int_dot); kOn fails on a device without shaderIntegerDotProduct.
enum class IntDot { kOff, kOn };

// Workgroup shapes; zeros are taken from the context's GpuTuning (gpu/tuning.h) where it has the
// knob, else chosen from the device and format (matvec_shape.cpp, matmul_tuning.cpp say how).
struct MatvecTuning {
  uint32_t subgroups_per_group = 0;  // workgroup = subgroup size * this
  uint32_t rows_per_subgroup = 0;    // rows a subgroup (or `split` subgroups together) sums
  uint32_t tokens_per_group = 0;     // for T > 1; T = 1 uses a one-token pipeline
  // The tiled kernel runs for T >= matmul_min_tokens when T fills a token tile or its grid has >=
  // matmul_min_groups workgroups (few long rows, e.g. a down projection, would leave most of a big
  // GPU idle); 1 and 1: always (tests use it).
  uint32_t matmul_min_tokens = 0;
  uint32_t matmul_min_groups = 0;
  uint32_t tile_rows = 0;  // outputs per workgroup: tile_rows x tile_tokens
  uint32_t tile_tokens = 0;
  uint32_t thread_rows = 0;  // outputs per invocation: thread_rows x thread_tokens (multiples of 4)
  uint32_t thread_tokens = 0;
  uint32_t tile_stages = 0;  // shared-memory tile buffers, 1 or 2 (shaders/matvec.h)
  // Products whose grid of tile_rows x tile_tokens tiles has fewer workgroups than this take a
  // tile of a quarter the outputs at the same invocations (MatvecKernels::tiled_small), so that a
  // few thousand rows still spread over a big GPU; 1: always the big tile.
  uint32_t tile_min_groups = 0;
  IntDot int_dot = IntDot::kOff;
  // The cooperative-matrix kernel's tile (rows x tokens outputs) and a subgroup's share of it
  // (multiples of 16); zeros from GpuTuning's coopmat_tile and coopmat_sg (coopmat_gu_* for
  // gate-up).
  uint32_t coop_rows = 0;
  uint32_t coop_tokens = 0;
  uint32_t coop_sg_rows = 0;
  uint32_t coop_sg_tokens = 0;
  // matvec_dot.comp's workgroup and rows a subgroup; zeros: 4 and rows_per_subgroup.
  uint32_t dot_subgroups_per_group = 0;
  uint32_t dot_rows_per_subgroup = 0;
  // matvec.comp's rounds: each lane loads vec_unroll 16-byte vectors of each of its rows before
  // using any. A row of more than split_rounds rounds is split over up to max_split subgroups of
  // the workgroup (a divisor of subgroups_per_group; 1: never), each summing a part of its
  // columns, combined through shared memory (matvec_split() picks the split per product).
  // A matrix of few rows also splits (while parts still get a chunk of vectors each) until its
  // grid has split_min_groups workgroups.
  uint32_t vec_unroll = 0;
  uint32_t max_split = 0;
  uint32_t split_rounds = 0;
  uint32_t split_min_groups = 0;
  // One-token products on unsplit rows: while the grid has fewer than this many subgroups, a
  // subgroup sums half as many rows (down to 1; MatvecKernels::one_token_variants), so that a
  // matrix of few rows still puts enough subgroups on every core. 0: never (resolved from the
  // device's compute cores, matvec_shape.cpp).
  uint32_t min_grid_subgroups = 0;
};

// A workgroup that sums with common/reduce.glsl: subgroup size × subgroups_per_group invocations,
// with the subgroup size pinned where the device allows, so the shader's MAX_SUBGROUPS (shared
// memory for the partial sums) bounds gl_NumSubgroups.
struct ReduceShape {
  uint32_t local_size = 0;
  uint32_t max_subgroups = 0;
  uint32_t required_subgroup_size = 0;  // PipelineDesc::required_subgroup_size
};
ReduceShape reduce_shape(const DeviceInfo& info, uint32_t subgroups_per_group);
// Subgroups a reducing workgroup gets by default: ~128 invocations, within the device limit.
uint32_t default_subgroups_per_group(const DeviceInfo& info);

// The pipelines of one product family, plain (y = W·x) or gate-up (y = gelu(G·x) ⊙ (U·x)):
// matrix-vector for T = 1, a few tokens per workgroup for small T, tiled for T >= the threshold.
// MatvecOp and GateUpOp (gpu/ops/mlp.h) each hold one.
struct MatvecKernels {
  WeightFormat format = WeightFormat::kF32;
  bool gate_up = false;
  uint32_t max_workgroups_x = 0;
  uint32_t subgroup_size = 0;  // the device's, as matvec_split() counts a round
  MatvecTuning tuning;  // as resolved for the device
  std::unique_ptr<Pipeline> one_token;
  // Unsplit kernels (tuning.max_split 1): one_token in other shapes, chosen per product
  // (matvec_one_token_shape): fewer rows a subgroup (rows_per_subgroup halved down to 1, where
  // tuning.min_grid_subgroups is set) and one vector a round where vec_unroll > 1 (for rows
  // whose chunks it does not divide).
  struct OneTokenVariant {
    uint32_t rows_per_subgroup = 0;
    uint32_t vec_unroll = 0;
    std::unique_ptr<Pipeline> pipeline;
  };
  std::vector<OneTokenVariant> one_token_variants;
  std::unique_ptr<Pipeline> many_tokens;
  std::unique_ptr<Pipeline> tiled;
  // The quarter tile (MatvecTuning::tile_min_groups), small_tile_rows x small_tile_tokens; null
  // where the thread tile cannot shrink (then `tiled` takes every product).
  std::unique_ptr<Pipeline> tiled_small;
  uint32_t small_tile_rows = 0;
  uint32_t small_tile_tokens = 0;
  // Where the device has cooperative matrices (DeviceInfo::coop_matrix_khr): the tiled product
  // on them (shaders/matmul_coopmat.comp, f16 operands), used instead of `tiled`.
  std::unique_ptr<Pipeline> coop;
  // matmul_coopmat.comp on tiles of half the rows, for products whose grid of full tiles is
  // short of GpuTuning::coopmat_small_below workgroups (null where that is 0).
  std::unique_ptr<Pipeline> coop_small;
  uint32_t coop_small_below = 0;
  // shaders/coop_x_prep.comp: x quantized once a product for the integer-dot kernels into
  // coop_x, which grows to the largest product recorded; buffers it outgrows stay alive with the
  // kernels, since recordings already made may still bind them.
  std::unique_ptr<Pipeline> coop_prep;
  mutable std::vector<std::unique_ptr<Buffer>> coop_x;
  // Integer-dot-product kernels (null when off) for T = 1 and small T, on x as coop_prep
  // (coop_x_prep_int8) or add_norm leaves it.
  std::unique_ptr<Pipeline> dot_one_token;
  std::unique_ptr<Pipeline> dot_many_tokens;
};

// Whether a product of n_tokens over `rows` runs on the cooperative-matrix kernel with f16
// operands (test/gpu/matvec_check.h's F16::kPlain bound).
bool products_in_f16(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens);

// Whether such a product quantizes activations to int8 (Q8_0 blocks of 32, as
// model/quant.h quantize_row_q8_0) and sums exact integer block dots: the contract of
// matmul_reference_q8_x rather than matmul_reference (the integer-dot matvecs).
bool activations_in_int8(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens);

// Whether such a product runs on the integer-dot kernel: the product then takes x already
// quantized (record_matvec_kernels' x_int8).
bool takes_int8_x(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens);

// Whether such a product runs on shaders/matvec.comp (neither tiled nor integer-dot).
bool runs_matvec_shader(const MatvecKernels& k, int64_t rows, int64_t cols, uint32_t n_tokens);

// The subgroups of a workgroup that share each row of a [rows, cols] matrix on matvec.comp: the
// smallest divisor of subgroups_per_group up to max_split that leaves each part at most
// split_rounds rounds and gives split_min_groups workgroups, short of parts without a chunk of
// vectors (where none meets both: the largest divisor within those bounds).
uint32_t matvec_split(const MatvecKernels& k, int64_t rows, int64_t cols);

// The shape of a one-token product on unsplit rows of a [rows, cols] matrix: rows a subgroup
// sums, rows_per_subgroup halved while the grid would have fewer than min_grid_subgroups
// subgroups (down to the fewest one_token_variants has); and vectors a round, vec_unroll unless
// it does not divide the row's chunks (a lane's round past the row loads and multiplies for
// nothing: E2B's 1536-column Q8_0 rows are 3 chunks), then 1. `pipeline` is one_token or a
// variant's.
struct OneTokenShape {
  uint32_t rows_per_subgroup = 0;
  uint32_t vec_unroll = 0;
  const Pipeline* pipeline = nullptr;
};
OneTokenShape matvec_one_token_shape(const MatvecKernels& k, int64_t rows, int64_t cols);

// Bytes of the device scratch the kernels hold (coop_x: prepared activations), grown by the
// prefill recordings made so far.
size_t scratch_bytes(const MatvecKernels& k);

Result<MatvecKernels> create_matvec_kernels(const VulkanContext& ctx, WeightFormat format,
                                            bool gate_up, MatvecTuning tuning);

// Records y[t, r] = sum_c W[r, c] * x[t, c] (gate_up: gelu(G[r]·x[t]) · (U[r]·x[t])) for t <
// n_tokens. w (and up): [rows, cols] in the kernels' format; x: [n_tokens, cols] f32; y: [n_tokens,
// rows] f32. up is nullptr unless gate_up. Given x_int8 (where takes_int8_x): x as coop_x_prep_int8
// leaves it, made by the caller (add_norm's h_int8), used instead of quantizing x here.
Result<void> record_matvec_kernels(Recorder& rec, const MatvecKernels& k, const GpuMatrix& w,
                                   const GpuMatrix* up, Binding x, Binding y, uint32_t n_tokens,
                                   Binding x_int8 = {});

class MatvecOp {
 public:
  static Result<std::unique_ptr<MatvecOp>> create(const VulkanContext& ctx, WeightFormat format,
                                                  MatvecTuning tuning = {});

  // Records y[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens.
  // w: [rows, cols] in this op's format; x: [n_tokens, cols] f32; y: [n_tokens, rows] f32.
  Result<void> record(Recorder& rec, const GpuMatrix& w, Binding x, Binding y, uint32_t n_tokens,
                      Binding x_int8 = {}) const;
  bool takes_int8_x(int64_t rows, int64_t cols, uint32_t n_tokens) const {
    return gpu::takes_int8_x(k_, rows, cols, n_tokens);
  }
  bool int_dot() const { return k_.dot_one_token != nullptr; }  // some products may take x_int8

  WeightFormat format() const { return k_.format; }
  size_t scratch_bytes() const { return gpu::scratch_bytes(k_); }
  const MatvecTuning& tuning() const { return k_.tuning; }  // as resolved for the device
  bool products_in_f16(int64_t rows, int64_t cols, uint32_t n_tokens) const {
    return gpu::products_in_f16(k_, rows, cols, n_tokens);
  }
  bool activations_in_int8(int64_t rows, int64_t cols, uint32_t n_tokens) const {
    return gpu::activations_in_int8(k_, rows, cols, n_tokens);
  }
  ~MatvecOp();

 private:
  MatvecOp() = default;

  MatvecKernels k_;
};

// y = W · x for n_tokens rows of x, end to end: uploads x, records, submits, downloads y. x:
// [n_tokens, w.cols] f32, y: [n_tokens, w.rows] f32 (host memory).
Result<void> run_matvec(const VulkanContext& ctx, const MatvecOp& op, const GpuMatrix& w,
                        const float* x, int64_t n_tokens, float* y);

}  // namespace infer::gpu
