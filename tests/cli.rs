//! Command-line behaviour that needs no root: usage errors and their exit codes.

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
