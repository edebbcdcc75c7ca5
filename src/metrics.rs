//! `--metrics ADDR:PORT`: every counter xfwd has, in the Prometheus text format, on `/metrics`.
//!
//! The families are built from one [`Report`] per scrape — the snapshot `xfwd show stats`
//! prints — and encoded by the `prometheus` crate's text encoder (format 0.0.4, which
//! `promtool` and every scraper read). Names follow Prometheus' conventions: `xfwd_` prefix,
//! base units (seconds, bytes), `_total` on counters, one family per quantity with labels for
//! its parts (`xfwd_port_rx_frames_total{port="eth4",queue="0"}`).
//!
//! The server is one thread (normal priority, started after the workers) with non-blocking
//! sockets under poll(2), so that no client can hold it: at most [`MAX_CLIENTS`] connections
//! are open at once (one more is accepted and closed at once, counted), a request must arrive
//! whole within [`REQUEST_TIMEOUT`] and in at most [`MAX_REQUEST`] bytes, an answer must be
//! taken within [`RESPONSE_TIMEOUT`]; every connection is closed after its answer. Forwarding
//! never waits for it: the snapshot reads the workers' counters without a lock.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use xfwd_dataplane::io::program::fast::FastReport;
#[cfg(test)]
use xfwd_dataplane::io::view::ThreadBeat;
use xfwd_dataplane::io::{LiveView, PortReport, Report};
use xfwd_dataplane::load::{self, LoopTotals};
use xfwd_dataplane::routes::kernel::SyncReport;
use xfwd_dataplane::stats::{
    sojourn_floor, FrameSnapshot, PortSnapshot, QueueSnapshot, PORT_COUNTERS, SOJOURN_BUCKETS, WORKER_COUNTERS,
    XSK_COUNTERS,
};

/// Connections served at once; more are closed as they arrive.
pub const MAX_CLIENTS: usize = 64;
/// Time a client has to send its whole request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client has to take the whole answer.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest request (request line and headers) read.
pub const MAX_REQUEST: usize = 8192;

/// The routes each table of a running router shows, by family (`None` for a bridge).
pub type RouteCounts = Option<(usize, usize)>;

/// Metric families under construction, by name, in the order they were first seen.
#[derive(Default)]
struct Families {
    order: Vec<String>,
    by_name: HashMap<String, MetricFamily>,
}

impl Families {
    fn family(&mut self, name: &str, help: &str, kind: MetricType) -> &mut MetricFamily {
        if !self.by_name.contains_key(name) {
            let mut f = MetricFamily::default();
            f.set_name(name.to_owned());
            f.set_help(help.to_owned());
            f.set_field_type(kind);
            self.order.push(name.to_owned());
            self.by_name.insert(name.to_owned(), f);
        }
        self.by_name.get_mut(name).expect("inserted above")
    }

    fn push(&mut self, name: &str, help: &str, kind: MetricType, labels: &[(&str, &str)], m: Metric) {
        let mut m = m;
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut l = LabelPair::default();
                    l.set_name((*k).to_owned());
                    l.set_value((*v).to_owned());
                    l
                })
                .collect(),
        );
        self.family(name, help, kind).mut_metric().push(m);
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        let mut c = Counter::default();
        c.set_value(v);
        let mut m = Metric::default();
        m.set_counter(c);
        self.push(name, help, MetricType::COUNTER, labels, m);
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], v: f64) {
        let mut g = Gauge::default();
        g.set_value(v);
        let mut m = Metric::default();
        m.set_gauge(g);
        self.push(name, help, MetricType::GAUGE, labels, m);
    }

    /// A histogram from (upper bound, count in that bucket) pairs, the last bucket open-ended.
    fn histogram(&mut self, name: &str, help: &str, labels: &[(&str, &str)], buckets: &[(f64, u64)], sum: f64) {
        let mut h = Histogram::default();
        let mut seen = 0;
        let mut out = Vec::new();
        for (le, n) in buckets {
            seen += n;
            if le.is_finite() {
                let mut b = Bucket::default();
                b.set_upper_bound(*le);
                b.set_cumulative_count(seen);
                out.push(b);
            }
        }
        h.set_bucket(out);
        h.set_sample_count(seen);
        h.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_histogram(h);
        self.push(name, help, MetricType::HISTOGRAM, labels, m);
    }

    fn into_vec(mut self) -> Vec<MetricFamily> {
        self.order.iter().filter_map(|n| self.by_name.remove(n)).collect()
    }
}

