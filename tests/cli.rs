//! Command-line behaviour that needs no root: usage errors and their exit codes.

mod common;

use std::process::Command;

const XFWD: &str = env!("CARGO_BIN_EXE_xfwd");

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(XFWD).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_missing_port_is_one_line_and_exit_2() {
    let (code, err) = run(&["bridge", "xfwd-nope0", "xfwd-nope1", "--control", "/tmp/xfwd-cli-test.sock"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("xfwd: error: xfwd-nope0: no such interface"), "{err}");
}

#[test]
fn one_port_is_not_a_bridge() {
    let (code, err) = run(&["bridge", "lo"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn bad_values_name_what_is_expected() {
    let (code, err) = run(&["bridge", "a", "b", "--stats", "often"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("500ms"), "{err}");
    let (code, err) = run(&["bridge", "a", "b", "--cores", "x"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("0-3"), "{err}");
}

#[test]
fn show_without_a_running_xfwd_says_so() {
    let (code, err) = run(&["show", "stats", "--control", "/tmp/xfwd-no-such-control.sock"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no xfwd answers here"), "{err}");
}

fn write(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("xfwd-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn router_check_validates_without_root_or_side_effects() {
    // `lo` exists in every network namespace, and its 65536-byte MTU is one start-up refuses:
    // the check says so as start-up would. (A file whose ports pass: tests/bridge.rs, a rig.)
    let good = write("good.toml", "[[interface]]\nname = \"lo\"\naddresses = [\"198.18.99.1/24\"]\n");
    let (code, err) = run(&["router", "--config", &good, "--check"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("lo: MTU 65536 is larger than a UMEM frame can carry (1774)"), "{err}");
    let out = Command::new(XFWD).args(["router", "--config", &good, "--check", "--parse-only"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // An interface missing here is reported at its place in the file.
    let missing = write("missing.toml", "[[interface]]\nname = \"xfwd-nope9\"\naddresses = [\"198.18.99.1/24\"]\n");
    let (code, err) = run(&["router", "--config", &missing, "--check"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.trim(), format!("xfwd: error: {missing}:2:8: interface xfwd-nope9 does not exist in this network namespace (see `ip link show`); --check --parse-only checks the file alone"));
    // ... which --parse-only does not look for, but the file's errors it still finds.
    let out = Command::new(XFWD).args(["router", "--config", &missing, "--check", "--parse-only"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: 1 interface(s) (not looked for: --parse-only)"));
    let bad_option = write(
        "bad-option.toml",
        "[workers]\nqueues = 0\n[[interface]]\nname = \"xfwd-nope9\"\naddresses = [\"198.18.99.1/24\"]\n",
    );
    let (code, err) = run(&["router", "--config", &bad_option, "--check", "--parse-only"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with(&format!("xfwd: error: {bad_option}:2:")), "{err}");

    // A semantic error: file, line, column, and the fix.
    let bad = write(
        "bad.toml",
        "[[interface]]\nname = \"lo\"\naddresses = [\"198.18.99.1/24\"]\n\n[[route]]\nprefix = \"10.1.0.0/8\"\nvia = \"198.18.99.2\"\n",
    );
    let (code, err) = run(&["router", "--config", &bad, "--check"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        format!("xfwd: error: {bad}:6:10: route prefix 10.1.0.0/8 has host bits set; did you mean 10.0.0.0/8?")
    );

    let (code, err) = run(&["router", "--config", "/nonexistent/router.toml", "--check"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent/router.toml: cannot read"), "{err}");
}

/// A pipe whose reading end is already closed: every write into it fails (EPIPE, SIGPIPE).
fn closed_pipe() -> std::fs::File {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) writes two descriptors into a two-int array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe: {}", std::io::Error::last_os_error());
    // SAFETY: the reading end is ours and used nowhere else.
    unsafe { libc::close(fds[0]) };
    // SAFETY: the writing end is an open descriptor of ours; the File takes it over.
    unsafe { std::fs::File::from_raw_fd(fds[1]) }
}

#[test]
fn a_command_that_prints_ends_quietly_on_a_closed_pipe() {
    use std::os::unix::process::ExitStatusExt;
    // `xfwd doctor --json | head -1`, with head gone before the first line: no panic (exit 101),
    // no message; SIGPIPE ends it as it ends `ip` or `cat`.
    let out = Command::new(XFWD).args(["doctor", "lo", "--json"]).stdout(closed_pipe()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}: {err}", out.status);
    assert!(err.is_empty(), "{err}");
}

#[test]
fn a_mistyped_port_gets_the_name_it_is_a_slip_from() {
    // Every namespace has `lo`: `ol` is two letters swapped.
    let (code, err) = run(&["bridge", "ol", "xfwd-nope1", "--control", "/tmp/xfwd-cli-test.sock"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("xfwd: error: ol: no such interface in this network namespace; did you mean lo?"), "{err}");
}

/// The package's man pages and completions: a page for each command that does something, under
/// the name `man` finds it by (`man xfwd-show-stats`), and completions that know the commands'
/// options.
#[test]
fn generate_writes_a_man_page_per_command_and_completions_for_three_shells() {
    let dir = common::TempDir::new("cli-generate");
    let man = dir.join("man");
    let out = Command::new(XFWD).args(["generate", "man", man.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for page in ["xfwd", "xfwd-bridge", "xfwd-router", "xfwd-show-stats", "xfwd-kernel-undo-router", "xfwd-doctor"] {
        let text = std::fs::read_to_string(man.join(format!("{page}.1"))).unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(text.contains(&format!(".TH {page} 1")), "{page}.1: {}", &text[..300.min(text.len())]);
    }
    let router = std::fs::read_to_string(man.join("xfwd-router.1")).unwrap();
    assert!(router.contains("parse\\-only") && router.contains("xfwd router"), "{router}");
    assert!(!man.join("xfwd-generate.1").exists(), "the packaging command has no page of its own");
    for page in ["xfwd", "xfwd-show", "xfwd-kernel"] {
        let text = std::fs::read_to_string(man.join(format!("{page}.1"))).unwrap();
        assert!(!text.contains("help(1)"), "{page}.1 names a help page that does not exist");
    }

    let comp = dir.join("completions");
    let out = Command::new(XFWD).args(["generate", "completions", comp.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for file in ["xfwd.bash", "_xfwd", "xfwd.fish"] {
        let text = std::fs::read_to_string(comp.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains("parse-only") && text.contains("neighbors"), "{file}");
    }
}

/// Under systemd's journal (`$JOURNAL_STREAM` naming the very stream stderr is), each line
/// carries its priority (`<3>` for an error), so `journalctl -p err` finds it; elsewhere, even
/// with the variable set for another stream, the line is as written.
#[test]
fn lines_to_the_journal_carry_their_priority() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::MetadataExt;
    let run_with = |journal: &dyn Fn(&std::fs::Metadata) -> String| -> String {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) writes two descriptors into a two-int array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are ours, each taken over by one File.
        let (mut read, write) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
        let stream = journal(&write.metadata().unwrap());
        let mut child = Command::new(XFWD)
            .args(["bridge", "xfwd-nope0", "xfwd-nope1", "--control", "/tmp/xfwd-cli-journal.sock"])
            .env("JOURNAL_STREAM", stream)
            .stderr(write)
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let mut err = String::new();
        read.read_to_string(&mut err).unwrap();
        err
    };
    let err = run_with(&|m| format!("{}:{}", m.dev(), m.ino()));
    assert!(err.starts_with("<3>xfwd: error: xfwd-nope0: no such interface"), "{err}");
    let err = run_with(&|m| format!("{}:{}", m.dev(), m.ino() + 1));
    assert!(err.starts_with("xfwd: error: xfwd-nope0"), "{err}");
}
