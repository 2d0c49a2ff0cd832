//! `linerate compress DIR`: writes the precompressed variants the server sends
//! (`FILE.br`, `FILE.zst`, `FILE.gz`, docs/http.md V3) where they are missing or older
//! than their file, for every file under DIR whose type gains by compression.
//!
//! Each variant is written beside its file under a hidden temporary name and renamed
//! into place, so a reader (the server, a mirror's rsync) sees the old variant or the
//! new one whole, never a part. A variant that would not save at least
//! `min_saving` of the file is not written: sending it would save the client less than
//! the `Vary` costs caches. Symbolic links are not followed (a link into another tree
//! must not have files written there) and dot-files are left alone unless asked.
//! Runs are idempotent: a second one finds every variant current and writes nothing.
//! Files are compressed on `jobs` threads; the encoders are the `flate2`, `brotli` and
//! `zstd` crates.

use std::fs::{self, File};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use linerate_http::coding::Coding;
use serde::Serialize;

/// How to compress.
#[derive(Clone, Debug)]
pub struct Options {
    /// The variants to write.
    pub codings: Vec<Coding>,
    /// gzip level, 1 to 9.
    pub gzip_level: u32,
    /// Brotli quality, 0 to 11.
    pub brotli_level: u32,
    /// Zstandard level, 1 to 22.
    pub zstd_level: i32,
    /// A variant is written only if it saves at least this fraction of its file's
    /// size (0.1: 10%).
    pub min_saving: f64,
    /// Threads compressing at once.
    pub jobs: usize,
    /// Also files and directories whose names start with `.`.
    pub dotfiles: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            codings: Coding::ALL.to_vec(),
            gzip_level: 9,
            brotli_level: 11,
            zstd_level: 19,
            min_saving: 0.1,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            dotfiles: false,
        }
    }
}

/// One variant to look at: `file`'s in `coding`.
#[derive(Clone, Debug)]
pub struct Job {
    pub file: PathBuf,
    pub coding: Coding,
    /// The file's size and modification time when the tree was walked.
    size: u64,
    modified: SystemTime,
}

impl Job {
    /// The variant's path.
    pub fn variant(&self) -> PathBuf {
        let mut p = self.file.clone().into_os_string();
        p.push(self.coding.suffix());
        PathBuf::from(p)
    }
}

/// What became of one variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written: the file's bytes and the variant's.
    Written { original: u64, compressed: u64 },
    /// Already there and not older than its file.
    Current,
    /// Not written: it would not have saved enough.
    NotSmaller { original: u64, compressed: u64 },
    /// Failed, with why.
    Failed(String),
}

/// The run's totals.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Report {
    /// Files whose type gains by compression.
    pub files: u64,
    /// Variants written, already current, and not worth writing.
    pub written: u64,
    pub current: u64,
    pub not_smaller: u64,
    /// Bytes of the files compressed, and of the variants written from them.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// One line per failure.
    pub errors: Vec<String>,
}

/// What a run will look at.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Files whose type gains by compression.
    pub files: u64,
    /// Each of their variants.
    pub jobs: Vec<Job>,
}

/// Every variant under `dir` to look at: each file (not a link) whose type gains by
/// compression, once per coding.
pub fn plan(dir: &Path, opts: &Options) -> io::Result<Plan> {
    let mut files = 0;
    let mut jobs = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<fs::DirEntry> = fs::read_dir(&d)?.collect::<io::Result<_>>()?;
        entries.sort_by_key(fs::DirEntry::file_name);
        for e in entries {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') && !opts.dotfiles {
                continue;
            }
            let kind = e.file_type()?;
            if kind.is_dir() {
                dirs.push(e.path());
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let ty = linerate_http::mime::content_type(name);
            if !linerate_http::mime::compressible(&ty) {
                continue;
            }
            let meta = e.metadata()?;
            files += 1;
            for &coding in &opts.codings {
                jobs.push(Job {
                    file: e.path(),
                    coding,
                    size: meta.len(),
                    modified: meta.modified()?,
                });
            }
        }
    }
    Ok(Plan { files, jobs })
}

/// Does one job.
pub fn run_one(job: &Job, opts: &Options) -> Outcome {
    let variant = job.variant();
    if let Ok(m) = fs::symlink_metadata(&variant) {
        if m.is_file() && m.modified().is_ok_and(|t| t >= job.modified) {
            return Outcome::Current;
        }
    }
    match write_variant(job, &variant, opts) {
        Ok(o) => o,
        Err(e) => Outcome::Failed(format!("{}: {e}", variant.display())),
    }
}

