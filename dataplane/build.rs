//! Compiles bpf/xfwd.bpf.c and bpf/poll_time.bpf.c with clang (through libbpf-cargo) into
//! $OUT_DIR/xfwd.bpf.o and $OUT_DIR/poll_time.bpf.o, which `io::xdp` and `io::poll_time` embed and
//! load with libbpf-rs.

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

    for name in ["xfwd", "poll_time"] {
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
