// The residual step that ends a block, for one row of n floats (GEMMA4_TEXT.md §4.4), shared by
// by add_norm.comp's workgroups:
//   stream[row] = (stream[row] + rmsnorm(o[row]) · w_post) · pc.scale
// and with FUSE_NEXT h[row] = rmsnorm(stream[row]) · next_w. The includer declares the buffers
// stream, o, w_post (and next_w, h with FUSE_NEXT), a push block with eps and scale, and includes
// norm_row.glsl. Call from uniform control flow: every invocation of the workgroup takes part.
// ADD_NORM_BATCH: loads an invocation issues before using any (norm_row.glsl's kBatch unless the
// includer, with a smaller workgroup, wants more in flight). ADD_NORM_H_SHARED (registers form): a
// shared array that also gets h[row].

#ifndef ADD_NORM_BATCH
#define ADD_NORM_BATCH kBatch
#endif

void add_norm_row(uint base, uint n) {
  const uint kAddBatch = ADD_NORM_BATCH;
  const uint step = gl_WorkGroupSize.x;
  float sum_sq = 0.0;
  for (uint i0 = gl_LocalInvocationID.x; i0 < n; i0 += step * kAddBatch) {
    float v[kAddBatch];
    for (uint b = 0, i = i0; b < kAddBatch; ++b, i += step) v[b] = i < n ? o[base + i] : 0.0;
    for (uint b = 0; b < kAddBatch; ++b) sum_sq += v[b] * v[b];
  }
  const float inv = inv_rms(workgroup_sum(sum_sq), n, pc.eps);

  // Each invocation rereads only the stream elements it wrote itself, so no barrier is needed.
  float next_sum_sq = 0.0;
  for (uint i0 = gl_LocalInvocationID.x; i0 < n; i0 += step * kAddBatch) {
    float xv[kAddBatch], ov[kAddBatch], wv[kAddBatch];
    for (uint b = 0, i = i0; b < kAddBatch; ++b, i += step) {
      xv[b] = i < n ? stream[base + i] : 0.0;
      ov[b] = i < n ? o[base + i] : 0.0;
      wv[b] = i < n ? w_post[i] : 0.0;
    }
    for (uint b = 0, i = i0; b < kAddBatch; ++b, i += step) {
      const float v = (xv[b] + ov[b] * inv * wv[b]) * pc.scale;
      if (i < n) stream[base + i] = v;
      next_sum_sq += v * v;  // 0 past the row
    }
  }
#if defined(FUSE_NEXT)
  const float next_inv = inv_rms(workgroup_sum(next_sum_sq), n, pc.eps);
  for (uint i0 = gl_LocalInvocationID.x; i0 < n; i0 += step * kAddBatch) {
    float xv[kAddBatch], wv[kAddBatch];
    for (uint b = 0, i = i0; b < kAddBatch; ++b, i += step) {
      xv[b] = i < n ? stream[base + i] : 0.0;
      wv[b] = i < n ? next_w[i] : 0.0;
    }
    for (uint b = 0, i = i0; b < kAddBatch; ++b, i += step) {
      if (i < n) h[base + i] = xv[b] * next_inv * wv[b];
    }
  }
#endif
}

#ifdef ADD_NORM_PER_INVOCATION
// The same step with the whole row held in registers, ADD_NORM_PER_INVOCATION elements an
// invocation (n <= gl_WorkGroupSize.x · ADD_NORM_PER_INVOCATION): every input (o, stream, w_post,
// next_w) loaded at once, one wait on memory where add_norm_row waits for o, then stream and
// w_post, then next_w.
void add_norm_row_in_registers(uint base, uint n) {
  const uint kHold = ADD_NORM_PER_INVOCATION;
  const uint step = gl_WorkGroupSize.x;
  float ov[kHold], xv[kHold], wv[kHold];
#if defined(FUSE_NEXT)
  float nv[kHold];
#endif
  for (uint b = 0, i = gl_LocalInvocationID.x; b < kHold; ++b, i += step) {
    ov[b] = i < n ? o[base + i] : 0.0;
    xv[b] = i < n ? stream[base + i] : 0.0;
    wv[b] = i < n ? w_post[i] : 0.0;
#if defined(FUSE_NEXT)
    nv[b] = i < n ? next_w[i] : 0.0;
#endif
  }
  float sum_sq = 0.0;
  for (uint b = 0; b < kHold; ++b) sum_sq += ov[b] * ov[b];
  const float inv = inv_rms(workgroup_sum(sum_sq), n, pc.eps);

  float next_sum_sq = 0.0;
  for (uint b = 0, i = gl_LocalInvocationID.x; b < kHold; ++b, i += step) {
    xv[b] = (xv[b] + ov[b] * inv * wv[b]) * pc.scale;  // add_norm_row's expression
    if (i < n) stream[base + i] = xv[b];
    next_sum_sq += xv[b] * xv[b];  // 0 past the row
  }
#if defined(FUSE_NEXT)
  const float next_inv = inv_rms(workgroup_sum(next_sum_sq), n, pc.eps);
  for (uint b = 0, i = gl_LocalInvocationID.x; b < kHold; ++b, i += step) {
    const float hv = xv[b] * next_inv * nv[b];
    if (i < n) h[base + i] = hv;
#ifdef ADD_NORM_H_SHARED
    // the includer's copy of the row (add_norm.comp INT8_OUT)
    if (i < n) ADD_NORM_H_SHARED[i] = hv;
#endif
  }
#endif
}
#endif