/// A hidden name beside `variant` for writing it.
fn temporary(variant: &Path) -> PathBuf {
    let name = variant.file_name().unwrap_or_default().to_string_lossy();
    variant.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn write_variant(job: &Job, variant: &Path, opts: &Options) -> io::Result<Outcome> {
    let tmp = temporary(variant);
    let written = (|| -> io::Result<u64> {
        let mut input = BufReader::new(File::open(&job.file)?);
        let out = io::BufWriter::new(File::create(&tmp)?);
        let out = encode(job.coding, &mut input, out, opts, job.size)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        // Readable by whoever may read the file.
        file.set_permissions(fs::metadata(&job.file)?.permissions())?;
        Ok(file.metadata()?.len())
    })();
    let compressed = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let original = job.size;
    if (compressed as f64) > (original as f64) * (1.0 - opts.min_saving) {
        fs::remove_file(&tmp)?;
        return Ok(Outcome::NotSmaller {
            original,
            compressed,
        });
    }
    if let Err(e) = fs::rename(&tmp, variant) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(Outcome::Written {
        original,
        compressed,
    })
}

/// Compresses all of `input` (`size` bytes: zstd writes it in its frame) into `out` in
/// `coding`, at `opts`' level for it; gives `out` back.
pub(crate) fn encode<W: Write>(
    coding: Coding,
    input: &mut impl io::Read,
    out: W,
    opts: &Options,
    size: u64,
) -> io::Result<W> {
    Ok(match coding {
        Coding::Gzip => {
            let level = flate2::Compression::new(opts.gzip_level);
            let mut enc = flate2::write::GzEncoder::new(out, level);
            io::copy(input, &mut enc)?;
            enc.finish()?
        }
        Coding::Br => {
            let mut enc = brotli::CompressorWriter::new(out, 1 << 16, opts.brotli_level, 22);
            io::copy(input, &mut enc)?;
            enc.flush()?;
            enc.into_inner()
        }
        Coding::Zstd => {
            let mut enc = zstd::Encoder::new(out, opts.zstd_level)?;
            enc.include_contentsize(true)?;
            enc.set_pledged_src_size(Some(size))?;
            io::copy(input, &mut enc)?;
            enc.finish()?
        }
    })
}

/// Does every job of `plan` on `opts.jobs` threads; `done` hears each outcome as it
/// comes.
pub fn run(plan: &Plan, opts: &Options, done: &(dyn Fn(&Job, &Outcome) + Sync)) -> Report {
    let jobs = &plan.jobs;
    let next = AtomicUsize::new(0);
    let report = Mutex::new(Report {
        files: plan.files,
        ..Report::default()
    });
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.clamp(1, jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let outcome = run_one(job, opts);
                done(job, &outcome);
                let mut r = report
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match outcome {
                    Outcome::Written {
                        original,
                        compressed,
                    } => {
                        r.written += 1;
                        r.bytes_in += original;
                        r.bytes_out += compressed;
                    }
                    Outcome::Current => r.current += 1,
                    Outcome::NotSmaller { .. } => r.not_smaller += 1,
                    Outcome::Failed(e) => r.errors.push(e),
                }
            });
        }
    });
    report
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Read;

    /// `n` random bytes (xorshift): nothing compresses them.
    pub(crate) fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    fn decompress(c: Coding, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match c {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(bytes)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(bytes, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => out = zstd::decode_all(bytes).unwrap(),
        }
        out
    }

    #[test]
    fn variants_decompress_to_their_file_and_a_second_run_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let text = "linerate compress ".repeat(2000);
        fs::create_dir(d.path().join("sub")).unwrap();
        fs::write(d.path().join("sub/a.js"), &text).unwrap();
        fs::write(d.path().join("b.png"), &text).unwrap();
        fs::write(d.path().join(".hidden.css"), &text).unwrap();
        // Random bytes named as text: no variant saves 10%.
        fs::write(d.path().join("noise.txt"), noise(20_000)).unwrap();
        let opts = Options {
            brotli_level: 5,
            zstd_level: 3,
            ..Options::default()
        };
        let p = plan(d.path(), &opts).unwrap();
        assert_eq!(
            (p.files, p.jobs.len()),
            (2, 6),
            "a.js and noise.txt, three codings each"
        );
        let r = run(&p, &opts, &|_, _| {});
        assert_eq!((r.written, r.not_smaller, r.current), (3, 3, 0), "{r:?}");
        assert!(r.errors.is_empty(), "{r:?}");
        for c in Coding::ALL {
            let v = fs::read(d.path().join(format!("sub/a.js{}", c.suffix()))).unwrap();
            assert!(v.len() < text.len() / 10, "{c}: {}", v.len());
            assert_eq!(decompress(c, &v), text.as_bytes(), "{c}");
            assert!(!d.path().join(format!("noise.txt{}", c.suffix())).exists());
        }
        let again = run(&plan(d.path(), &opts).unwrap(), &opts, &|_, _| {});
        assert_eq!((again.written, again.current), (0, 3), "{again:?}");
        // No temporary file is left behind.
        let left: Vec<_> = fs::read_dir(d.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_stale_variant_is_written_again() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.html");
        fs::write(&f, "<p>new</p>".repeat(500)).unwrap();
        fs::write(d.path().join("a.html.gz"), b"stale").unwrap();
        let old = SystemTime::now() - std::time::Duration::from_secs(60);
        File::options()
            .write(true)
            .open(d.path().join("a.html.gz"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let opts = Options {
            codings: vec![Coding::Gzip],
            ..Options::default()
        };
        let r = run(&plan(d.path(), &opts).unwrap(), &opts, &|_, _| {});
        assert_eq!(r.written, 1, "{r:?}");
        let v = fs::read(d.path().join("a.html.gz")).unwrap();
        assert_eq!(decompress(Coding::Gzip, &v), fs::read(&f).unwrap());
    }
}
