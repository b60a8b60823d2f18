// GpuForward's setup: the ops it records (matrix ops for each weight format the model uses) and
// the chunk buffers, all created once so that recording and replaying create nothing.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "gpu/context.h"
#include "gpu/gpu_forward_impl.h"
#include "gpu/ops/op_common.h"
#include "shaders/step.h"

namespace infer::gpu {
namespace {

// Models at least this wide take integer dots on their Q8_0/Q4_0 decode products (12B's 3840
// gains, E2B's 1536 loses; E4B's 2560 is unmeasured and stays in f32).
constexpr int64_t kIntDotMinHidden = 3072;

void note_format(std::array<bool, 4>& used, const Matrix& m) {
  if (m.rows > 0) used[size_t(m.format)] = true;
}

}  // namespace

const MatvecOp* GpuOps::ple_epilogue_op(const GpuMatrix& m, uint32_t T, uint64_t offset) const {
  if (T != 1 || !ple_epilogue || matvec_norm_in[size_t(m.format)] != nullptr) return nullptr;
  const MatvecOp* op = matvec[size_t(m.format)].get();
  if (op == nullptr || !op->gelu_mul_applies(m)) return nullptr;
  return offset % binding_align == 0 ? op : nullptr;
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
  ops.binding_align = std::max<uint64_t>(1, ctx.info().min_storage_buffer_offset_alignment);
  // The PLE gate's gelu-mul epilogue (INFER_PLE_EPILOGUE=1) removes a dependent dispatch a layer
  // (E2B 463 -> 428 a token) at no prologue cost, yet alternated on the H200 it was slower
  // (docs/bench/gpu-h200-s7-call3.json): E2B Q4_0 259.1 / 258.3 t/s against 271.2 / 273.3
  // without, Q8_0 251.4 against 261.4, bf16 283.9 against 281.8; every kernel of the token ran
  // 5-15% longer in the profile (gate-up 19.4 -> 22.1 us), not just the gate. The PLE prologue
  // (INFER_NORM_IN=p, same 428 dispatches) lost as much. Unexplained; an APU may differ.
  const char* ple_epilogue = std::getenv("INFER_PLE_EPILOGUE");
  ops.ple_epilogue = ple_epilogue != nullptr && ple_epilogue[0] == '1';
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
  // Long rows (>= long_cols columns: 12B's down projection, E2B's double-wide ones) of the
  // split-capable formats (f32, bf16) on their own op of 8 subgroups a workgroup: side by side
  // on the H200 (docs/bench/gpu-h200-s15-call1.json) 12B bf16 120.3 / 121.1 t/s against
  // 119.6 / 119.6 on 4, E2B bf16 286.4 against 283.4. Q8_0/Q4_0 do not split a row, so more
  // subgroups would only take more rows a workgroup: not measured, not used.
  // INFER_MV_LONG_SUBGROUPS=N sets N (0: off).
  const char* long_env = std::getenv("INFER_MV_LONG_SUBGROUPS");
  const uint32_t long_subgroups =
      long_env != nullptr ? uint32_t(std::max(0, std::atoi(long_env))) : 8;
  const char* long_cols_env = std::getenv("INFER_MV_LONG_COLS");
  ops.long_cols = long_cols_env != nullptr && std::atoi(long_cols_env) > 0
                      ? std::atoi(long_cols_env)
                      : 8192;
  // Q8_0/Q4_0 one-token products on integer dots, x quantized once a product (and by the
  // add_norm before it where there is one: x8_from_norm), for models of H >= kIntDotMinHidden.
  // Side by side on the H200 (docs/bench/gpu-h200-s17-call2.json, call3): 12B Q4_0 190.4 / 190.0
  // t/s against 178.4 in f32 (its products 13.8 us against 17.7, gate-up 26.4 against 34.2),
  // Q8_0 152.6 against 144.5; E2B Q4_0 291-305 against 340-349 (its products, 1536 wide, no
  // faster; the quantizing dispatches cost more than they save). INFER_INTDOT (0 off, 1 each
  // workgroup quantizing x itself, 2 prepared) overrides it for any model.
  const char* x8_fuse = std::getenv("INFER_X8_FUSE");
  ops.x8_from_norm = !(x8_fuse != nullptr && x8_fuse[0] == '0');
  const char* x8_gate_up = std::getenv("INFER_X8_GATE_UP");
  ops.x8_from_gate_up = ops.x8_from_norm && x8_gate_up != nullptr && x8_gate_up[0] == '1';
  const bool int_dot = std::getenv("INFER_INTDOT") == nullptr &&
                       tc.hidden_size >= kIntDotMinHidden && ctx.info().integer_dot_product;
  for (size_t f = 0; f < 4; ++f) {
    MatvecTuning dots;
    dots.dot_x8_out = ops.x8_from_gate_up;
    if (int_dot) {
      dots.int_dot = IntDot::kOn;
      dots.dot_input = DotInput::kPrepared;
    }
    if (mv[f]) {
      MatvecTuning tuning = dots;
      tuning.gelu_mul_epilogue = ops.ple_epilogue;
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
  // Products that read the stream at T = 1 may take the step before them in their prologue (up
  // to H columns, P for the PLE projection). INFER_NORM_IN: unset or 0 none; p the PLE projection
  // alone (its prologue is gelu(gate) · ple over P = 256 values: one dependent dispatch a layer
  // fewer, E2B 463 -> 428 a token); 1 every plain product; 2 gate-up too. Each was slower on the
  // H200, alternated in one run: p, E2B Q4_0 262.0 / 267.3 t/s against 276.7 / 277.7 without
  // (docs/bench/gpu-h200-s7-call1.json: the projection 9.8 -> 10.8 us, and the other products
  // slower beside it); 1 and 2 (docs/bench/gpu-h200-s5-normin-ab.json) E2B Q4_0 253-256 t/s
  // against 264-265, 12B Q4_0 137.9 against 159.5. Every workgroup redoes the step (two
  // reductions over H, or P GELUs) before its first weight load, and the gate-up prologue caps
  // its grid (12B Q4_0 gate-up 51.3 us against 40.7 + 7.0 apart, docs/bench/gpu-h200-s5-mv.json).
  // A device where a dependent dispatch costs more than the prologue (an APU) may gain: measure
  // there (the H200's: 2.0-2.4 us, the bench's sync_dependent_dispatch_us).
  // add_norm's int8 h only where a product can take it (gate-up's prepared x follows the plain
  // op's choice: same tuning, same format).
  bool int8_h = false;
  for (const std::unique_ptr<MatvecOp>& op : ops.matvec) {
    int8_h = int8_h || (op != nullptr && op->dot_prepared());
  }
  INFER_TRY(ops.norm, NormOps::create(ctx, uint32_t(tc.hidden_size), ops.x8_from_norm && int8_h));
  const char* x8_attn = std::getenv("INFER_X8_ATTN");
  ops.x8_from_attention = ops.x8_from_norm && !(x8_attn != nullptr && x8_attn[0] == '0');
  const char* norm_in = std::getenv("INFER_NORM_IN");
  const char mode = norm_in == nullptr || norm_in[0] == '\0' ? '0' : norm_in[0];
  const bool gate_up_norm_in = mode == '2';
  ops.norm_in_ple_only = mode == 'p';
  if (mode == '1' || mode == '2' || (mode == 'p' && tc.hidden_size_per_layer_input > 0)) {
    const uint32_t max_cols = mode == 'p' ? uint32_t(tc.hidden_size_per_layer_input)
                                          : uint32_t(std::max(tc.hidden_size,
                                                              tc.hidden_size_per_layer_input));
    for (size_t f = 0; f < 4; ++f) {
      if (mv[f]) {
        INFER_TRY(ops.matvec_norm_in[f],
                  MatvecNormInOp::create(ctx, WeightFormat(f), /*gate_up=*/false, max_cols));
      }
      if (gu[f] && gate_up_norm_in) {
        INFER_TRY(ops.gate_up_norm_in[f],
                  MatvecNormInOp::create(ctx, WeightFormat(f), /*gate_up=*/true, max_cols));
      }
    }
  }
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
  // host writes them there instead. INFER_STEP_HOST=1 keeps them in host memory (for A/B).
  const char* step_host = std::getenv("INFER_STEP_HOST");
  const bool step_on_device =
      ctx.use_host_visible_device_memory() && !(step_host != nullptr && step_host[0] == '1');
  INFER_TRY_VOID(make(a.step, step_words, step_on_device ? BufferKind::kDevice : BufferKind::kHost,
                      "step"));
  if (ring_keys > 0) {
    INFER_TRY_VOID(make(a.step_dev, step_words, BufferKind::kDevice, "step (device)"));
  }
  INFER_TRY_VOID(make(a.ple_rows, C * LP, BufferKind::kHost, "ple rows"));
  INFER_TRY_VOID(make(a.x, C * H, BufferKind::kDevice, "x"));
  INFER_TRY_VOID(make(a.x_alt, C * H, BufferKind::kDevice, "x (other)"));
  INFER_TRY_VOID(make(a.h, C * H, BufferKind::kDevice, "h"));
  INFER_TRY_VOID(make(a.h8, div_up(x8_bytes(C, H), 4), BufferKind::kDevice, "h (int8)"));
  INFER_TRY_VOID(make(a.o, C * H, BufferKind::kDevice, "o"));
  INFER_TRY_VOID(make(a.x2, moe ? C * H : 1, BufferKind::kDevice, "moe x2"));
  INFER_TRY_VOID(make(a.m2, moe ? C * H : 1, BufferKind::kDevice, "moe m2"));
  INFER_TRY_VOID(make(a.qkv, C * qkvd, BufferKind::kDevice, "qkv"));
  INFER_TRY_VOID(make(a.q, C * qd, BufferKind::kDevice, "q"));
  INFER_TRY_VOID(make(a.att, C * qd, BufferKind::kDevice, "att"));
  INFER_TRY_VOID(make(a.att8, div_up(x8_bytes(1, qd), 4), BufferKind::kDevice, "att (int8)"));
  INFER_TRY_VOID(make(a.act, C * I, BufferKind::kDevice, "mlp act"));
  INFER_TRY_VOID(make(a.act8, div_up(x8_bytes(1, I), 4), BufferKind::kDevice, "mlp act (int8)"));
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
