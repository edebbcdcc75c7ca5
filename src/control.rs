//! The control socket: a Unix stream socket on which a running xfwd answers `xfwd show …`.
//!
//! Protocol: the client sends one line naming what it wants (`stats`, `fdb`, `routes`,
//! `neighbors`, or any of them with `-json`: `stats-json`), the
//! server writes the answer and closes. Text, so `socat - UNIX:/run/xfwd/xfwd.sock` works too.
//!
//! No client can hold another: each is served by a thread of its own (normal priority, like
//! the accepting one), at most [`MAX_CLIENTS`] at once (one more gets a one-line refusal); a
//! request must come whole, in at most [`MAX_REQUEST`] bytes, within [`REQUEST_TIMEOUT`], and
//! the whole answer be taken within [`ANSWER_TIMEOUT`] (a reader that takes a byte at a time
//! is cut off then, not at its first stalled write). A `reload` waits for the reload outside
//! those places, at most [`MAX_RELOAD_WAITERS`] at once, so that waiting for a long reload
//! never keeps `xfwd show` out. Clients asking for the same listing at once share one: it is
//! built once and written to each (`show routes` of a full table is megabytes). `xfwd show`
//! waits [`QUERY_TIMEOUT`] at most.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::LiveView;

use crate::{render, show};

/// Where xfwd listens unless told otherwise.
pub const DEFAULT_PATH: &str = "/run/xfwd/xfwd.sock";
/// Clients served at once.
pub const MAX_CLIENTS: usize = 16;
/// Clients waiting for a reload at once (besides those served).
pub const MAX_RELOAD_WAITERS: usize = 4;
/// The longest request line, newline included.
pub const MAX_REQUEST: usize = 256;
/// Time for a whole request to arrive.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Time for a client to take its whole answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `xfwd show` waits for an answer.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `xfwd reload` waits for the reload it asked for (a large routes file takes a while
/// to read and build).
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The reloads of a running xfwd, for `xfwd reload` to ask for one and wait until it is done:
/// it raises the same flag SIGHUP does, and the main loop, once it has reloaded (or refused),
/// counts the reload and leaves its outcome here.
#[derive(Debug)]
pub struct Reloads {
    /// Set by SIGHUP and by a `reload` request; taken by the main loop.
    pub asked: Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::Mutex<(u64, Result<String, String>)>,
    changed: std::sync::Condvar,
}

impl Reloads {
    /// Reloads asked for through `asked`.
    pub fn new(asked: Arc<std::sync::atomic::AtomicBool>) -> Arc<Reloads> {
        Arc::new(Reloads { asked, done: std::sync::Mutex::new((0, Ok(String::new()))), changed: Default::default() })
    }

    /// The main loop: a reload is over, with this outcome (`Err`: refused, and why).
    pub fn finished(&self, outcome: Result<String, String>) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        *d = (d.0 + 1, outcome);
        self.changed.notify_all();
    }

    /// Asks for a reload without waiting for it.
    pub fn ask(&self) {
        self.asked.store(true, Ordering::Relaxed);
    }

    /// Asks for a reload and waits for the first one that ends after the asking, up to
    /// `timeout`; `None` if none did.
    pub fn request(&self, timeout: Duration) -> Option<Result<String, String>> {
        let d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let asked_at = d.0;
        self.asked.store(true, Ordering::Relaxed);
        let (d, _) =
            self.changed.wait_timeout_while(d, timeout, |d| d.0 == asked_at).unwrap_or_else(|e| e.into_inner());
        (d.0 != asked_at).then(|| d.1.clone())
    }
}

