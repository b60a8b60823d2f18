// GpuForward's setup: the ops it records (matrix ops for each weight format the model uses) and
// the chunk buffers, all created once so that recording and replaying create nothing.
#include <algorithm>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"
#include "gpu/ops/op_common.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

void note_format(std::array<bool, 4>& used, const Matrix& m) {
  if (m.rows > 0) used[size_t(m.format)] = true;
}

}  // namespace

bool resolved_int_dot(const GpuTuning& t, const DeviceInfo& info, int64_t hidden_size) {
  if (t.int_dot != Choice::kAuto) return t.int_dot == Choice::kOn;
  return info.integer_dot_product && hidden_size >= kIntDotMinHidden;
}

const MatvecOp& GpuOps::matvec_for(WeightFormat f) const {
  INFER_CHECK(matvec[size_t(f)] != nullptr, "no %s matvec op", weight_format_name(f));
  return *matvec[size_t(f)];
}

const MatvecOp& GpuOps::matvec_for(const GpuMatrix& m) const {
  const MatvecOp* long_op = matvec_long[size_t(m.format)].get();
  return long_op != nullptr && m.cols >= long_cols ? *long_op : matvec_for(m.format);
}

const GateUpOp& GpuOps::gate_up_for(WeightFormat f) const {
  INFER_CHECK(gate_up[size_t(f)] != nullptr, "no %s gate-up op", weight_format_name(f));
  return *gate_up[size_t(f)];
}

Result<void> create_ops(const VulkanContext& ctx, const ModelConfig& cfg, const ModelWeights& w,
                        int64_t max_positions, int64_t max_chunk, GpuOps& ops) {
  const TextConfig& tc = cfg.text;
  INFER_TRY(ops.embed, EmbedOps::create(ctx));
  INFER_TRY(ops.elementwise, ElementwiseOps::create(ctx));

  AttentionOps::Limits lim;
  lim.max_T = uint32_t(max_chunk);
  lim.max_n_q = uint32_t(tc.num_attention_heads);
  lim.max_positions = uint32_t(max_positions);
  for (const LayerPlan& p : cfg.layers) lim.max_d = std::max(lim.max_d, uint32_t(p.head_dim));
  INFER_TRY(ops.attention, AttentionOps::create(ctx, lim));

  // Matrix-vector ops for every format a projection or the head uses; gate-up for the MLPs'.
  std::array<bool, 4> mv{}, gu{};
  note_format(mv, w.lm_head);
  note_format(mv, w.per_layer_model_projection);
  for (const LayerWeights& lw : w.layers) {
    for (const Matrix* m : {&lw.q_proj, &lw.o_proj, &lw.down_proj, &lw.per_layer_input_gate,
                            &lw.per_layer_projection}) {  // k/v are stacked under q_proj
      note_format(mv, *m);
    }
    note_format(gu, lw.gate_proj);
  }
  // Long rows and integer dots: gpu/tuning.h says why each default; int_dot's auto is decided
  // here, once, from the device and the model's width.
  const GpuTuning& knobs = ctx.tuning();
  const uint32_t long_subgroups = knobs.long_row_subgroups;
  ops.long_cols = knobs.long_row_cols;
  ops.int8_from_norm = knobs.int8_from_norm;
  const bool int_dot = resolved_int_dot(knobs, ctx.info(), tc.hidden_size);
  for (size_t f = 0; f < 4; ++f) {
    MatvecTuning dots;
    if (int_dot) dots.int_dot = IntDot::kOn;
    if (mv[f]) {
      MatvecTuning tuning = dots;
      INFER_TRY(ops.matvec[f], MatvecOp::create(ctx, WeightFormat(f), tuning));
      const bool splits = f == size_t(WeightFormat::kF32) || f == size_t(WeightFormat::kBF16);
      if (long_subgroups > 0 && splits) {
        tuning.subgroups_per_group = long_subgroups;
        INFER_TRY(ops.matvec_long[f], MatvecOp::create(ctx, WeightFormat(f), tuning));
      }
    }
    if (gu[f]) {
      INFER_TRY(ops.gate_up[f], GateUpOp::create(ctx, WeightFormat(f), dots));
    }
  }
  // add_norm's int8 h only where a product can take it (gate-up's prepared x follows the plain
  // op's choice: same tuning, same format).
  bool int8_h = false;
  for (const std::unique_ptr<MatvecOp>& op : ops.matvec) {
    int8_h = int8_h || (op != nullptr && op->int_dot());
  }
  INFER_TRY(ops.norm,
            RmsNormOps::create(ctx, uint32_t(tc.hidden_size), ops.int8_from_norm && int8_h));
  ops.int8_from_attention = ops.int8_from_norm && knobs.int8_from_attention;
  if (tc.enable_moe_block) {
    const LayerWeights& l0 = w.layers.front();
    if (l0.expert_gate_up.empty()) {
      return make_error(ErrorCode::kShape, "enable_moe_block without bound experts");
    }
    INFER_TRY(ops.moe, MoeOps::create(ctx, l0.expert_gate_up.front().format, uint32_t(max_chunk),
                                      uint32_t(tc.top_k_experts),
                                      uint32_t(tc.moe_intermediate_size),
                                      uint32_t(tc.num_experts)));
  }
  return Ok{};
}

