//! Compiles the BPF programs with clang (through libbpf-cargo): bpf/NAME.bpf.c into
//! $OUT_DIR/NAME.bpf.o, which `io::NAME` embeds and loads with libbpf-rs (`xfwd` in `io::xdp`).

use std::env;
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