/// A name's characters made fit for a metric name (`requests-sent` → `requests_sent`).
fn metric_word(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

const NS: f64 = 1e-9;

/// How a series' value is read from a `T`.
type Value<T> = fn(&T) -> u64;

/// A family with one series per row of a table: its name, its help text, and its value.
type Row<T> = (&'static str, &'static str, Value<T>);

/// The places of a UMEM's frames in `xfwd_umem_frames`: the `place` label and its count.
const UMEM_PLACES: &[(&str, Value<FrameSnapshot>)] = &[
    ("free", |fr| fr.free),
    ("queued", |fr| fr.queued),
    ("fill_ring", |fr| fr.fill_ring),
    ("rx_ring", |fr| fr.rx_ring),
    ("rx_kernel", |fr| fr.rx_kernel),
    ("tx_ring", |fr| fr.tx_ring),
    ("completion_ring", |fr| fr.completion),
    ("tx_kernel", |fr| fr.tx_kernel),
];

/// What mirroring the kernel's routes counts: the word in `xfwd_kernel_<word>_total`, the
/// help text after "Kernel routes: ", and the count.
const KERNEL_COUNTERS: &[Row<SyncReport>] = &[
    ("notifications", "notifications read", |k| k.messages),
    ("updates", "table switches for changes", |k| k.updates),
    ("resyncs", "full resynchronisations", |k| k.resyncs),
    ("overruns", "resynchronisations after an overrun", |k| k.overruns),
    ("undecoded", "resynchronisations after a notification that could not be decoded", |k| k.undecoded),
    ("dumps_interrupted", "interrupted dumps read again", |k| k.dumps_interrupted),
    ("build_errors", "failed builds", |k| k.build_errors),
    ("full_builds", "whole builds", |k| k.full_builds),
    ("copies", "publications that copied the live tables", |k| k.copies),
    ("local_map_errors", "addresses the XDP map refused", |k| k.local_map_errors),
    ("rules_not_followed", "policy rules added since start that xfwd does not follow", |k| k.rules_not_followed),
];

/// What keeping the XDP path's maps counts: the word in `xfwd_xdp_path_<word>_total`, the
/// help text after "XDP path: ", and the count.
const XDP_PATH_COUNTERS: &[Row<FastReport>] = &[
    ("swaps", "route tables swapped in whole", |x| x.swaps),
    ("route_writes", "routes written or removed one by one", |x| x.route_writes),
    ("neighbor_writes", "neighbours (router) or stations (bridge) written or removed", |x| x.neighbor_writes),
    ("stations_refreshed", "bridge stations refreshed in the workers' table from the program's forwarding", |x| {
        x.refreshed
    }),
    ("errors", "map writes that failed", |x| x.errors),
];

/// The process's own figures, as Prometheus's client libraries name them (`process_*`), read
/// from /proc at each scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Process {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Resident memory, bytes.
    pub resident_bytes: u64,
    /// Virtual memory, bytes.
    pub virtual_bytes: u64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Threads.
    pub threads: u64,
    /// Open file descriptors (`None`: /proc/self/fd unreadable).
    pub open_fds: Option<u64>,
    /// The limit on them (RLIMIT_NOFILE, soft).
    pub max_fds: Option<u64>,
}

impl Process {
    /// From `/proc/self/stat`'s text, the boot time (`btime` of /proc/stat), the clock ticks
    /// per second and the page size; `None` if the text is not a stat line.
    pub fn parse(stat: &str, btime: u64, ticks: u64, page: u64) -> Option<Process> {
        // The command name may hold spaces and parentheses: the fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3 (state) of proc(5): utime 14, stime 15, num_threads 20, starttime
        // 22, vsize 23, rss 24.
        let n = |field: usize| f.get(field - 3)?.parse::<u64>().ok();
        let ticks = ticks.max(1) as f64;
        Some(Process {
            cpu_seconds: (n(14)? + n(15)?) as f64 / ticks,
            resident_bytes: n(24)? * page,
            virtual_bytes: n(23)?,
            start_time_seconds: btime as f64 + n(22)? as f64 / ticks,
            threads: n(20)?,
            open_fds: None,
            max_fds: None,
        })
    }

    /// This process now; `None` where /proc cannot be read.
    pub fn read() -> Option<Process> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let btime = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        // SAFETY: sysconf only reads configuration values.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let mut p = Process::parse(&stat, btime, u64::try_from(ticks).ok()?, u64::try_from(page).ok()?)?;
        p.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64);
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes one rlimit into the valid `lim`.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            p.max_fds = Some(lim.rlim_cur);
        }
        Some(p)
    }
}

/// Every counter and gauge of `r` as metric families, with the process's own (`process`).
pub fn families(r: &Report, routes: RouteCounts, process: Option<&Process>) -> Vec<MetricFamily> {
    let mut f = Families::default();
    f.build_info();
    f.info(r);
    if let Some(p) = process {
        f.process(p);
    }
    for p in &r.ports {
        f.port(p);
    }
    for q in &r.queues {
        f.worker(q);
    }
    for (i, pool) in r.pools.iter().enumerate() {
        f.umem(&i.to_string(), &pool.frames);
    }
    f.counter(
        "xfwd_xdp_foreign_frames_total",
        "Frames the XDP program saw on interfaces that are not ports.",
        &[],
        r.xdp_foreign as f64,
    );
    match r.neighbors {
        None => f.fdb(r),
        Some(v4) => f.neighbors(r, v4),
    }
    if let Some(routes) = routes {
        f.routes(routes);
    }
    if let Some(k) = &r.kernel {
        f.kernel(k);
    }
    if let Some(x) = &r.xdp_path {
        f.xdp_path(x, r);
    }
    for t in r.threads.iter().filter(|t| t.age_ms.is_some()) {
        f.gauge(
            "xfwd_thread_heartbeat_age_seconds",
            "Seconds since a long-running thread's loop last went round: a few tenths while it runs; a stuck thread's grows.",
            &[("thread", &t.name)],
            t.age_ms.unwrap_or(0) as f64 / 1000.0,
        );
    }
    f.into_vec()
}

