//! Does scraping `/metrics` touch forwarding? On the namespace rig (root): `xfwd bridge` with
//! `--metrics` and its defaults, four TCP flows across it for each run, runs alternating
//! between a quiet endpoint and a storm on it — 100 clients each scraping once a second and a
//! slowloris connection sending a byte every 0.5 s — and the two sets compared by Student's t
//! (the bench's method). Also: how long the slowest scrape took under the storm.
//!
//! ```sh
//! cargo build --release && sudo target/release/examples/metrics_storm [RUNS] [SECONDS]
//! ```
//!
//! Prints figures only: nothing here passes or fails.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xfwd::bench::stats::{Comparison, Summary};
use xfwd::rig::{self, Rig};

fn xfwd_exe() -> String {
    std::env::var("XFWD").unwrap_or_else(|_| {
        let me = std::env::current_exe().expect("own path");
        me.parent().and_then(|d| d.parent()).expect("target dir").join("xfwd").display().to_string()
    })
}

/// Runs `f` on a thread inside network namespace `ns` (threads it starts stay there).
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("namespace file");
        // SAFETY: `file` is an open namespace file; setns changes only this thread's namespace.
        assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        f()
    })
}

/// 100 scraping clients and a slowloris until `stop`; returns (scrapes answered, slowest ms).
fn storm(ns: &str, port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, u64)> {
    in_netns(ns, move || {
        let (ok, slowest) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut threads: Vec<_> = (0..100u64)
            .map(|i| {
                let (stop, ok, slowest) = (Arc::clone(&stop), Arc::clone(&ok), Arc::clone(&slowest));
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(i * 10));
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: xfwd\r\n\r\n");
                            let mut out = String::new();
                            let _ = s.read_to_string(&mut out);
                            if out.starts_with("HTTP/1.1 200") {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        slowest.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
                    }
                })
            })
            .collect();
        let stop2 = Arc::clone(&stop);
        threads.push(std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return };
                while !stop2.load(Ordering::Relaxed) && s.write_all(b"a").is_ok() {
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }));
        for t in threads {
            let _ = t.join();
        }
        (ok.load(Ordering::Relaxed), slowest.load(Ordering::Relaxed))
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(5, |a| a.parse().expect("RUNS"));
    let secs: u32 = args.next().map_or(8, |a| a.parse().expect("SECONDS"));
    let r = Rig::bridge(1).expect("rig");
    let port = 9464;
    let addr = format!("127.0.0.1:{port}");
    let control = format!("/run/xfwd/metrics-storm-{}.sock", std::process::id());
    let exe = xfwd_exe();
    let mut x =
        r.start_xfwd(&exe, &["bridge", "eth4", "eth5", "--control", &control, "--metrics", &addr]).expect("xfwd");
    Rig::ping_until(&r.h1, rig::H2_ADDR, Duration::from_secs(5)).expect("ping");
    let (mut quiet, mut stormed) = (Vec::new(), Vec::new());
    for run in 0..2 * runs {
        let with_storm = run % 2 == 1;
        let stop = Arc::new(AtomicBool::new(false));
        let s = with_storm.then(|| storm(r.boxns.name(), port, Arc::clone(&stop)));
        if with_storm {
            std::thread::sleep(Duration::from_secs(1));
        }
        let t = rig::iperf3_tcp_streams(&r.h2, &r.h1, rig::H2_ADDR, 4, 1, 1, secs, 1).expect("iperf3");
        stop.store(true, Ordering::Relaxed);
        let gbps = t.flows_bps.iter().sum::<f64>() / 1e9;
        match s {
            Some(s) => {
                let (ok, slowest) = s.join().expect("storm");
                println!("run {}: storm: {gbps:.2} Gb/s; {ok} scrapes answered, slowest {slowest} ms", run / 2 + 1);
                stormed.push(gbps);
            }
            None => {
                println!("run {}: quiet: {gbps:.2} Gb/s", run / 2 + 1);
                quiet.push(gbps);
            }
        }
    }
    let (q, s) = (Summary::of(&quiet).expect("runs"), Summary::of(&stormed).expect("runs"));
    println!("quiet: median {:.2} Gb/s, mean {:.2}, sd {:.2}", q.median, q.mean, q.stddev);
    println!("storm: median {:.2} Gb/s, mean {:.2}, sd {:.2}", s.median, s.mean, s.stddev);
    if let Some(c) = Comparison::of(&q, &s, 95.0) {
        println!("storm vs quiet: {}", c.sentence());
    }
    let _ = x.stop(libc::SIGTERM, Duration::from_secs(10));
}
