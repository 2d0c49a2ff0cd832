//! The server's two logs, and reopening them.
//!
//! - The **access log** (CLF or JSON lines, one per response, written by the workers
//!   through a per-worker buffer flushed every tick and at every exit) goes to a
//!   [`LogFile`] or standard output.
//! - The **error log** carries operational conditions (out of descriptors, permission
//!   refused, disk-helper read errors, truncated files, deadlines that cut a
//!   connection, signals) through `tracing`, with `tracing-subscriber`'s formatter as the
//!   one subscriber: to standard error, a [`LogFile`], or nowhere, from a level up.
//!   Conditions a client can cause at any rate are written through a [`RateLimit`], so
//!   a flood of them costs a line a second, with a count of those left out.
//!
//! Both files are opened without blocking (a FIFO nobody reads fails the start instead
//! of hanging it) and reopened by path on `SIGUSR1`, so `mv access.log access.log.1;
//! kill -USR1 PID` sends the next lines to a new file and loses none: a line buffered
//! before the rename lands in the new file, never nowhere.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Where the error log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorLog {
    /// Nowhere.
    Off,
    /// Standard error.
    Stderr,
    /// Appended to a file.
    File(PathBuf),
}

/// A log file appended to by several threads, reopened by path on request. Each `write`
/// is one `write(2)` of an append-mode file, so whole lines from several writers never
/// interleave.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: RwLock<Arc<File>>,
}

impl LogFile {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            file: RwLock::new(Arc::new(open(path)?)),
        })
    }

    /// Opens the path again; the next write goes to what is there now. On failure the
    /// old file stays in use.
    pub fn reopen(&self) -> io::Result<()> {
        let f = Arc::new(open(&self.path)?);
        *self.file.write().unwrap_or_else(PoisonError::into_inner) = f;
        Ok(())
    }

    /// The path given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn current(&self) -> Arc<File> {
        Arc::clone(&self.file.read().unwrap_or_else(PoisonError::into_inner))
    }
}

fn open(path: &Path) -> io::Result<File> {
    linerate_sys::fs::open_append(path).map_err(|e| {
        if e.raw_os_error() == Some(6) {
            // ENXIO from a non-blocking open: a FIFO with no reader.
            io::Error::new(e.kind(), "a FIFO that nobody reads")
        } else {
            e
        }
    })
}

/// A [`LogFile`] as a `Write`: each call is one `write(2)` to the file open now.
#[derive(Clone, Debug)]
pub struct LogWriter(pub Arc<LogFile>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0.current()).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        self.clone()
    }
}

/// Makes the error log the process's `tracing` subscriber; returns its file (None for
/// standard error or off) for reopening. A second call in one process changes nothing.
pub fn install_error_log(
    dest: &ErrorLog,
    level: tracing::Level,
) -> io::Result<Option<Arc<LogFile>>> {
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_target(false)
        .with_max_level(level);
    match dest {
        ErrorLog::Off => Ok(None),
        ErrorLog::Stderr => {
            let _ = builder.with_writer(io::stderr).try_init();
            Ok(None)
        }
        ErrorLog::File(p) => {
            let f = Arc::new(LogFile::open(p)?);
            let _ = builder.with_writer(LogWriter(Arc::clone(&f))).try_init();
            Ok(Some(f))
        }
    }
}

/// At most one line per `every` for a condition that may recur at any rate; the lines
/// left out are counted into the next one.
#[derive(Debug)]
pub struct RateLimit {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    /// One line per `every`.
    pub const fn new(every: Duration) -> RateLimit {
        RateLimit {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// Whether a line may be written now; if so, how many were left out since the last.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.duration_since(t) < self.every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// `" (N more since the last line)"`, or nothing when none were left out.
pub fn more(suppressed: u64) -> String {
    if suppressed == 0 {
        String::new()
    } else {
        format!(" ({suppressed} more like it since the last line)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_allows_one_line_per_period_and_counts_the_rest() {
        let mut r = RateLimit::new(Duration::from_secs(1));
        let t = Instant::now();
        assert_eq!(r.allow(t), Some(0));
        assert_eq!(r.allow(t + Duration::from_millis(10)), None);
        assert_eq!(r.allow(t + Duration::from_millis(900)), None);
        assert_eq!(r.allow(t + Duration::from_millis(1000)), Some(2));
        assert_eq!(r.allow(t + Duration::from_millis(3000)), Some(0));
        assert_eq!(more(0), "");
        assert_eq!(more(2), " (2 more like it since the last line)");
    }

    #[test]
    fn a_reopened_log_file_writes_to_the_new_file_at_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        let f = Arc::new(LogFile::open(&p).unwrap());
        let mut w = LogWriter(Arc::clone(&f));
        w.write_all(b"one\n").unwrap();
        std::fs::rename(&p, dir.path().join("a.log.1")).unwrap();
        w.write_all(b"two\n").unwrap();
        f.reopen().unwrap();
        w.write_all(b"three\n").unwrap();
        let old = std::fs::read_to_string(dir.path().join("a.log.1")).unwrap();
        assert_eq!(old, "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "three\n");
    }

    #[test]
    fn a_fifo_nobody_reads_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let e = LogFile::open(&p).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