/// The families of each part of a [`Report`]; [`families`] calls them in the order a scrape
/// lists them (a family is listed where it is first seen).
impl Families {
    /// `xfwd_build_info`: what was built, as every exporter says it.
    fn build_info(&mut self) {
        self.gauge(
            "xfwd_build_info",
            "The xfwd build: its version and the machine it was built for; always 1.",
            &[("version", env!("CARGO_PKG_VERSION")), ("arch", std::env::consts::ARCH)],
            1.0,
        );
    }

    /// `process_*`: the process's CPU time, memory, threads and descriptors.
    fn process(&mut self, p: &Process) {
        self.counter(
            "process_cpu_seconds_total",
            "CPU time xfwd used, user and system, in seconds.",
            &[],
            p.cpu_seconds,
        );
        self.gauge("process_resident_memory_bytes", "Memory xfwd holds in RAM, bytes.", &[], p.resident_bytes as f64);
        self.gauge(
            "process_virtual_memory_bytes",
            "Address space xfwd has mapped, bytes.",
            &[],
            p.virtual_bytes as f64,
        );
        self.gauge(
            "process_start_time_seconds",
            "When xfwd started, seconds since the Unix epoch.",
            &[],
            p.start_time_seconds,
        );
        self.gauge("process_threads", "Threads of xfwd.", &[], p.threads as f64);
        if let Some(n) = p.open_fds {
            self.gauge("process_open_fds", "File descriptors xfwd has open.", &[], n as f64);
        }
        if let Some(n) = p.max_fds {
            self.gauge("process_max_fds", "File descriptors xfwd may open (RLIMIT_NOFILE).", &[], n as f64);
        }
    }

