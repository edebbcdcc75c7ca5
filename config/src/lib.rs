//! xfwd's configuration: the router's TOML file ([`router`]) and the duration and core-list
//! values the command line accepts, parsed with errors that say what is expected. (The poll,
//! XDP and zero-copy modes are the data plane's own, `xfwd_dataplane::io::options`.)

use std::time::Duration;

pub mod router;

pub use router::{ConfigError, RouterConfig};

/// Why a value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not a duration.
    #[error("`{0}` is not a duration: write a number and a unit, such as 500ms, 1s, 5m or 2h")]
    Duration(String),
    /// Not a core list.
    #[error("`{0}` is not a core list: write core numbers and ranges, such as 0,2 or 0-3")]
    Cores(String),
}

/// Parses a duration such as `500ms`, `1s`, `1.5s`, `5m`, `2h` (a bare number means seconds).
pub fn parse_duration(text: &str) -> Result<Duration, ValueError> {
    let err = || ValueError::Duration(text.to_owned());
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| err())?;
    let scale = match unit.trim() {
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(err()),
    };
    let secs = value * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a core list such as `0,2` or `0-3` or `1,4-5`, keeping the order given.
pub fn parse_cores(text: &str) -> Result<Vec<usize>, ValueError> {
    let err = || ValueError::Cores(text.to_owned());
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| err())?;
                let b: usize = b.trim().parse().map_err(|_| err())?;
                if b < a || b - a > 4096 {
                    return Err(err());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| err())?),
        }
    }
    if out.is_empty() {
        return Err(err());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("300").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        for bad in ["", "s", "1x", "-1s", "1..2s", "ms500"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("1x").unwrap_err().to_string().contains("500ms"));
    }

    #[test]
    fn core_lists() {
        assert_eq!(parse_cores("0").unwrap(), vec![0]);
        assert_eq!(parse_cores("1,0").unwrap(), vec![1, 0]);
        assert_eq!(parse_cores("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cores("1, 4-5").unwrap(), vec![1, 4, 5]);
        for bad in ["", "a", "3-1", "1,,2", "-1"] {
            assert!(parse_cores(bad).is_err(), "{bad}");
        }
    }
}
