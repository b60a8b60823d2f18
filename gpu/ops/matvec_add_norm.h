// Decode's fused end of a block (GEMMA4_TEXT.md §4.4): the product that makes the block output o
// (o_proj, down_proj, the PLE projection) and the residual step after it (NormOps::add_norm) in
// one dispatch, shaders/matvec_add_norm.comp; the PLE block's gelu_mul (§4.9) folds into the
// product's input. Decode is launch-bound on a big GPU: this saves three or four dispatches and
// as many barriers a layer.
#pragma once

#include <cstdint>
#include <memory>

#include "base/result.h"
#include "gpu/buffer.h"
#include "gpu/ops/matvec.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace infer::gpu {

class VulkanContext;
class NormOps;
class ElementwiseOps;

// The residual step after a product o [T, H] (NormOps::add_norm's arguments):
//   x[t] = (x[t] + rmsnorm(o[t]) · w_post) · scale, then h[t] = rmsnorm(x[t]) · next_w when
//   next_w.buffer != nullptr.
struct AddNormArgs {
  Binding x;       // [T, H] f32, the stream, read and written
  Binding w_post;  // [H] f32
  float scale = 1.0f;
  Binding next_w;  // [H] f32, or none
  Binding h;       // [T, H] f32, written when next_w is given
  float eps = 0.0f;
};

// The PLE block's product input: in[t, c] = gelu_tanh(x[t, c]) · b[t·b_stride + b_off + c], c <
// cols (in floats: slice l of ple [T, L·P]).
struct GeluMulInput {
  Binding b;
  uint32_t b_stride = 0;
  uint32_t b_off = 0;
};

class MatvecAddNormOp {
 public:
  // For the products of `k` (MatvecOp builds one per format; k must outlive the op). Null, not
  // an error, where the device binds too few storage buffers a stage for the fused shader.
  static Result<std::unique_ptr<MatvecAddNormOp>> create(const VulkanContext& ctx,
                                                         const MatvecKernels& k);
  ~MatvecAddNormOp();

  // Whether record() takes a product of w over n_tokens: T = 1 where the plain product would run
  // matvec.comp (not the tiled or integer-dot kernels).
  bool applies(const GpuMatrix& w, uint32_t n_tokens) const;

  // o[t] = W · in[t] (in = x, or gelu(x) ⊙ b given `gelu`), then an's residual step over rows
  // of H = w.rows. w: [H, cols]; x: [n_tokens, cols] f32; o: [n_tokens, H] f32 (written).
  Result<void> record(Recorder& rec, const GpuMatrix& w, Binding x, const GeluMulInput* gelu,
                      Binding o, const AddNormArgs& an, uint32_t n_tokens) const;

 private:
  MatvecAddNormOp() = default;

  const MatvecKernels* k_ = nullptr;
  std::unique_ptr<Pipeline> plain_, next_;  // without and with the next norm (FUSE_NEXT)
  Buffer counter_;                          // uint: workgroups done, 0 between dispatches
};

// The same step, fused where mv's op applies, else as before: gelu_mul into x (in place), the
// product, add_norm. Callers get the same o, x and h either way (x may be overwritten).
Result<void> record_matvec_add_norm(Recorder& rec, const MatvecOp& mv, const NormOps& norm,
                                    const ElementwiseOps& elementwise, const GpuMatrix& w,
                                    Binding x, const GeluMulInput* gelu, Binding o,
                                    const AddNormArgs& an, uint32_t n_tokens);

}  // namespace infer::gpu
