//! Lines for whoever reads xfwd's output: under systemd's journal, each line on standard
//! error carries its priority as a `<N>` prefix (sd-daemon(3): `<3>` error, `<4>` warning,
//! `<6>` info), which the journal turns into the entry's priority; elsewhere, the lines are
//! as written, and the periodic `--stats` lines carry a timestamp (the journal stamps its own).

use std::io::Write as _;
use std::os::unix::fs::MetadataExt;

/// How much a line matters, as syslog(3) numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `xfwd: error: …`
    Error = 3,
    /// `xfwd: warning: …`
    Warning = 4,
    /// Everything else.
    Info = 6,
}

/// A line's level, by the words xfwd starts it with.
pub fn level_of(line: &str) -> Level {
    if line.starts_with("xfwd: error:") {
        Level::Error
    } else if line.starts_with("xfwd: warning:") {
        Level::Warning
    } else {
        Level::Info
    }
}

/// Whether `fd` is the stream systemd's journal gave this process: `$JOURNAL_STREAM` names its
/// device and inode (`DEV:INO`), so a redirect by hand (`2>file`) is not taken for the journal.
pub fn is_journal(journal_stream: Option<&str>, fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else { return false };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else { return false };
    let Ok(file) = fd.try_clone_to_owned().map(std::fs::File::from) else { return false };
    file.metadata().is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

fn stderr_is_journal() -> bool {
    static IS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IS.get_or_init(|| {
        use std::os::fd::AsFd;
        is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref(), std::io::stderr().as_fd())
    })
}

fn stdout_is_journal() -> bool {
    static IS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IS.get_or_init(|| {
        use std::os::fd::AsFd;
        is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref(), std::io::stdout().as_fd())
    })
}

/// Writes `line` on standard error, with its priority when that is the journal.
pub fn stderr_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ =
        if stderr_is_journal() { writeln!(err, "<{}>{line}", level_of(line) as u8) } else { writeln!(err, "{line}") };
}

/// The time a `--stats` line is stamped with, where the journal does not stamp it: UTC,
/// RFC 3339 to the millisecond (`2026-12-06T07:48:00.123Z `); empty under the journal.
pub fn stamp() -> String {
    if stdout_is_journal() {
        return String::new();
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{} ", rfc3339(now))
}

/// `since_epoch` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(since_epoch: std::time::Duration) -> String {
    let secs = since_epoch.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since_epoch.subsec_millis()
    )
}

/// `eprintln!` for xfwd's own lines: the journal gets each with its priority.
#[macro_export]
macro_rules! elog {
    ($($arg:tt)*) => {
        $crate::log::stderr_line(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn a_line_is_ranked_by_its_first_words() {
        assert_eq!(level_of("xfwd: error: a worker stopped"), Level::Error);
        assert_eq!(level_of("xfwd: warning: eth4: link down"), Level::Warning);
        assert_eq!(level_of("xfwd: eth4: link up; forwarding again"), Level::Info);
    }

    #[test]
    fn the_journal_is_known_by_its_device_and_inode() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let m = f.metadata().unwrap();
        let it = format!("{}:{}", m.dev(), m.ino());
        assert!(is_journal(Some(&it), f.as_fd()));
        assert!(!is_journal(Some(&format!("{}:{}", m.dev(), m.ino() + 1)), f.as_fd()));
        assert!(!is_journal(None, f.as_fd()));
        assert!(!is_journal(Some("garbage"), f.as_fd()));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        // 2026-12-06 07:48:00.123 UTC; a leap day; the end of a century year.
        assert_eq!(rfc3339(Duration::from_millis(1_796_543_280_123)), "2026-12-06T07:48:00.123Z");
        assert_eq!(rfc3339(Duration::from_secs(1_709_164_800)), "2024-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(Duration::from_secs(978_307_199)), "2000-12-31T23:59:59.000Z");
    }
}