Result<void> create_activations(const VulkanContext& ctx, const ModelConfig& cfg,
                                int64_t max_chunk, int64_t ring_keys, GpuActivations& a) {
  const TextConfig& tc = cfg.text;
  const uint64_t C = uint64_t(max_chunk), H = uint64_t(tc.hidden_size);
  const uint64_t P = uint64_t(tc.hidden_size_per_layer_input);
  const uint64_t LP = uint64_t(tc.num_hidden_layers) * P;
  uint64_t qd = 0, qkvd = 0, I = 0;
  for (const LayerPlan& p : cfg.layers) {
    const uint64_t q_rows = uint64_t(tc.num_attention_heads) * uint64_t(p.head_dim);
    qd = std::max(qd, q_rows);
    // q, k and v rows (at most: K=V and KV-shared layers have fewer).
    qkvd = std::max(qkvd, q_rows + 2 * uint64_t(p.num_key_value_heads) * uint64_t(p.head_dim));
    I = std::max(I, uint64_t(p.mlp_intermediate));
  }
  const uint64_t V = uint64_t(tc.vocab_size);
  const uint64_t k = uint64_t(std::max(1, tc.top_k_experts));

  auto make = [&](Buffer& b, uint64_t words, BufferKind kind, const char* name) -> Result<void> {
    // Absent parts (no PLE, no MoE) still get a one-word buffer: nothing binds it.
    INFER_TRY(b, Buffer::create(ctx, std::max<uint64_t>(words, 1) * 4, kind,
                                std::string("forward: ") + name));
    if (kind == BufferKind::kDevice) a.bytes += size_t(b.size());
    return Ok{};
  };
  const bool moe = tc.enable_moe_block;
  // The KV ring adds the chunk's write slots and up to A + W + R key slots (shaders/step.h).
  const uint64_t step_words = ring_keys > 0 ? INFER_STEP_RING_WORDS(C, uint64_t(ring_keys))
                                            : INFER_STEP_WORDS(C);
  // The step words (position, ids, ring slots) are read at the head of every attention kernel's
  // dependency chain: in host memory that is a bus round trip each (~1 us on a PCIe GPU, three
  // a layer). Where device memory is host-visible (UMA, or a discrete GPU's resizable BAR) the
  // host writes them there instead.
  const bool step_on_device = ctx.use_host_visible_device_memory();
  INFER_TRY_VOID(make(a.step, step_words, step_on_device ? BufferKind::kDevice : BufferKind::kHost,
                      "step"));
  if (ring_keys > 0) {
    INFER_TRY_VOID(make(a.step_dev, step_words, BufferKind::kDevice, "step (device)"));
  }
  INFER_TRY_VOID(make(a.ple_rows, C * LP, BufferKind::kHost, "ple rows"));
  INFER_TRY_VOID(make(a.x, C * H, BufferKind::kDevice, "x"));
  INFER_TRY_VOID(make(a.x_alt, C * H, BufferKind::kDevice, "x (other)"));
  INFER_TRY_VOID(make(a.h, C * H, BufferKind::kDevice, "h"));
  INFER_TRY_VOID(make(a.h_int8, div_up(int8_x_bytes(C, H), 4), BufferKind::kDevice, "h (int8)"));
  INFER_TRY_VOID(make(a.o, C * H, BufferKind::kDevice, "o"));
  INFER_TRY_VOID(make(a.x2, moe ? C * H : 1, BufferKind::kDevice, "moe x2"));
  INFER_TRY_VOID(make(a.m2, moe ? C * H : 1, BufferKind::kDevice, "moe m2"));
  INFER_TRY_VOID(make(a.qkv, C * qkvd, BufferKind::kDevice, "qkv"));
  INFER_TRY_VOID(make(a.q, C * qd, BufferKind::kDevice, "q"));
  INFER_TRY_VOID(make(a.att, C * qd, BufferKind::kDevice, "att"));
  INFER_TRY_VOID(
      make(a.att_int8, div_up(int8_x_bytes(1, qd), 4), BufferKind::kDevice, "att (int8)"));
  INFER_TRY_VOID(make(a.act, C * I, BufferKind::kDevice, "mlp act"));
  INFER_TRY_VOID(make(a.ple, C * LP, BufferKind::kDevice, "ple"));
  INFER_TRY_VOID(make(a.g, C * P, BufferKind::kDevice, "ple gate"));
  INFER_TRY_VOID(make(a.moe_idx, moe ? C * k : 1, BufferKind::kDevice, "moe idx"));
  INFER_TRY_VOID(make(a.moe_w, moe ? C * k : 1, BufferKind::kDevice, "moe w"));
  INFER_TRY_VOID(make(a.head_in, H, BufferKind::kDevice, "head in"));
  INFER_TRY_VOID(make(a.logits, V, BufferKind::kDevice, "logits"));
  INFER_TRY_VOID(make(a.logits_host, V, BufferKind::kHost, "logits (host)"));
  INFER_TRY_VOID(make(a.id_host, 1, BufferKind::kHost, "argmax id (host)"));
  return Ok{};
}

}  // namespace infer::gpu