/// A bound control socket; the file is removed on drop.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl ControlServer {
    /// Binds `path` (creating its directory); nothing answers until [`ControlServer::serve`].
    /// With `group`, the socket is that group's too (mode 0660), so its members may ask as
    /// root may; without, only its owner (root, or the unit's user) can.
    pub fn bind(path: &Path, group: Option<u32>) -> Result<ControlServer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                bail!(
                    "{}: another xfwd is answering on this control socket; stop it or pass --control PATH",
                    path.display()
                );
            }
            // Left behind by a process that died: nobody listens.
            std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
        }
        let listener = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        // Its owner's alone (whatever the umask), or its group's too.
        let mode = if group.is_some() { 0o660 } else { 0o600 };
        let shared = group.map_or(Ok(()), |gid| {
            std::os::unix::fs::chown(path, None, Some(gid)).with_context(|| {
                format!(
                    "giving {} to group {gid} (xfwd must be in that group, e.g. SupplementaryGroups= in a unit, or hold CAP_CHOWN)",
                    path.display()
                )
            })
        });
        let made = shared.and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("chmod {mode:o} {}", path.display()))
        });
        if let Err(e) = made {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(ControlServer { path: path.to_owned(), listener: Some(listener) })
    }

    /// Answers requests about `view` from a background thread.
    pub fn serve(&mut self, view: Arc<LiveView>, reloads: Arc<Reloads>) -> Result<()> {
        let listener = self.listener.take().context("the control socket is already served")?;
        std::thread::Builder::new().name("xfwd-control".into()).spawn(move || {
            let places = Places::default();
            let cleared: Arc<Cleared> = Arc::default();
            let listings = Arc::new(Listings::default());
            for stream in listener.incoming().flatten() {
                let Some(place) = places.client() else {
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = (&stream)
                        .write_all(format!("error: {MAX_CLIENTS} clients are being answered; try again\n").as_bytes());
                    continue;
                };
                let (view, reloads, places) = (Arc::clone(&view), Arc::clone(&reloads), places.clone());
                let (cleared, listings) = (Arc::clone(&cleared), Arc::clone(&listings));
                let _ = std::thread::Builder::new().name("xfwd-control-client".into()).spawn(move || {
                    let ctx = Client { view: &view, reloads: &reloads, cleared: &cleared, listings: &listings };
                    let _ = serve(stream, &ctx, place, &places);
                });
            }
        })?;
        Ok(())
    }
}

impl Drop for ControlServer {
    /// Removes the socket file. A process that switched to another user (`--user`) may no
    /// longer be allowed to (the directory is root's): the file then stays behind and the next
    /// start, finding nobody answering on it, replaces it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads one request line from `stream`: what came before the newline, or why there is none.
fn read_request(mut stream: &UnixStream) -> Result<String, String> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 64];
    loop {
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            buf.truncate(end);
            return String::from_utf8(buf).map_err(|_| "error: the request is not text".to_owned());
        }
        if buf.len() >= MAX_REQUEST {
            return Err(format!("error: a request is one line of at most {MAX_REQUEST} bytes"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("error: no whole request line within {REQUEST_TIMEOUT:?}"));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match stream.read(&mut chunk[..(MAX_REQUEST - buf.len()).min(64)]) {
            // Closed without a newline: what came is the request (`printf stats | socat …`).
            Ok(0) => return String::from_utf8(buf).map_err(|_| "error: the request is not text".to_owned()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(format!("error: no whole request line within {REQUEST_TIMEOUT:?}")),
        }
    }
}

/// The report `xfwd clear stats` took and when (RFC 3339): `show stats` counts from it.
type Cleared = std::sync::Mutex<Option<(xfwd_dataplane::io::Report, String)>>;

/// The clients being answered and those waiting for a reload, counted; each [`Place`] is given
/// back when dropped.
#[derive(Debug, Clone, Default)]
struct Places {
    clients: Arc<AtomicUsize>,
    reload_waiters: Arc<AtomicUsize>,
}

/// One place of [`Places`], held while it is used.
#[derive(Debug)]
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Places {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Place> {
        count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1)).ok()?;
        Some(Place(Arc::clone(count)))
    }

    /// A place among the clients answered, if one is free.
    fn client(&self) -> Option<Place> {
        Places::take(&self.clients, MAX_CLIENTS)
    }

    /// A client's place traded for one among the reload's waiters, if one is free (the
    /// client's is given back either way: a refused client is answered at once).
    fn to_reload(&self, client: Place) -> Option<Place> {
        drop(client);
        Places::take(&self.reload_waiters, MAX_RELOAD_WAITERS)
    }
}

/// The listings being built, by request: a client asking for one that is being built waits
/// for it and is answered with it, rather than building one more (a full table's `show routes`
/// is megabytes, and sixteen clients at once held sixteen). Once built, a listing is not kept:
/// the next request builds a new one.
#[derive(Debug, Default)]
struct Listings(std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::OnceLock<Arc<String>>>>>);

impl Listings {
    /// `request`'s listing: built by `build`, or by the client that asked first while it
    /// builds.
    fn get(&self, request: &str, build: impl FnOnce() -> String) -> Arc<String> {
        let cell = {
            let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(m.entry(request.to_owned()).or_default())
        };
        let mut built = false;
        let listing = Arc::clone(cell.get_or_init(|| {
            built = true;
            Arc::new(build())
        }));
        if built {
            let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if m.get(request).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                m.remove(request);
            }
        }
        listing
    }
}

/// What every client's thread reads.
struct Client<'a> {
    view: &'a LiveView,
    reloads: &'a Reloads,
    cleared: &'a Cleared,
    listings: &'a Listings,
}

