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
//! Access-log lines are written whole or not at all: a write that the disk cut short
//! (`ENOSPC` part-way, `EIO`) has its torn tail cut off the file again, and the lines
//! that did not fit are dropped, counted (`linerate_log_lines_dropped_total`) and said
//! in the error log once a minute; the next flush writes again.
//!
//! Both files are opened without blocking (a FIFO nobody reads fails the start instead
//! of hanging it) and reopened by path on `SIGUSR1`, so `mv access.log access.log.1;
//! kill -USR1 PID` sends the next lines to a new file and loses none: a line buffered
//! before the rename lands in the new file, never nowhere.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
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
    /// Held by [`AccessLines`]'s appends, so a torn tail is cut off before another
    /// worker appends after it.
    append: Mutex<()>,
}

impl LogFile {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            file: RwLock::new(Arc::new(open(path)?)),
            append: Mutex::new(()),
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
        if linerate_sys::Errno::NXIO.is(&e) {
            // ENXIO from a non-blocking open: a FIFO with no reader.
            io::Error::new(e.kind(), "a FIFO that nobody reads")
        } else {
            e
        }
    })
}

/// Where a worker's access-log lines go.
#[derive(Debug)]
pub enum AccessTarget {
    /// Standard output (its own descriptor: lines are buffered here, not by `std`).
    Stdout(File),
    /// A file, reopened by path on `SIGUSR1`.
    File(Arc<LogFile>),
}

/// One worker's access log: whole lines buffered, written by one `write(2)` each flush
/// (every tick, at every exit, and when 64 KiB are waiting).
#[derive(Debug)]
pub struct AccessLines {
    buf: Vec<u8>,
    target: AccessTarget,
}

/// Serialises appends to standard output as [`LogFile::append`] does to a file.
static STDOUT_APPEND: Mutex<()> = Mutex::new(());

/// Once a minute, for the whole process: lines dropped by a full or failing disk.
static DROP_NOTE: Mutex<RateLimit> = Mutex::new(RateLimit::new(Duration::from_secs(60)));

impl AccessLines {
    const FLUSH_AT: usize = 64 << 10;

    pub fn new(target: AccessTarget) -> AccessLines {
        AccessLines {
            buf: Vec::new(),
            target,
        }
    }

    /// Adds one whole line (ending in `\n`); returns the lines dropped if it had to
    /// flush.
    pub fn push(&mut self, line: &str) -> u64 {
        self.buf.extend_from_slice(line.as_bytes());
        if self.buf.len() >= Self::FLUSH_AT {
            self.flush()
        } else {
            0
        }
    }

    /// Writes what is buffered; returns how many lines were dropped (the disk was full
    /// or failing), after saying so in the error log at most once a minute.
    pub fn flush(&mut self) -> u64 {
        if self.buf.is_empty() {
            return 0;
        }
        let (dropped, error) = match &self.target {
            AccessTarget::Stdout(f) => {
                let _held = STDOUT_APPEND.lock().unwrap_or_else(PoisonError::into_inner);
                append_whole_lines(f, &self.buf)
            }
            AccessTarget::File(l) => {
                let f = l.current();
                let _held = l.append.lock().unwrap_or_else(PoisonError::into_inner);
                append_whole_lines(&f, &self.buf)
            }
        };
        self.buf.clear();
        if dropped > 0 {
            let mut note = DROP_NOTE.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(left_out) = note.allow(Instant::now()) {
                tracing::error!(
                    "access log: {dropped} line(s) dropped: {}; lines are written again when the disk takes them{}",
                    error.map_or_else(|| "a short write".to_string(), |e| e.to_string()),
                    more(left_out)
                );
            }
        }
        dropped
    }
}

/// Appends `buf` (whole lines) to `f` with one `write(2)`, retried for what a short
/// count left; if the disk refuses part of it, the torn tail of the last line written
/// is cut off the file again (its length set back, the offset to its end) so no line is
/// ever half there. Returns the lines dropped and why.
fn append_whole_lines(mut f: &File, buf: &[u8]) -> (u64, Option<io::Error>) {
    use std::io::Seek;
    let lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() as u64;
    // Where the file ended before: a torn tail is cut off only if nothing else was
    // appended since (another process's lines, during an upgrade, stay whole).
    let before = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    let mut done = 0;
    let error = loop {
        if done == buf.len() {
            return (0, None);
        }
        match f.write(&buf[done..]) {
            Ok(0) => break None,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    let whole = buf[..done]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |k| k + 1);
    let torn = (done - whole) as u64;
    if torn > 0 {
        if let (Some(before), Ok(m)) = (before, f.metadata()) {
            if m.len() == before + done as u64 {
                let _ = f.set_len(m.len() - torn);
                let _ = f.seek(io::SeekFrom::End(0));
            }
        }
    }
    (lines(&buf[whole..]), error)
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

/// The target of lines written whatever the level (at info): what an operator asked
/// for and should see done, as a good reload (nginx's notices).
pub const NOTICE: &str = "notice";

/// Makes the error log the process's `tracing` subscriber; returns its file (None for
/// standard error or off) for reopening. A second call in one process changes nothing.
pub fn install_error_log(
    dest: &ErrorLog,
    level: tracing::Level,
) -> io::Result<Option<Arc<LogFile>>> {
    match dest {
        ErrorLog::Off => Ok(None),
        ErrorLog::Stderr => {
            subscribe(level, io::stderr);
            Ok(None)
        }
        ErrorLog::File(p) => {
            let f = Arc::new(LogFile::open(p)?);
            subscribe(level, LogWriter(Arc::clone(&f)));
            Ok(Some(f))
        }
    }
}

/// Lines from `level` up, and [`NOTICE`]s, to `writer`.
fn subscribe<W>(level: tracing::Level, writer: W)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(level)
        .with_target(NOTICE, tracing::Level::INFO);
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_target(false)
        .with_max_level(level.max(tracing::Level::INFO))
        .with_writer(writer)
        .finish()
        .with(filter)
        .try_init();
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

    /// Whole lines are appended; a device that refuses them drops them all, counted.
    /// (A short count's torn tail is tested through the binary on a full tmpfs:
    /// serve_reload.rs.)
    #[test]
    fn lines_are_appended_whole_or_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let f = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mut text = String::new();
        for i in 0..10 {
            text.push_str(&format!("line {i} of ten\n"));
        }
        assert_eq!(append_whole_lines(&f, text.as_bytes()).0, 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let full = File::options().write(true).open("/dev/full").unwrap();
        let (dropped, e) = append_whole_lines(&full, text.as_bytes());
        assert_eq!(dropped, 10);
        assert_eq!(e.unwrap().kind(), io::ErrorKind::StorageFull);
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
