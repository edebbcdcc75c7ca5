//! The router's configuration read from disk: the file, and the routes file it names; the
//! bridge's file. The config
//! crate parses text and reads nothing; the files are read here, for `xfwd router` (start,
//! `--check`, the reload on SIGHUP) and `xfwd kernel router`.

use std::path::Path;

use xfwd_config::{ConfigError, RouterConfig};

/// Reads and validates the configuration file `path` and the routes file it names.
pub fn load(path: &Path) -> Result<RouterConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::unreadable(path, &e))?;
    RouterConfig::parse(path, &text, |routes| std::fs::read_to_string(routes))
}

/// Reads and validates the bridge file `path`.
pub fn load_bridge(path: &Path) -> Result<xfwd_config::BridgeConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::unreadable(path, &e))?;
    xfwd_config::BridgeConfig::parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("xfwd-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn reads_the_file_and_the_routes_file_beside_it() {
        let dir = TempDir::new("config-file-test");
        let cfg = dir.0.join("router.toml");
        std::fs::write(
            &cfg,
            "routes_file = \"routes.txt\"\n[[interface]]\nname = \"eth5\"\naddresses = [\"192.168.10.2/24\"]\n",
        )
        .unwrap();
        let e = load(&cfg).unwrap_err();
        assert_eq!((e.path.as_path(), e.line, e.col), (cfg.as_path(), 1, 15), "{e}");
        assert!(e.message.starts_with(&format!("routes_file {}: ", dir.0.join("routes.txt").display())), "{e}");

        std::fs::write(dir.0.join("routes.txt"), "10.1.0.0/16 via 192.168.10.1\n10.2.0.0/16 via 192.168.77.1\n")
            .unwrap();
        let e = load(&cfg).unwrap_err();
        assert_eq!((e.path, e.line, e.col), (dir.0.join("routes.txt"), 2, 17));

        std::fs::write(dir.0.join("routes.txt"), "10.1.0.0/16 via 192.168.10.1\n").unwrap();
        assert_eq!(load(&cfg).unwrap().routes.len(), 1);

        let missing = dir.0.join("nope.toml");
        assert_eq!(
            load(&missing).unwrap_err().to_string(),
            format!("{}: cannot read: No such file or directory (os error 2)", missing.display())
        );
    }
}
