//! Memory placement hints for the tables the decision layer builds (which makes no system calls
//! itself; see [`crate::l3::fib::Advice`]).

/// Asks the kernel to back the memory at `span` (addresses of a table just allocated) with
/// transparent huge pages where it allows (THP in `madvise` or `always` mode). Run before the
/// table is first written, so that its pages fault in huge. Nothing happens where THP is off;
/// only the 2 MiB-aligned middle of `span` is advised.
pub fn advise_huge_pages(span: core::ops::Range<usize>) {
    const HUGE: usize = 2 << 20;
    let (start, end) = (span.start, span.end);
    let aligned = start.next_multiple_of(HUGE);
    if aligned >= end {
        return;
    }
    let len = (end - aligned) / HUGE * HUGE;
    if len == 0 {
        return;
    }
    // SAFETY: MADV_HUGEPAGE only changes how the kernel backs the pages of a range, never
    // their contents, whatever the range; its failure (no THP, nothing mapped there) is
    // harmless.
    let _ = unsafe { libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}
