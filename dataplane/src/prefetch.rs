//! A cache prefetch hint, for the batch stages that touch table entries before the decisions
//! need them. Where the architecture has no stable hint, it does nothing.

/// Asks the CPU to bring the cache line holding `p` into its first-level cache.
#[inline(always)]
pub fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and writes nothing, whatever the address.
    #[allow(unused_unsafe, reason = "safe to call on recent compilers, unsafe on older ones")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint: it never faults and writes nothing, whatever the address.
    unsafe {
        core::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}