    /// `xfwd_info`: how xfwd runs.
    fn info(&mut self, r: &Report) {
        self.gauge(
            "xfwd_info",
            "How xfwd runs: queue management, zero-copy, the workers' real-time priority (0: normal threads); always 1.",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("aqm", r.aqm.as_deref().unwrap_or("")),
                ("zero_copy", if r.zero_copy == Some(true) { "true" } else { "false" }),
                ("rt_priority", &r.rt_priority.unwrap_or(0).to_string()),
            ],
            1.0,
        );
    }

    /// A port: its driver and XDP mode, what the XDP program did with its frames, and what
    /// each queue's worker counted on it.
    fn port(&mut self, p: &PortReport) {
        let port = p.name.as_str();
        self.gauge(
            "xfwd_port_info",
            "A port: its driver and the XDP mode the program was attached in; always 1.",
            &[
                ("port", port),
                ("driver", p.driver.as_deref().unwrap_or("")),
                ("xdp_mode", p.xdp_mode.as_deref().unwrap_or("")),
            ],
            1.0,
        );
        if let Some(q) = p.missed_queue {
            self.gauge(
                "xfwd_xdp_missed_queue",
                "The highest queue a frame arrived on with no socket there (counted in pass-no-socket).",
                &[("port", port)],
                f64::from(q),
            );
        }
        for (verdict, n) in &p.xdp {
            self.counter(
                "xfwd_xdp_frames_total",
                "Frames the XDP program saw on a port, by what it did with them (egress-refused: frames it forwarded to the port that the kernel's redirect or the port's driver refused).",
                &[("port", port), ("verdict", verdict)],
                *n as f64,
            );
        }
        for (q, s) in p.per_queue.iter().enumerate() {
            self.port_queue(port, &q.to_string(), s);
        }
    }

    /// What the worker of `queue` counted on `port`: each counter declared with a family of
    /// its own ([`PORT_COUNTERS`], then the socket's [`XSK_COUNTERS`]), its kicks that did not
    /// send all, and its drops by reason.
    fn port_queue(&mut self, port: &str, queue: &str, s: &PortSnapshot) {
        let l: &[(&str, &str)] = &[("port", port), ("queue", queue)];
        let own = PORT_COUNTERS.iter().filter_map(|c| c.metric.map(|(n, h)| (n, h, (c.get)(s))));
        let xsk = XSK_COUNTERS.iter().filter_map(|c| c.metric.map(|(n, h)| (n, h, (c.get)(&s.xsk))));
        for (name, help, value) in own.chain(xsk) {
            self.counter(name, help, l, value as f64);
        }
        for (outcome, v) in [("again", s.kick_again), ("busy", s.kick_busy), ("error", s.kick_error)] {
            self.counter(
                "xfwd_port_kick_failures_total",
                "Kicks that did not send all: again (EAGAIN), busy (device busy or down), error.",
                &[("port", port), ("queue", queue), ("outcome", outcome)],
                v as f64,
            );
        }
        for (reason, v) in &s.drops {
            self.counter(
                "xfwd_port_dropped_frames_total",
                "Frames dropped, by reason: on the port they came in by, or for want of room on the way out (tx-ring-full, no-free-frame, fq-overflow, aqm-drop with flow queues) on the port they were to leave by.",
                &[("port", port), ("queue", queue), ("reason", reason)],
                *v as f64,
            );
        }
    }

    /// A worker: where its time went, its two histograms, then its counters and gauges that
    /// have families of their own ([`WORKER_COUNTERS`]).
    fn worker(&mut self, q: &QueueSnapshot) {
        let queue = q.queue.to_string();
        self.worker_time(&queue, &q.load);
        self.worker_histograms(&queue, q);
        let l: &[(&str, &str)] = &[("queue", &queue)];
        let own = |gauge: bool| {
            WORKER_COUNTERS
                .iter()
                .filter(move |c| c.gauge == gauge)
                .filter_map(move |c| c.metric.map(|(n, h)| (n, h, (c.get)(q))))
        };
        for (name, help, value) in own(false) {
            self.counter(name, help, l, value as f64);
        }
        for (name, help, value) in own(true) {
            self.gauge(name, help, l, value as f64);
        }
    }

    /// Where the wall time of the worker of `queue` went (rounds with work and without, the
    /// preempted share of each, the phases of work, sleep), and how many rounds it ran.
    fn worker_time(&mut self, queue: &str, t: &LoopTotals) {
        // Gross times and the preempted share of each apart: each of them only grows (the run
        // delay is read every 10 ms, after the rounds it is shared over were published).
        for (state, ns, preempted) in
            [("work", t.work_ns, t.preempted_work_ns), ("idle", t.idle_ns, t.preempted_idle_ns)]
        {
            self.counter(
                "xfwd_worker_seconds_total",
                "A worker's wall time in rounds with work and without (spinning or asleep), preempted time included; busy = work less its preempted share.",
                &[("queue", queue), ("state", state)],
                ns as f64 * NS,
            );
            self.counter(
                "xfwd_worker_preempted_seconds_total",
                "Of a worker's rounds with work and without: time runnable while another thread ran on its CPU (schedstat run delay).",
                &[("queue", queue), ("state", state)],
                preempted as f64 * NS,
            );
        }
        for (phase, ns) in [("decide", t.decide_ns), ("tx", t.tx_ns), ("reap", t.reap_ns)] {
            self.counter(
                "xfwd_worker_phase_seconds_total",
                "A worker's rounds with work by phase (wall time): receive and decide, kick the TX rings, reap and refill.",
                &[("queue", queue), ("phase", phase)],
                ns as f64 * NS,
            );
        }
        self.counter(
            "xfwd_worker_sleep_seconds_total",
            "Of a worker's rounds without work, the wall time asleep in poll(2).",
            &[("queue", queue)],
            t.sleep_ns as f64 * NS,
        );
        for (work, n) in [("true", t.rounds_work), ("false", t.rounds_idle)] {
            self.counter(
                "xfwd_worker_rounds_total",
                "A worker's rounds, with work or without.",
                &[("queue", queue), ("work", work)],
                n as f64,
            );
        }
    }

    /// The histograms of the worker of `queue`: frames per round with work, and frames' sojourn.
    fn worker_histograms(&mut self, queue: &str, q: &QueueSnapshot) {
        let l: &[(&str, &str)] = &[("queue", queue)];
        let t = &q.load;
        let batches: Vec<(f64, u64)> = (0..load::BATCH_BUCKETS)
            .map(|b| {
                let le =
                    if b + 1 < load::BATCH_BUCKETS { (load::batch_floor(b + 1) - 1) as f64 } else { f64::INFINITY };
                (le, t.batches[b])
            })
            .collect();
        self.histogram(
            "xfwd_worker_round_frames",
            "Frames a worker received per round with work.",
            l,
            &batches,
            t.frames as f64,
        );
        let sojourn: Vec<(f64, u64)> = q
            .sojourn
            .iter()
            .enumerate()
            .map(|(b, n)| {
                // Bucket b holds [floor(b), floor(b + 1)) ns: at most floor(b + 1) - 1.
                let le = if b + 1 < SOJOURN_BUCKETS { (sojourn_floor(b + 1) - 1) as f64 * NS } else { f64::INFINITY };
                (le, *n)
            })
            .collect();
        self.histogram(
            "xfwd_worker_sojourn_seconds",
            "Frames' wait from the XDP program to the worker's hand-over (queue management on).",
            l,
            &sojourn,
            q.sojourn_ns as f64 * NS,
        );
    }

    /// A UMEM: where its frames are ([`UMEM_PLACES`]), how many it has, and how many were
    /// found in no place.
    fn umem(&mut self, umem: &str, fr: &FrameSnapshot) {
        for (place, value) in UMEM_PLACES {
            self.gauge(
                "xfwd_umem_frames",
                "Where a UMEM's frames are: free, in flow queues, in the fill/RX/TX/completion rings, or held by the kernel.",
                &[("umem", umem), ("place", place)],
                value(fr) as f64,
            );
        }
        self.gauge("xfwd_umem_size_frames", "Frames in a UMEM.", &[("umem", umem)], fr.total as f64);
        self.gauge(
            "xfwd_umem_unaccounted_frames",
            "Frames of a UMEM found in no place (must stay 0).",
            &[("umem", umem)],
            fr.unaccounted() as f64,
        );
    }

    /// A bridge's FDB: its entries and its capacity.
    fn fdb(&mut self, r: &Report) {
        self.gauge("xfwd_fdb_entries", "Bridge: live FDB entries.", &[], r.fdb_entries as f64);
        self.gauge("xfwd_fdb_capacity_entries", "Bridge: FDB capacity.", &[], r.fdb_capacity as f64);
    }

    /// A router's neighbour tables (`v4`: the IPv4 table's entries and capacity), then what
    /// its ARP thread counts of ARP and of neighbour discovery.
    fn neighbors(&mut self, r: &Report, (n, cap): (usize, usize)) {
        let (n6, cap6) = r.neighbors6.unwrap_or((0, 0));
        for (family, n, cap) in [("ipv4", n, cap), ("ipv6", n6, cap6)] {
            self.gauge("xfwd_neighbor_entries", "Router: neighbour table entries.", &[("family", family)], n as f64);
            self.gauge(
                "xfwd_neighbor_capacity_entries",
                "Router: neighbour table capacity.",
                &[("family", family)],
                cap as f64,
            );
        }
        for (prefix, what, list) in [("xfwd_arp_", "ARP", &r.arp), ("xfwd_ndp_", "Neighbour discovery", &r.ndp)] {
            for (name, v) in list.iter() {
                self.counter(
                    &format!("{prefix}{}_total", metric_word(name)),
                    &format!("Router: {what} thread, {name}."),
                    &[],
                    *v as f64,
                );
            }
        }
    }

    /// The routes a router's tables show, by family.
    fn routes(&mut self, (v4, v6): (usize, usize)) {
        for (family, n) in [("ipv4", v4), ("ipv6", v6)] {
            self.gauge("xfwd_routes", "Router: routes in the table xfwd shows.", &[("family", family)], n as f64);
        }
    }

    /// What mirroring the kernel's routes counts ([`KERNEL_COUNTERS`]), and the routes it
    /// mirrors and leaves.
    fn kernel(&mut self, k: &SyncReport) {
        for (word, help, value) in KERNEL_COUNTERS {
            self.counter(
                &format!("xfwd_kernel_{word}_total"),
                &format!("Kernel routes: {help}."),
                &[],
                value(k) as f64,
            );
        }
        self.gauge("xfwd_kernel_routes", "Kernel routes: routes mirrored.", &[], k.routes as f64);
        self.gauge("xfwd_kernel_ignored_routes", "Kernel routes: routes not used.", &[], k.ignored as f64);
    }

    /// What keeping the XDP path's maps counts ([`XDP_PATH_COUNTERS`]), its routes, and
    /// whether each port takes redirected frames.
    fn xdp_path(&mut self, x: &FastReport, r: &Report) {
        for (word, help, value) in XDP_PATH_COUNTERS {
            self.counter(&format!("xfwd_xdp_path_{word}_total"), &format!("XDP path: {help}."), &[], value(x) as f64);
        }
        self.gauge("xfwd_xdp_path_routes", "XDP path: routes in the program's table.", &[], x.routes as f64);
        self.gauge(
            "xfwd_xdp_path_left_out",
            "XDP path: neighbours (router) or stations (bridge) the program's maps have no room for; their frames go to the workers.",
            &[],
            x.left_out as f64,
        );
        for (i, p) in r.ports.iter().enumerate() {
            self.gauge(
                "xfwd_xdp_path_egress_ready",
                "XDP path: 1 where the port takes frames the program redirects to it, 0 where the workers forward them.",
                &[("port", &p.name)],
                if x.no_redirects.contains(&i) { 0.0 } else { 1.0 },
            );
        }
    }
}

