//! The system calls several layers make the same way (the frame path's sockets, the resolver's
//! packet socket, netlink).

use std::os::fd::RawFd;

/// `setsockopt(fd, level, name, &value)`, with `value`'s own size.
pub(crate) fn set_opt<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: T) -> std::io::Result<()> {
    // SAFETY: `value` is a live, initialised T for the call and its exact size is passed; the
    // kernel copies it.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (&value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
