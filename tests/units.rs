//! The systemd units of the package (packaging/systemd): systemd accepts them, and what they
//! grant (a user of its own, the ambient capabilities, the limits) is enough for xfwd to start,
//! tell the manager it is ready and forward. systemd is not PID 1 on the test machines: the
//! unit's credentials are applied by hand (setpriv, prlimit), its manager is a datagram socket.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::Command;

use common::{root_or_skip, serial, XFWD};
use xfwd::rig::Rig;

const UNITS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/systemd");
const RIG_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples/rig-router.toml");
/// The user the test runs xfwd as: nobody, as far from root as a user gets.
const NOBODY: u32 = 65534;

fn unit(name: &str) -> String {
    std::fs::read_to_string(format!("{UNITS}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The value of `key=` in a unit (the last one, as systemd reads a single-valued key).
fn value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .unwrap_or_else(|| panic!("no {key}="))
}

/// A folder of the test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("xfwd-units-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    let dir = Dir::new("verify");
    for name in ["xfwd-router@.service", "xfwd-bridge@.service"] {
        // The binary where the package puts it is not here: the one under test stands in.
        let text = unit(name).replace("/usr/bin/xfwd", XFWD);
        let path = dir.0.join(name);
        std::fs::write(&path, text).unwrap();
        let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && said.trim().is_empty(), "{name}: {said}");
    }
}

/// The router unit's credentials, as systemd would apply them: a uid that is not root, the
/// ambient capabilities and the bounding set it lists; xfwd checks its file, starts, says
/// READY=1, routes a ping, and runs its workers real-time. The unit's LimitMEMLOCK and
/// LimitRTPRIO are not applied: raising a hard limit takes CAP_SYS_RESOURCE, which the test
/// machines' root lacks; the capabilities stand for them here (IPC_LOCK pins the UMEM whatever
/// the limit, SYS_NICE allows SCHED_FIFO).
#[test]
fn the_router_unit_credentials_are_enough_to_start_and_forward() {
    if !root_or_skip("the_router_unit_credentials_are_enough_to_start_and_forward") {
        return;
    }
    let _g = serial();
    let text = unit("xfwd-router@.service");
    assert_eq!(value(&text, "Type"), "notify");
    assert_eq!(value(&text, "DynamicUser"), "yes");
    let caps: Vec<String> = value(&text, "AmbientCapabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert_eq!(value(&text, "CapabilityBoundingSet"), value(&text, "AmbientCapabilities"));
    let caps = format!("-all,{}", caps.join(","));
    assert_eq!((value(&text, "LimitMEMLOCK"), value(&text, "LimitRTPRIO")), ("infinity", "99"));

    let r = Rig::router(1).unwrap();
    let dir = Dir::new("router");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.0.join("rig.toml");
    std::fs::copy(RIG_CONFIG, &config).unwrap();
    // RuntimeDirectory=: a folder the unit's user owns, for its control socket.
    let run = dir.0.join("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(NOBODY), Some(NOBODY)).unwrap();
    let control = run.join("xfwd.sock");
    let sock = dir.0.join("notify");
    let manager = UnixDatagram::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    manager.set_read_timeout(Some(common::EVENTUALLY)).unwrap();

    let nobody = NOBODY.to_string();
    let wrap = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        all.extend(
            [
                "--reuid",
                &nobody,
                "--regid",
                &nobody,
                "--clear-groups",
                "--inh-caps",
                &caps,
                "--ambient-caps",
                &caps,
                "--bounding-set",
                &caps,
                XFWD,
            ]
            .map(String::from),
        );
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    let cfg = config.to_str().unwrap();
    // ExecStartPre=
    let check = wrap(&["router", "--config", cfg, "--check"]);
    let out = r.boxns.command("setpriv").args(&check).output().unwrap();
    assert!(out.status.success(), "the check: {}", String::from_utf8_lossy(&out.stderr));
    // ExecStart=
    let start = wrap(&["router", "--config", cfg, "--control", control.to_str().unwrap()]);
    let args: Vec<&str> = start.iter().map(String::as_str).collect();
    let mut x = r.spawn_xfwd("setpriv", &args, &[("NOTIFY_SOCKET", sock.to_str().unwrap())]).unwrap();
    let mut buf = [0u8; 512];
    let n = manager.recv(&mut buf).unwrap_or_else(|e| {
        x.collect();
        panic!("no READY=1 ({e}): {:#?}", x.seen)
    });
    assert!(buf[..n].starts_with(b"READY=1\n"), "{}", String::from_utf8_lossy(&buf[..n]));
    x.wait_ready().unwrap();
    // Every capability dropped, but the one this kernel needs for counter reads, if any.
    let dropped = x.seen.iter().find(|l| l.starts_with("xfwd: privileges dropped: ")).cloned().unwrap_or_default();
    let kept = match xfwd::privs::keep_for_map_reads_here() {
        None => "no capabilities left".to_owned(),
        Some(c) => format!("kept only {c} ("),
    };
    assert!(dropped.contains(&kept) && dropped.ends_with(&format!("running as uid {NOBODY}")), "{dropped}");
    assert!(x.seen.iter().any(|l| l.starts_with("xfwd: workers under SCHED_FIFO")), "{:#?}", x.seen);
    Rig::ping_until(&r.h2, "198.18.10.1", common::PATH_UP).unwrap();
    common::stop_clean(&mut x);
}

/// The examples the package puts in /etc/xfwd pass the check their units run first (the file
/// alone: the ports are not this machine's).
#[test]
fn the_packaged_examples_are_valid() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/etc/xfwd");
    for (mode, file) in [("router", "example.toml"), ("bridge", "example.bridge.toml")] {
        let out = Command::new(XFWD)
            .args([mode, "--config", &format!("{examples}/{file}"), "--check", "--parse-only"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // The units read them from where the package puts them.
    assert!(unit("xfwd-bridge@.service").contains("--config /etc/xfwd/%i.bridge.toml --check"));
    assert!(unit("xfwd-router@.service").contains("--config /etc/xfwd/%i.toml --check"));
}