/// The text of a scrape.
pub fn render(r: &Report, routes: RouteCounts, process: Option<&Process>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 * 1024);
    // Families are never empty and names are fixed here: encoding cannot fail.
    let _ = TextEncoder::new().encode(&families(r, routes, process), &mut out);
    out
}

/// The routes the router's tables show (`None`: a bridge).
fn route_counts(view: &LiveView) -> RouteCounts {
    view.router.as_ref().map(|r| {
        let t = r.tables.load();
        (t.v4.routes.len(), t.v6.routes.len())
    })
}

/// A bound `/metrics` socket; nothing answers until [`MetricsServer::serve`].
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
}

impl MetricsServer {
    /// Binds `addr` (before privileges are dropped, so that a port below 1024 works too).
    pub fn bind(addr: SocketAddr) -> Result<MetricsServer> {
        let listener = TcpListener::bind(addr).with_context(|| {
            format!("--metrics {addr}: cannot listen there (in use, or not an address of this box?)")
        })?;
        listener.set_nonblocking(true)?;
        Ok(MetricsServer { listener })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves `/metrics` about `view` from a thread of its own.
    pub fn serve(self, view: Arc<LiveView>) -> Result<()> {
        std::thread::Builder::new().name("xfwd-metrics".into()).spawn(move || {
            // Never real-time, whatever the thread that started it was.
            let _ = xfwd_dataplane::io::setup::start::sched::step_down();
            serve(&self.listener, |_| render(&view.report(), route_counts(&view), Process::read().as_ref()))
        })?;
        Ok(())
    }
}

/// Where a connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the request head.
    Reading,
    /// Writing the answer.
    Writing,
}

/// One client connection.
struct Client {
    stream: TcpStream,
    request: Vec<u8>,
    phase: Phase,
    /// The answer, once the request is read; `sent` bytes of it gone.
    answer: Vec<u8>,
    sent: usize,
    deadline: Instant,
}

