// The row-per-workgroup layout of the norms (rms_norm, add_norm, norm_sum, ple_inputs): which
// row this workgroup owns and sums over the whole workgroup. The includer declares
// `shared float red_partial[kMaxSubgroups * 2]` and includes common/reduce.glsl first.

// Loads an invocation issues before it uses any: a loop that used each load at once would wait a
// full memory latency per element (a row of 5376 is ~11 elements an invocation).
const uint kBatch = 8;

// Rows fill x up to the device's limit, then wrap into y (T·L PLE slices, T·n_q heads).
uint row_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// The sums of v.x and v.y over the workgroup, in every invocation. Call from uniform control
// flow; the trailing barrier lets the next call reuse red_partial at once.
vec2 workgroup_sum2(vec2 v) {
  red_add(v.x, 0, 2);
  red_add(v.y, 1, 2);
  barrier();
  const vec2 s = vec2(red_total(0, 2), red_total(1, 2));
  barrier();
  return s;
}

float workgroup_sum(float v) { return workgroup_sum2(vec2(v, 0.0)).x; }

// 1 / rms: the mean of squares with ε inside the root, as model/ops/rms_norm.cpp rounds it.
float inv_rms(float sum_sq, uint n, float eps) { return 1.0 / sqrt(sum_sq / float(n) + eps); }
