// Workgroup sums: subgroupAdd within each subgroup, then one partial per subgroup in shared
// memory. The includer declares `shared float red_partial[kMaxSubgroups * N]` for N sums.

// Adds value i of every invocation into red_partial[subgroup * n + i]; call for i < n, then
// barrier() once, then red_total().
void red_add(float v, uint i, uint n) {
  float s = subgroupAdd(v);
  if (subgroupElect()) red_partial[gl_SubgroupID * n + i] = s;
}

float red_total(uint i, uint n) {
  float s = 0.0;
  for (uint g = 0; g < gl_NumSubgroups; ++g) s += red_partial[g * n + i];
  return s;
}
