// The probes' spin (sync_probe.comp, chain_probe.comp): the includer declares pc.spin_limit and
// a coherent uint error_bits[] whose bit 0 means "a spin gave up". A spin ends after spin_limit
// reads (then bit 0 is set), or as soon as another workgroup's has: a grid that is not all
// resident then costs one spin limit, not one a barrier (2,000 of them in the sync probe).
bool gave_up(uint spins) {
  if (spins >= pc.spin_limit) {
    atomicOr(error_bits[0], 1u);
    return true;
  }
  return (spins & 1023u) == 0u &&
         (atomicLoad(error_bits[0], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                     gl_SemanticsRelaxed) & 1u) != 0u;
}