/// What to answer to a request head.
fn answer(head: &[u8], scrape: &mut dyn FnMut(()) -> Vec<u8>, refused: u64) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, body, kind) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let mut body = scrape(());
            body.extend_from_slice(
                format!(
                    "# HELP xfwd_metrics_refused_connections_total Connections to this endpoint closed at once: {MAX_CLIENTS} were open.\n# TYPE xfwd_metrics_refused_connections_total counter\nxfwd_metrics_refused_connections_total {refused}\n"
                )
                .as_bytes(),
            );
            ("200 OK", body, prometheus::TEXT_FORMAT)
        }
        ("GET" | "HEAD", _) => ("404 Not Found", b"xfwd serves /metrics only\n".to_vec(), "text/plain"),
        _ => ("405 Method Not Allowed", b"GET /metrics\n".to_vec(), "text/plain"),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(&body);
    }
    out
}

/// Whether `buf` holds a whole request head.
fn head_complete(buf: &[u8]) -> bool {
    buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")
}

/// The server loop: accepts, reads requests, answers, closes; never blocks on a client.
fn serve(listener: &TcpListener, mut scrape: impl FnMut(()) -> Vec<u8>) {
    let mut clients: Vec<Client> = Vec::with_capacity(MAX_CLIENTS);
    let mut refused = 0u64;
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CLIENTS + 1);
    loop {
        fds.clear();
        fds.push(libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        for c in &clients {
            let events = if c.phase == Phase::Writing { libc::POLLOUT } else { libc::POLLIN };
            fds.push(libc::pollfd { fd: c.stream.as_raw_fd(), events, revents: 0 });
        }
        let now = Instant::now();
        let wait =
            clients.iter().map(|c| c.deadline.saturating_duration_since(now)).min().unwrap_or(Duration::from_secs(1));
        let timeout = wait.as_millis().clamp(1, 1000) as i32;
        // SAFETY: `fds` is a valid array of pollfd of the length given; poll only writes revents.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let now = Instant::now();
        let mut keep = vec![true; clients.len()];
        for (i, c) in clients.iter_mut().enumerate() {
            let rev = fds[i + 1].revents;
            if rev == 0 {
                keep[i] = now < c.deadline;
                continue;
            }
            keep[i] = step(c, rev, &mut scrape, refused, now);
        }
        let mut k = keep.into_iter();
        clients.retain(|_| k.next().unwrap_or(false));
        if fds[0].revents & libc::POLLIN != 0 {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if clients.len() >= MAX_CLIENTS || stream.set_nonblocking(true).is_err() {
                            refused += 1;
                            continue;
                        }
                        let _ = stream.set_nodelay(true);
                        clients.push(Client {
                            stream,
                            request: Vec::new(),
                            phase: Phase::Reading,
                            answer: Vec::new(),
                            sent: 0,
                            deadline: now + REQUEST_TIMEOUT,
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    // Out of descriptors (the connection stays in the backlog, and the listener
                    // readable): wait a little rather than spin.
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        break;
                    }
                }
            }
        }
    }
}

/// Moves one client on after poll said `rev`; returns whether to keep it.
fn step(c: &mut Client, rev: i16, scrape: &mut dyn FnMut(()) -> Vec<u8>, refused: u64, now: Instant) -> bool {
    if rev & (libc::POLLERR | libc::POLLNVAL) != 0 {
        return false;
    }
    let again = |e: &std::io::Error| e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted;
    match c.phase {
        Phase::Reading => {
            let mut buf = [0u8; 2048];
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => c.request.extend_from_slice(&buf[..n]),
                Err(e) if again(&e) => {}
                Err(_) => return false,
            }
            if head_complete(&c.request) {
                c.answer = answer(&c.request, scrape, refused);
            } else if c.request.len() > MAX_REQUEST {
                c.answer =
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_vec();
            } else {
                return now < c.deadline;
            }
            c.request = Vec::new();
            c.phase = Phase::Writing;
            c.deadline = now + RESPONSE_TIMEOUT;
            true
        }
        Phase::Writing => {
            match c.stream.write(&c.answer[c.sent..]) {
                Ok(n) => c.sent += n,
                Err(e) if again(&e) => {}
                Err(_) => return false,
            }
            if c.sent >= c.answer.len() {
                // Done: shut for writing and take in what the client sent beyond its request
                // (a closing socket with unread input resets the connection, and the client
                // may lose the answer); then close, without waiting for the client.
                let _ = c.stream.shutdown(std::net::Shutdown::Write);
                let mut buf = [0u8; 2048];
                for _ in 0..32 {
                    if !matches!(c.stream.read(&mut buf), Ok(n) if n > 0) {
                        break;
                    }
                }
                return false;
            }
            now < c.deadline
        }
    }
}

