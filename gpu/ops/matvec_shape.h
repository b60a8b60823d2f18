// matvec.comp's workgroup shape (gpu/ops/matvec.cpp's one-token and small-T pipelines): defaults
// reasoned for a big GPU, each a knob in the environment so a device run can sweep them.
#pragma once

#include "gpu/ops/matvec.h"

namespace infer::gpu {

// Fills t's zero matvec.comp fields (subgroups_per_group, rows_per_subgroup, tokens_per_group,
// vec_unroll, max_split, split_rounds) from INFER_MV_* (INFER_GU_* for gate-up) in the
// environment, then the defaults (matvec_shape.cpp lists both), within the device's workgroup
// size. Fields set in code are kept.
void resolve_matvec_shape(const DeviceInfo& info, const GpuTuning& tuning, WeightFormat format,
                          bool gate_up, MatvecTuning& t);

}  // namespace infer::gpu
