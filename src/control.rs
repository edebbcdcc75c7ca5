//! The control socket: a Unix stream socket on which a running xfwd answers `xfwd show …`.
//!
//! Protocol: the client sends one line naming what it wants (`stats`, `stats-json`, `fdb`), the
//! server writes the answer and closes. Text, so `socat - UNIX:/run/xfwd/xfwd.sock` works too.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use xfwd_dataplane::io::LiveView;

use crate::render;

/// Where xfwd listens unless told otherwise.
pub const DEFAULT_PATH: &str = "/run/xfwd/xfwd.sock";

/// A bound control socket; the file is removed on drop.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl ControlServer {
    /// Binds `path` (creating its directory); nothing answers until [`ControlServer::serve`].
    pub fn bind(path: &Path) -> Result<ControlServer> {
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
        Ok(ControlServer { path: path.to_owned(), listener: Some(listener) })
    }

    /// Answers requests about `view` from a background thread.
    pub fn serve(&mut self, view: Arc<LiveView>) -> Result<()> {
        let listener = self.listener.take().context("the control socket is already served")?;
        std::thread::Builder::new().name("xfwd-control".into()).spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &view);
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

fn serve(stream: UnixStream, view: &LiveView) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let answer = match line.trim() {
        "stats" => render::stats_detail(&view.report(), &view.ports_now()),
        "stats-json" => serde_json::to_string_pretty(&view.report()).unwrap_or_default() + "\n",
        "fdb" => render::fdb(&view.fdb_entries(), view.fdb.capacity()),
        "routes" => render::routes(view),
        "neighbors" => render::neighbors(view),
        other => format!("error: unknown request `{other}` (stats, stats-json, fdb, routes, neighbors)\n"),
    };
    (&stream).write_all(answer.as_bytes())
}

/// Sends `request` to the xfwd listening on `path` and returns its answer.
pub fn query(path: &Path, request: &str) -> Result<String> {
    let mut s = UnixStream::connect(path).with_context(|| {
        format!("{}: no xfwd answers here (is it running? started with another --control?)", path.display())
    })?;
    s.write_all(format!("{request}\n").as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}