/// Parses `--metrics` as node_exporter reads its listen address: `ADDR:PORT` (`127.0.0.1:9464`,
/// `[::1]:9464`), `:PORT` for every IPv4 address (`0.0.0.0:PORT`), `localhost:PORT` for
/// 127.0.0.1.
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr};
    let err = || {
        format!("`{text}` is not ADDR:PORT: write e.g. 127.0.0.1:9464, :9464 (every IPv4 address) or localhost:9464")
    };
    let port = |p: &str| p.parse::<u16>().map_err(|_| err());
    if let Some(p) = text.strip_prefix(':') {
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port(p)?)));
    }
    if let Some(p) = text.strip_prefix("localhost:") {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port(p)?)));
    }
    text.parse().map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_get_the_metrics_a_404_or_a_405() {
        let mut calls = 0;
        let mut scrape = |_| {
            calls += 1;
            b"xfwd_up 1\n".to_vec()
        };
        let ok = String::from_utf8(answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &mut scrape, 3)).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"), "{ok}");
        assert!(ok.ends_with("xfwd_metrics_refused_connections_total 3\n"), "{ok}");
        let len: usize = ok.split("Content-Length: ").nth(1).unwrap().split("\r\n").next().unwrap().parse().unwrap();
        assert_eq!(len, ok.split("\r\n\r\n").nth(1).unwrap().len());
        let q = String::from_utf8(answer(b"GET /metrics?x=1 HTTP/1.0\n\n", &mut scrape, 0)).unwrap();
        assert!(q.starts_with("HTTP/1.1 200"), "{q}");
        let head = String::from_utf8(answer(b"HEAD /metrics HTTP/1.1\r\n\r\n", &mut scrape, 0)).unwrap();
        assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"), "{head}");
        let nf = String::from_utf8(answer(b"GET / HTTP/1.1\r\n\r\n", &mut scrape, 0)).unwrap();
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        let bad = String::from_utf8(answer(b"\x00\xff garbage\r\n\r\n", &mut scrape, 0)).unwrap();
        assert!(bad.starts_with("HTTP/1.1 405"), "{bad}");
        // One snapshot per scrape, none for the others.
        assert_eq!(calls, 3);
    }

    #[test]
    fn a_head_is_complete_at_its_blank_line() {
        assert!(!head_complete(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"));
        assert!(head_complete(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(head_complete(b"GET /metrics\n\n"));
    }

    /// A report whose every figure is a different number, so that a figure under the wrong
    /// name or labels shows: a router's (two ports, one with two queues; neighbours, kernel
    /// routes) or a bridge's (its FDB).
    fn numbered_report(router: bool) -> Report {
        use xfwd_dataplane::io::view::PoolSnapshot;
        use xfwd_dataplane::io::PortReport;
        use xfwd_dataplane::load::LoopTotals;
        use xfwd_dataplane::routes::kernel::SyncReport;
        use xfwd_dataplane::stats::{FrameSnapshot, PortSnapshot, QueueSnapshot};
        let mut n = 0u64;
        let mut next = move || {
            n += 1;
            n
        };
        let snapshot = |next: &mut dyn FnMut() -> u64| {
            let mut s = PortSnapshot::default();
            for c in PORT_COUNTERS {
                *(c.get_mut)(&mut s) = next();
            }
            s.drops = vec![("no-route".into(), next()), ("tx-ring-full".into(), next())];
            for c in XSK_COUNTERS {
                *(c.get_mut)(&mut s.xsk) = next();
            }
            s
        };
        let (q0, q1, q2) = (snapshot(&mut next), snapshot(&mut next), snapshot(&mut next));
        let ports = vec![
            PortReport {
                name: "eth4".into(),
                total: PortSnapshot::default(),
                per_queue: vec![q0, q1],
                xdp: vec![("redirect".into(), next()), ("pass-no-socket".into(), next())],
                missed_queue: Some(3),
                driver: Some("veth".into()),
                xdp_mode: Some("generic".into()),
            },
            PortReport {
                name: "eth5".into(),
                total: PortSnapshot::default(),
                per_queue: vec![q2],
                xdp: vec![("redirect".into(), next())],
                missed_queue: None,
                driver: None,
                xdp_mode: None,
            },
        ];
        let mut batches = [0; load::BATCH_BUCKETS];
        batches.iter_mut().for_each(|b| *b = next());
        let load = LoopTotals {
            wall_ns: next(),
            work_ns: next() * 1_000_000,
            idle_ns: next() * 1_000_000,
            sleep_ns: next() * 1_000_000,
            preempted_work_ns: next() * 1_000,
            preempted_idle_ns: next() * 1_000,
            decide_ns: next() * 1_000,
            tx_ns: next() * 1_000,
            reap_ns: next() * 1_000,
            rounds_work: next(),
            rounds_idle: next(),
            frames: next(),
            batches,
            schedstat: true,
        };
        let mut queue = QueueSnapshot {
            queue: 0,
            core: Some(1),
            sojourn: (0..SOJOURN_BUCKETS).map(|_| next()).collect(),
            load,
            // xsk_reads is not exported: it only says how fresh the socket statistics are.
            ..Default::default()
        };
        for c in WORKER_COUNTERS {
            *(c.get_mut)(&mut queue) = next();
        }
        queue.sojourn_ns *= 1_000_000;
        let frames = FrameSnapshot {
            total: 4096,
            free: next(),
            queued: next(),
            fill: next(),
            tx: next(),
            fill_ring: next(),
            rx_ring: next(),
            rx_kernel: next(),
            tx_ring: next(),
            completion: next(),
            tx_kernel: next(),
        };
        let kernel = SyncReport {
            messages: next(),
            updates: next(),
            resyncs: next(),
            overruns: next(),
            undecoded: next(),
            dumps_interrupted: next(),
            build_errors: next(),
            full_builds: next(),
            copies: next(),
            routes: next(),
            ignored: next(),
            local_map_errors: next(),
            rules_not_followed: next(),
            ..SyncReport::default()
        };
        Report {
            ports,
            queues: vec![queue],
            pools: vec![PoolSnapshot { workers: (0, 0), ports: vec!["eth4".into(), "eth5".into()], frames }],
            fdb_entries: next() as usize,
            fdb_capacity: next() as usize,
            xdp_foreign: next(),
            arp: if router { vec![("requests-sent".into(), next()), ("replies".into(), next())] } else { Vec::new() },
            neighbors: router.then(|| (next() as usize, next() as usize)),
            ndp: if router { vec![("NS sent".into(), next())] } else { Vec::new() },
            neighbors6: router.then(|| (next() as usize, next() as usize)),
            kernel: router.then_some(kernel),
            xdp_path: router.then(|| FastReport {
                left_out: 3,
                routes: next(),
                swaps: next(),
                route_writes: next(),
                neighbor_writes: next(),
                refreshed: next(),
                errors: next(),
                last_error: None,
                delay_us: Some((next(), next(), next())),
                no_redirects: vec![1],
            }),
            zero_copy: Some(router),
            rt_priority: router.then_some(10),
            aqm: router.then(|| "fq-codel".into()),
            cleared: None,
            threads: vec![
                ThreadBeat { name: "xfwd-q0".into(), age_ms: Some(12) },
                ThreadBeat { name: "xfwd-arp".into(), age_ms: Some(1500) },
                ThreadBeat { name: "xfwd-kernel".into(), age_ms: None },
            ],
        }
    }

    /// The text of a scrape, with the version label made independent of the crate's version.
    fn scrape_text(router: bool) -> String {
        let routes = router.then_some((7, 5));
        let process = Process {
            cpu_seconds: 1.5,
            resident_bytes: 4096,
            virtual_bytes: 8192,
            start_time_seconds: 1_700_000_000.25,
            threads: 6,
            open_fds: Some(12),
            max_fds: Some(1024),
        };
        let text = String::from_utf8(render(&numbered_report(router), routes, Some(&process))).unwrap();
        text.replace(concat!("version=\"", env!("CARGO_PKG_VERSION"), "\""), "version=\"VERSION\"")
            .replace(&format!("arch=\"{}\"", std::env::consts::ARCH), "arch=\"ARCH\"")
    }

    /// Every line of a scrape (names, labels, help texts, values, order) as it was when the
    /// families were pinned: a change shows here first, before promtool and the scrapers meet it.
    /// A change meant (a counter declared in `stats.rs`) is pinned anew by running this test
    /// with `XFWD_BLESS=1`, which writes the fixtures; the diff is then the review.
    #[test]
    fn a_scrape_is_the_pinned_text() {
        for (router, pinned, file) in [
            (true, include_str!("../tests/fixtures/metrics-router.prom"), "metrics-router.prom"),
            (false, include_str!("../tests/fixtures/metrics-bridge.prom"), "metrics-bridge.prom"),
        ] {
            let text = scrape_text(router);
            if std::env::var_os("XFWD_BLESS").is_some() {
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(file);
                std::fs::write(&path, &text).unwrap();
                continue;
            }
            for (i, (got, want)) in text.lines().zip(pinned.lines()).enumerate() {
                assert_eq!(got, want, "router {router}: line {}", i + 1);
            }
            assert_eq!(text.lines().count(), pinned.lines().count(), "router {router}: {text}");
            assert_eq!(text, pinned, "router {router}");
        }
    }

    /// proc(5)'s stat line, a command name with a space and a parenthesis in it.
    #[test]
    fn the_process_figures_are_read_off_its_stat_line() {
        let stat = "4242 (xfwd (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 -11 0 7 0 1000 104857600 2560 \
                    18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 10 1 0 0 0 0 0 0 0 0 0 0 0";
        let p = Process::parse(stat, 1_700_000_000, 100, 4096).unwrap();
        assert_eq!(p.cpu_seconds, 3.0, "(250 + 50) ticks at 100 a second");
        assert_eq!((p.threads, p.virtual_bytes, p.resident_bytes), (7, 104_857_600, 2560 * 4096));
        assert_eq!(p.start_time_seconds, 1_700_000_010.0, "boot + 1000 ticks");
        assert_eq!(Process::parse("4242 (xfwd) S 1", 0, 100, 4096), None);
        let me = Process::read().expect("this process's own figures");
        assert!(me.threads >= 1 && me.resident_bytes > 0 && me.open_fds.unwrap() >= 3, "{me:?}");
    }

    #[test]
    fn words_become_metric_names() {
        assert_eq!(metric_word("requests-sent"), "requests_sent");
        assert_eq!(metric_word("NA rx"), "na_rx");
    }

    #[test]
    fn a_listen_address_is_read_as_node_exporter_reads_it() {
        assert_eq!(parse_listen("127.0.0.1:9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_listen("[::1]:9464").unwrap().to_string(), "[::1]:9464");
        assert_eq!(parse_listen(":9464").unwrap().to_string(), "0.0.0.0:9464");
        assert_eq!(parse_listen("localhost:9464").unwrap().to_string(), "127.0.0.1:9464");
        for bad in ["9464", ":", ":99999", "localhost", "host:9464", "127.0.0.1"] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.contains(":9464 (every IPv4 address)"), "{bad}: {e}");
        }
    }
}
