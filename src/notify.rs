//! The service manager's readiness protocol (sd_notify(3)): one datagram to `$NOTIFY_SOCKET` per
//! change of state, so that a `Type=notify` unit knows when xfwd forwards, when a reload is done
//! and when it is stopping. xfwd sends `READY=1` when it prints `xfwd: ready`,
//! `RELOADING=1` (with `MONOTONIC_USEC`) and then `READY=1` around a SIGHUP, and `STOPPING=1`
//! on the way out, each with a `STATUS=` line that `systemctl status` shows. Under a unit with
//! `WatchdogSec=` (`$WATCHDOG_USEC`), xfwd sends `WATCHDOG=1` every quarter of it while every
//! long-running thread goes round its loop, and stops when one has not for half of it: the
//! service manager then restarts a stuck xfwd ([`stuck`]). Without `NOTIFY_SOCKET` (not under
//! systemd) every call does nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Where a service manager listens for the states, connected at start (before privileges are
/// dropped: the socket may be writable by root only).
#[derive(Debug)]
pub struct Notifier {
    sock: Option<UnixDatagram>,
    /// `$WATCHDOG_USEC`, when the manager asks this process for keep-alives.
    watchdog: Option<std::time::Duration>,
    /// The first failed send was said; later ones are not (a manager gone is said once).
    failed: std::cell::Cell<bool>,
}

/// The address in `$NOTIFY_SOCKET`: a path, or `@name` for an abstract socket (which lives in
/// the network namespace of the one who bound it).
fn address(value: &str) -> io::Result<SocketAddr> {
    if let Some(name) = value.strip_prefix('@') {
        SocketAddr::from_abstract_name(name.as_bytes())
    } else if value.starts_with('/') {
        SocketAddr::from_pathname(value)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NOTIFY_SOCKET={value}: xfwd takes an absolute path or @name (an abstract socket)"),
        ))
    }
}

impl Notifier {
    /// Connects to `$NOTIFY_SOCKET` if it is set; a notifier that does nothing otherwise, or
    /// when the socket cannot be reached (said once: xfwd forwards all the same, as a program
    /// using sd_notify(3) does when it fails).
    pub fn from_env() -> Notifier {
        let connect = |v: &str| -> io::Result<UnixDatagram> {
            let sock = UnixDatagram::unbound()?;
            sock.connect_addr(&address(v)?)?;
            Ok(sock)
        };
        let sock = std::env::var_os("NOTIFY_SOCKET").and_then(|v| {
            let v = v.to_string_lossy();
            connect(&v)
                .map_err(|e| {
                    crate::elog!(
                        "xfwd: warning: NOTIFY_SOCKET={v}: {e}; the service manager will not hear when xfwd is ready (a unit of Type=notify then times out: check NotifyAccess= and the socket)"
                    )
                })
                .ok()
        });
        // For this process (`$WATCHDOG_PID`, where set, names it), and only with a socket.
        let ours = std::env::var("WATCHDOG_PID").map_or(true, |p| p.trim() == std::process::id().to_string());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&us| us > 0 && ours && sock.is_some())
            .map(std::time::Duration::from_micros);
        Notifier { sock, watchdog, failed: std::cell::Cell::new(false) }
    }

    /// The watchdog's period (`WatchdogSec=`), if the service manager keeps one for xfwd.
    pub fn watchdog_period(&self) -> Option<std::time::Duration> {
        self.watchdog
    }

    /// Alive: `WATCHDOG=1`.
    pub fn watchdog(&self) {
        self.send("WATCHDOG=1");
    }

    /// A line for `systemctl status`: `STATUS=`.
    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }

    /// Forwarding: `READY=1`.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// A reload begins: `RELOADING=1` with the time it began on CLOCK_MONOTONIC, as systemd
    /// asks; [`Notifier::ready`] ends it.
    pub fn reloading(&self) {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading", monotonic_usec()));
    }

    /// On the way out: `STOPPING=1`.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping");
    }

    fn send(&self, msg: &str) {
        let Some(sock) = &self.sock else { return };
        if let Err(e) = sock.send(msg.as_bytes()) {
            if !self.failed.replace(true) {
                crate::elog!("xfwd: warning: telling the service manager ({}) failed: {e}", first_line(msg));
            }
        }
    }
}

/// The threads whose loop last went round more than `limit` ago: stuck. (A heartbeat starts
/// beating when it is made, just before its thread: one that never goes round is stuck from
/// `limit` after; `None`, from a report without the beat, is not judged.)
pub fn stuck(threads: &[xfwd_dataplane::io::view::ThreadBeat], limit: std::time::Duration) -> Vec<(String, u64)> {
    let limit = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    threads.iter().filter_map(|t| t.age_ms.filter(|&ms| ms > limit).map(|ms| (t.name.clone(), ms))).collect()
}

/// STATUS= takes one line.
fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd compares RELOADING=1 against.
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_whose_loop_has_not_gone_round_for_longer_than_the_limit_is_stuck() {
        use xfwd_dataplane::io::view::ThreadBeat;
        let t = |name: &str, age_ms| ThreadBeat { name: name.into(), age_ms };
        let beats = [t("xfwd-q0", Some(250)), t("xfwd-arp", Some(31_000)), t("xfwd-kernel", None)];
        let limit = std::time::Duration::from_secs(30);
        assert_eq!(stuck(&beats, limit), vec![("xfwd-arp".to_owned(), 31_000)]);
        assert!(stuck(&beats[..1], limit).is_empty());
        assert!(stuck(&[t("xfwd-q0", Some(30_000))], limit).is_empty(), "at the limit: not yet");
    }

    #[test]
    fn addresses_a_path_or_an_abstract_name_and_refuses_the_rest() {
        assert_eq!(
            address("/run/systemd/notify").unwrap().as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        assert_eq!(address("@xfwd-test").unwrap().as_abstract_name(), Some(&b"xfwd-test"[..]));
        let e = address("run/notify").unwrap_err();
        assert!(e.to_string().contains("absolute path or @name"), "{e}");
        assert!(address("vsock:2:1234").is_err());
    }

    #[test]
    fn sends_each_state_as_one_datagram() {
        let dir = std::env::temp_dir().join(format!("xfwd-notify-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let manager = UnixDatagram::bind(&path).unwrap();
        let sock = UnixDatagram::unbound().unwrap();
        sock.connect(&path).unwrap();
        let n = Notifier { sock: Some(sock), watchdog: None, failed: std::cell::Cell::new(false) };
        let mut buf = [0u8; 512];
        let mut next = || {
            let len = manager.recv(&mut buf).unwrap();
            String::from_utf8(buf[..len].to_vec()).unwrap()
        };
        n.ready("router r.toml\n2 ports");
        assert_eq!(next(), "READY=1\nSTATUS=router r.toml 2 ports");
        let before = monotonic_usec();
        n.reloading();
        let msg = next();
        let usec: u64 =
            msg.lines().find_map(|l| l.strip_prefix("MONOTONIC_USEC=")).expect("MONOTONIC_USEC").parse().unwrap();
        assert!(msg.starts_with("RELOADING=1\n") && usec >= before && usec <= monotonic_usec(), "{msg}");
        n.stopping();
        assert_eq!(next(), "STOPPING=1\nSTATUS=stopping");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
