//! Compiles the BPF programs with clang (through libbpf-cargo): bpf/NAME.bpf.c into
//! $OUT_DIR/NAME.bpf.o, which `io::NAME` embeds and loads with libbpf-rs (`xfwd` in `io::program::xdp`);
//! and makes $OUT_DIR/xfwd_abi.rs from bpf/xfwd_abi.h, what the XDP program and its loader
//! share: a constant for each `#define XFWD_*` whose value is a number, and `XdpCounter` from
//! `enum xfwd_counter`. A header this cannot read fails the build.

use std::env;
use std::fmt::Write as _;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    // <linux/bpf.h> pulls in <asm/types.h>, which Debian keeps in the multiarch folder of the
    // target (x86_64-linux-gnu, aarch64-linux-gnu, ...): derive it rather than assume x86.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("set by cargo");
    let env_abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-{}", if env_abi.is_empty() { "gnu" } else { &env_abi });

    let abi = manifest.join("../bpf/xfwd_abi.h");
    let text = std::fs::read_to_string(&abi).unwrap_or_else(|e| panic!("reading {}: {e}", abi.display()));
    let rust = abi_rust(&text).unwrap_or_else(|e| panic!("{}: {e}", abi.display()));
    std::fs::write(out_dir.join("xfwd_abi.rs"), rust).expect("writing xfwd_abi.rs");
    println!("cargo:rerun-if-changed={}", abi.display());

    for name in ["xfwd", "poll_time", "frame_gen", "refused", "fib_lookup"] {
        let src = manifest.join(format!("../bpf/{name}.bpf.c"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(out_dir.join(format!("{name}.bpf.o")))
            .clang_args(["-I", multiarch.as_str(), "-Wall", "-Werror"])
            .build()
            .unwrap_or_else(|e| panic!("compiling {}: {e:#}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
}

/// The value of a `#define` that is a number: decimal, hex, or `(A << B)`.
fn number(expr: &str) -> Option<u64> {
    let e = expr.trim().trim_start_matches('(').trim_end_matches(')').trim();
    let one = |t: &str| {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => t.parse().ok(),
        }
    };
    match e.split_once("<<") {
        Some((a, b)) => Some(one(a)? << one(b)?),
        None => one(e),
    }
}

/// The comment that follows a line's code, joined with its continuation lines (`*`-led) up to
/// its end: `(code, comment)`.
fn code_and_comment<'a>(lines: &mut impl Iterator<Item = &'a str>, line: &'a str) -> (&'a str, String) {
    let Some((code, rest)) = line.split_once("/*") else { return (line, String::new()) };
    let mut comment = rest.to_owned();
    while !comment.contains("*/") {
        let Some(next) = lines.next() else { break };
        let next = next.trim();
        // A continuation line's leading `*`, but not the `*/` that ends the comment.
        let next = if next.starts_with("*/") { next } else { next.strip_prefix('*').unwrap_or(next) };
        comment.push(' ');
        comment.push_str(next.trim());
    }
    let comment = comment.split("*/").next().unwrap_or("");
    (code, comment.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `PASS_NO_SOCKET` -> `PassNoSocket`.
fn camel(upper: &str) -> String {
    upper
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or_else(String::new, |f| f.to_string() + &c.as_str().to_lowercase())
        })
        .collect()
}

/// The Rust side of bpf/xfwd_abi.h.
fn abi_rust(header: &str) -> Result<String, String> {
    let mut out =
        String::from("// Made by dataplane/build.rs from bpf/xfwd_abi.h: change that file, not this one.\n\n");
    let mut lines = header.lines();
    let mut counters: Vec<(String, u64, String, String)> = Vec::new();
    let mut count = None;
    let mut in_enum = false;
    while let Some(line) = lines.next() {
        let (code, comment) = code_and_comment(&mut lines, line);
        let code = code.trim();
        if let Some(def) = code.strip_prefix("#define ") {
            let (name, value) = def.split_once(char::is_whitespace).unwrap_or((def, ""));
            if let (true, Some(v)) = (name.starts_with("XFWD_"), number(value)) {
                let doc = if comment.is_empty() { format!("`{name}`.") } else { format!("`{name}`: {comment}") };
                let _ = writeln!(out, "/// {doc}\npub const {name}: u32 = {v};");
            }
        } else if code.starts_with("enum xfwd_counter") {
            in_enum = true;
        } else if in_enum && code.starts_with('}') {
            in_enum = false;
        } else if in_enum && !code.is_empty() {
            let (name, value) =
                code.trim_end_matches(',').split_once('=').ok_or(format!("enum xfwd_counter: `{code}`"))?;
            let (name, value) = (name.trim(), number(value).ok_or(format!("enum xfwd_counter: `{code}`"))?);
            if name == "XFWD_NR_COUNTERS" {
                count = Some(value);
                continue;
            }
            let (word, what) =
                comment.split_once(": ").ok_or(format!("{name}: its comment must be `name: what it counts`"))?;
            if value != counters.len() as u64 {
                return Err(format!("{name} = {value}: the counters must be numbered 0, 1, 2, … in order"));
            }
            if counters.iter().any(|c| c.2 == word) {
                return Err(format!("{name}: the name `{word}` is taken"));
            }
            let variant = camel(name.strip_prefix("XFWD_").ok_or(format!("{name}: not XFWD_*"))?);
            counters.push((variant, value, word.to_owned(), what.to_owned()));
        }
    }
    if count != Some(counters.len() as u64) {
        return Err(format!("XFWD_NR_COUNTERS is {count:?}, {} counters are listed", counters.len()));
    }
    out.push_str("\n/// The program's per-port counters (`enum xfwd_counter`).\n");
    out.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\n#[repr(u32)]\npub enum XdpCounter {\n");
    for (variant, value, _, what) in &counters {
        let _ = writeln!(out, "    /// {}{}\n    {variant} = {value},", what[..1].to_uppercase(), &what[1..]);
    }
    out.push_str("}\n\nimpl XdpCounter {\n    /// Number of counters per port.\n");
    let _ = writeln!(out, "    pub const COUNT: usize = {};", counters.len());
    out.push_str("    /// All counters in slot order.\n    pub const ALL: [XdpCounter; XdpCounter::COUNT] = [\n");
    for (variant, ..) in &counters {
        let _ = writeln!(out, "        XdpCounter::{variant},");
    }
    out.push_str(
        "    ];\n\n    /// Stable short name.\n    pub const fn name(self) -> &'static str {\n        match self {\n",
    );
    for (variant, _, word, _) in &counters {
        let _ = writeln!(out, "            XdpCounter::{variant} => \"{word}\",");
    }
    out.push_str("        }\n    }\n}\n");
    Ok(out)
}
