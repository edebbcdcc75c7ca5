//! Memory placement hints for the tables the decision layer builds (which makes no system calls
//! itself; see [`crate::l3::fib::Advice`]).

/// Asks the kernel to back `table` with transparent huge pages where it allows (THP in `madvise`
/// or `always` mode). Run before the table is first written, so that its pages fault in huge.
/// Nothing happens where THP is off; only the 2 MiB-aligned middle of `table` is advised.
pub fn advise_huge_pages(table: &mut [u16]) {
    const HUGE: usize = 2 << 20;
    let start = table.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(table);
    let aligned = start.next_multiple_of(HUGE);
    if aligned >= end {
        return;
    }
    let len = (end - aligned) / HUGE * HUGE;
    if len == 0 {
        return;
    }
    // SAFETY: [aligned, aligned + len) lies inside `table`, which this function borrows
    // mutably; MADV_HUGEPAGE only changes how the kernel backs those pages, never their
    // contents, and its failure (no THP) is harmless.
    let _ = unsafe { libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}