/// Writes `bytes` to `stream`, all of it by `deadline`: the whole answer, not each write, is
/// bounded, so a reader that takes a little at a time is cut off when the time is up. (A
/// socket's send timeout bounds each wait for room, and a write that keeps making progress
/// never times out: the answer goes in pieces of [`WRITE_PIECE`], the deadline checked
/// between them.)
fn write_by(mut stream: &UnixStream, bytes: &[u8], deadline: Instant) -> std::io::Result<()> {
    let mut at = 0;
    while at < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(&bytes[at..bytes.len().min(at + WRITE_PIECE)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The most [`write_by`] writes at once.
const WRITE_PIECE: usize = 64 << 10;

fn serve(stream: UnixStream, ctx: &Client<'_>, place: Place, places: &Places) -> std::io::Result<()> {
    let Client { view, reloads, cleared, listings } = *ctx;
    let line = match read_request(&stream) {
        Ok(line) => line,
        Err(refusal) => {
            return write_by(&stream, format!("{refusal}\n").as_bytes(), Instant::now() + ANSWER_TIMEOUT);
        }
    };
    let request = line.trim();
    let (what, as_json) = request.strip_suffix("-json").map_or((request, false), |w| (w, true));
    // `xfwd show stats` asks for `show-stats…`: the counters since the last `clear-stats`.
    // `stats…` (top, monitor, bench, scripts) and the metrics endpoint count from start, so
    // that nothing reading rates sees a counter go back.
    let shown = |all: bool| {
        let now = view.report();
        let report = match &*cleared.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((base, at)) => now.since(base, at),
            None => now,
        };
        if as_json {
            show::stats_json(&report)
        } else {
            render::stats_detail(&report, &view.ports_now(), all)
        }
    };
    let answer = match what {
        "clear-stats" => {
            let at = crate::log::rfc3339(
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default(),
            );
            *cleared.lock().unwrap_or_else(|e| e.into_inner()) = Some((view.report(), at.clone()));
            format!(
                "counters cleared at {at}: `xfwd show stats` counts from now (the metrics endpoint, --stats lines, top and monitor count from start)\n"
            )
        }
        "show-stats" => shown(false),
        "show-stats-all" => shown(true),
        "reload" => match places.to_reload(place) {
            None => {
                // Asked for all the same (the file may have changed since the reload the others
                // wait for began); only the waiting is refused.
                reloads.ask();
                format!(
                    "error: a reload is asked for, but {MAX_RELOAD_WAITERS} clients wait for one already, so this one does not wait: see xfwd's log\n"
                )
            }
            Some(_waiting) => match reloads.request(RELOAD_TIMEOUT) {
                Some(Ok(done)) => format!("{done}\n"),
                Some(Err(why)) => format!("error: reload refused: {why}\n"),
                None => format!("error: the reload did not end within {RELOAD_TIMEOUT:?}; see xfwd's log\n"),
            },
        },
        "stats" if as_json => show::stats_json(&view.report()),
        "stats" => render::stats_detail(&view.report(), &view.ports_now(), false),
        "stats-all" => render::stats_detail(&view.report(), &view.ports_now(), true),
        // A question the running mode has no table for is an error, which `xfwd show` exits 1 on.
        "fdb" if view.router.is_some() => {
            "error: this xfwd is a router: it has no FDB (show routes, show neighbors)\n".into()
        }
        "routes" | "neighbors" if view.router.is_none() => {
            format!("error: this xfwd is a bridge: it has no {what} (show fdb)\n")
        }
        "fdb" | "routes" | "neighbors" => {
            let listing = listings.get(request, || match what {
                "fdb" if as_json => show::json(&show::fdb(view)),
                "fdb" => show::fdb_text(&show::fdb(view)),
                "routes" => match show::routes(view) {
                    Some(Ok(r)) if as_json => show::json(&r),
                    Some(Ok(r)) => show::routes_text(&r),
                    Some(Err(why)) => format!("error: {why}\n"),
                    None => String::new(),
                },
                _ => match show::neighbors(view) {
                    Some(Ok(n)) if as_json => show::json(&n),
                    Some(Ok(n)) => show::neighbors_text(&n),
                    Some(Err(why)) => format!("error: {why}\n"),
                    None => String::new(),
                },
            });
            return write_by(&stream, listing.as_bytes(), Instant::now() + ANSWER_TIMEOUT);
        }
        _ => format!(
            "error: unknown request `{request}` (stats, fdb, routes, neighbors, each also with -json: stats-json …; show-stats, the same since clear-stats)\n"
        ),
    };
    write_by(&stream, answer.as_bytes(), Instant::now() + ANSWER_TIMEOUT)
}

/// Sends `request` to the xfwd listening on `path` and returns its answer; an answer that is an
/// error (`error: …`: a question this xfwd has no table for, an unknown request, too many
/// clients) is returned as one.
pub fn query(path: &Path, request: &str) -> Result<String> {
    query_within(path, request, QUERY_TIMEOUT)
}

/// [`query`], waiting up to `timeout` for the answer.
pub fn query_within(path: &Path, request: &str, timeout: Duration) -> Result<String> {
    let mut s = UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
            "{}: permission denied: only the socket's owner and group may ask (run as root, or start xfwd with --control-group GROUP and join that group)",
            path.display()
        ),
        _ => anyhow::Error::new(e).context(format!(
            "{}: no xfwd answers here (is it running? started with another --control?)",
            path.display()
        )),
    })?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let stalled = || {
        format!(
            "{}: xfwd accepted the question but gave no answer within {timeout:?} (is it stopped, e.g. by SIGSTOP, or swamped?)",
            path.display()
        )
    };
    s.write_all(format!("{request}\n").as_bytes()).with_context(stalled)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).with_context(stalled)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    match text.strip_prefix("error: ") {
        Some(e) => anyhow::bail!("{}", e.trim_end()),
        None => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_taking_a_little_at_a_time_is_cut_off_when_the_whole_answers_time_is_up() {
        // 8 MiB to a reader that takes 4 KiB every 20 ms (200 KiB/s: 40 s for it all). Each
        // write makes progress, so a timeout per write never fires: the deadline does.
        let (server, mut client) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut got = 0;
            while let Ok(n) = client.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
                std::thread::sleep(Duration::from_millis(20));
            }
            got
        });
        let answer = vec![b'x'; 8 << 20];
        let started = Instant::now();
        let written = write_by(&server, &answer, started + Duration::from_millis(500));
        let took = started.elapsed();
        drop(server);
        let got = reader.join().unwrap();
        assert_eq!(written.map_err(|e| e.kind()), Err(std::io::ErrorKind::TimedOut));
        assert!(took < Duration::from_secs(3), "gave up after {took:?}");
        assert!(got < answer.len(), "{got}");
        // A reader that takes it all gets it all.
        let (server, mut client) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            client.read_to_end(&mut all).unwrap();
            all.len()
        });
        write_by(&server, &answer, Instant::now() + Duration::from_secs(60)).unwrap();
        drop(server);
        assert_eq!(reader.join().unwrap(), answer.len());
    }

    #[test]
    fn clients_asking_for_one_listing_at_once_share_one_build() {
        let listings = Arc::new(Listings::default());
        let builds = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let got: Vec<Arc<String>> = (0..8)
            .map(|_| {
                let (listings, builds, barrier) = (Arc::clone(&listings), Arc::clone(&builds), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    let all_arrived = Arc::clone(&listings);
                    listings.get("routes", move || {
                        builds.fetch_add(1, Ordering::Relaxed);
                        // Built only once all eight hold the one being built (the map's and
                        // theirs: nine), however slowly the machine starts them.
                        let holders = || {
                            let m = all_arrived.0.lock().unwrap();
                            m.get("routes").map_or(0, Arc::strong_count)
                        };
                        while holders() < 9 {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        "198.19.0.0/16 via 198.18.30.2 dev eth4\n".repeat(1000)
                    })
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert_eq!(builds.load(Ordering::Relaxed), 1, "one build for eight clients");
        assert!(got.iter().all(|g| Arc::ptr_eq(g, &got[0])), "one listing in memory");
        // Built and answered, it is not kept: the next request sees the tables as they are then.
        let next = listings.get("routes", || "changed\n".into());
        assert_eq!(next.as_str(), "changed\n");
        assert!(listings.0.lock().unwrap().is_empty());
    }

    #[test]
    fn waiting_for_a_reload_gives_the_clients_place_back_and_has_places_of_its_own() {
        let places = Places::default();
        let clients: Vec<Place> = (0..MAX_CLIENTS).map(|_| places.client().unwrap()).collect();
        assert!(places.client().is_none(), "all {MAX_CLIENTS} taken");
        // Reloads waited for: each frees a client's place.
        let mut waiting = Vec::new();
        let mut clients = clients.into_iter();
        for _ in 0..MAX_RELOAD_WAITERS {
            waiting.push(places.to_reload(clients.next().unwrap()).expect("a waiter's place"));
        }
        assert!(places.to_reload(clients.next().unwrap()).is_none(), "a fifth waiter is refused");
        // The places of the waiters and the refused one are free for `xfwd show`.
        let freed: Vec<Place> = (0..MAX_RELOAD_WAITERS + 1).map(|_| places.client().expect("a place")).collect();
        assert!(places.client().is_none());
        drop((waiting, freed));
        assert_eq!(places.reload_waiters.load(Ordering::Relaxed), 0);
    }
}
