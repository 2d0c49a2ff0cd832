//! What `bench http` asks for: one URL, a list, one file per size, or the SpecWeb99-style
//! static mix of seed 003 — and the file sets `bench files` writes for them.
//!
//! # The SpecWeb99-style mix
//! SPECweb99's static part (the workload seed 003 measured Flash and Apache on) stores
//! files in directories of 36: four classes of nine files each, class 0 holding
//! 0.1-0.9 KB, class 1 1-9 KB, class 2 10-90 KB and class 3 100-900 KB (file `k` of class
//! `c` is `(k + 1) × 1024 × 10^c / 10` bytes). Requests pick a class 35/50/14/1 percent,
//! then a directory and a file within the class by Zipf's law (the `n`-th most popular
//! is chosen in proportion to `1/n`). Directories are ranked by number, files by SPECweb99's
//! fixed order within a class. The same seed gives the same request sequence.
//!
//! # Content
//! Every generated file's bytes are a function of its name, so a client can know a
//! file's length and checksum without reading the file set: `--checksum` verifies bodies
//! against that, and lengths are always verified.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// SpecWeb99's class request shares, in percent.
pub const CLASS_PERCENT: [u32; 4] = [35, 50, 14, 1];
/// Files per class.
pub const FILES_PER_CLASS: usize = 9;
/// SPECweb99's popularity order of the nine files of a class (most popular first).
const FILE_RANK: [usize; FILES_PER_CLASS] = [4, 3, 5, 2, 6, 1, 7, 8, 0];

/// Size of file `k` (0-8) of `class` (0-3) of the mix.
pub fn specweb_size(class: usize, k: usize) -> u64 {
    (k as u64 + 1) * 1024 * 10u64.pow(class as u32) / 10
}

/// Path of file `k` of `class` in directory `dir`, relative to the set's root.
pub fn specweb_path(dir: usize, class: usize, k: usize) -> String {
    format!("specweb99/dir{dir:05}/class{class}_{k}")
}

/// One thing a request can ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The request target (starts with `/`).
    pub path: String,
    /// The body length and CRC-32 a correct response has, when known in advance.
    pub expect: Option<Expect>,
}

/// What a correct response carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    /// Body bytes.
    pub len: u64,
    /// CRC-32 (IEEE) of the body.
    pub crc: u32,
}

/// A request sequence.
#[derive(Clone, Debug)]
pub enum Workload {
    /// These targets, round-robin from a different start on each connection.
    List(Vec<Item>),
    /// The SpecWeb99-style mix over `dirs` directories (paths made by
    /// [`Workload::specweb99`]).
    SpecWeb99 {
        /// Directories in the file set.
        dirs: usize,
        /// Request items, indexed `[dir][class][k]`.
        items: Vec<Item>,
    },
}

impl Workload {
    /// The SpecWeb99 mix under `prefix` (a path ending in `/`), with expected lengths
    /// and checksums.
    pub fn specweb99(prefix: &str, dirs: usize) -> Workload {
        let mut items = Vec::with_capacity(dirs * 4 * FILES_PER_CLASS);
        for d in 0..dirs {
            for c in 0..4 {
                for k in 0..FILES_PER_CLASS {
                    let rel = specweb_path(d, c, k);
                    let len = specweb_size(c, k);
                    items.push(Item {
                        path: format!("{prefix}{rel}"),
                        expect: Some(Expect {
                            len,
                            crc: content_crc(&rel, len),
                        }),
                    });
                }
            }
        }
        Workload::SpecWeb99 { dirs, items }
    }

    /// A short name for reports.
    pub fn describe(&self) -> String {
        match self {
            Workload::List(items) if items.len() == 1 => items[0].path.clone(),
            Workload::List(items) => format!("{} URLs", items.len()),
            Workload::SpecWeb99 { dirs, .. } => format!("specweb99 mix, {dirs} directories"),
        }
    }

    /// A picker for one connection: `seed` and `index` make each connection's sequence
    /// different but reproducible.
    pub fn picker(&self, seed: u64, index: usize) -> Picker {
        match self {
            Workload::List(items) => Picker::RoundRobin {
                next: index % items.len().max(1),
            },
            Workload::SpecWeb99 { dirs, .. } => Picker::Zipf {
                rng: fastrand::Rng::with_seed(seed ^ (index as u64).wrapping_mul(0x9E37_79B9)),
                dir_cdf: zipf_cdf(*dirs),
                file_cdf: zipf_cdf(FILES_PER_CLASS),
            },
        }
    }

    /// All items, for lookups by index.
    pub fn items(&self) -> &[Item] {
        match self {
            Workload::List(items) => items,
            Workload::SpecWeb99 { items, .. } => items,
        }
    }
}

/// Chooses the next request of one connection.
#[derive(Clone, Debug)]
pub enum Picker {
    /// The next in the list.
    RoundRobin {
        /// Index of the next item.
        next: usize,
    },
    /// The SpecWeb99 draw.
    Zipf {
        /// The connection's generator.
        rng: fastrand::Rng,
        /// Cumulative directory popularity.
        dir_cdf: Vec<f64>,
        /// Cumulative file popularity within a class.
        file_cdf: Vec<f64>,
    },
}

impl Picker {
    /// Index into [`Workload::items`] of the next request.
    pub fn next(&mut self, n_items: usize) -> usize {
        match self {
            Picker::RoundRobin { next } => {
                let i = *next;
                *next = (i + 1) % n_items.max(1);
                i
            }
            Picker::Zipf {
                rng,
                dir_cdf,
                file_cdf,
            } => {
                let mut roll = rng.u32(0..100);
                let mut class = 0;
                while roll >= CLASS_PERCENT[class] {
                    roll -= CLASS_PERCENT[class];
                    class += 1;
                }
                let dir = draw(dir_cdf, rng.f64());
                let k = FILE_RANK[draw(file_cdf, rng.f64())];
                (dir * 4 + class) * FILES_PER_CLASS + k
            }
        }
    }
}

/// Cumulative Zipf (exponent 1) popularity of `n` ranks, normalized to end at 1.
fn zipf_cdf(n: usize) -> Vec<f64> {
    let mut acc = 0.0;
    let mut v: Vec<f64> = (1..=n.max(1))
        .map(|r| {
            acc += 1.0 / r as f64;
            acc
        })
        .collect();
    let total = acc;
    for x in &mut v {
        *x /= total;
    }
    v
}

/// The rank whose cumulative share first exceeds `u` (in `[0, 1)`).
fn draw(cdf: &[f64], u: f64) -> usize {
    cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
}

/// The bytes of generated file `name` of length `len`, fed to `sink` in blocks.
/// A 4 KiB block drawn from a generator seeded by the name, each copy stamped with its
/// block number so no two blocks of a file are equal.
pub fn content(
    name: &str,
    len: u64,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    const BLOCK: usize = 4096;
    let mut rng = fastrand::Rng::with_seed(crc32fast::hash(name.as_bytes()) as u64);
    let mut block = vec![0u8; BLOCK];
    rng.fill(&mut block);
    let mut done = 0u64;
    let mut n = 0u64;
    while done < len {
        block[..8].copy_from_slice(&n.to_le_bytes());
        let take = (len - done).min(BLOCK as u64) as usize;
        sink(&block[..take])?;
        done += take as u64;
        n += 1;
    }
    Ok(())
}

/// CRC-32 of generated file `name` of length `len`.
pub fn content_crc(name: &str, len: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let _ = content(name, len, |b| {
        h.update(b);
        Ok(())
    });
    h.finalize()
}

/// Name of the file `bench files --sizes` writes for `bytes` (for example `100K.bin`).
pub fn size_file_name(bytes: u64) -> String {
    format!("{}.bin", linerate_tx::format_size(bytes))
}

/// Name of the text file `bench compare --gzip` writes for `bytes` (`100K.js`).
pub fn text_file_name(bytes: u64) -> String {
    format!("{}.js", linerate_tx::format_size(bytes))
}

/// Writes `SIZE.js` under `root`, `len` bytes of JavaScript-like text (which gzip
/// shrinks about as much as real scripts), and `SIZE.js.gz` beside it (`gzip -9`,
/// written second so it is not older); returns the item asking for the `.js`, with
/// the `.gz`'s length and CRC when `exact` (the server sends that very file).
pub fn write_text_size(root: &Path, prefix: &str, len: u64, exact: bool) -> io::Result<Item> {
    let name = text_file_name(len);
    // Words of scripts and pseudo-random numbers: gzip -9 makes 100 KiB of it about
    // 27 KiB, as it does real scripts (3.5-4 to 1).
    const WORDS: [&str; 32] = [
        "render", "state", "props", "value", "index", "length", "filter", "reduce", "event",
        "target", "handler", "element", "document", "query", "selector", "style", "update",
        "create", "remove", "append", "child", "parent", "node", "parse", "string", "object",
        "promise", "then", "fetch", "request", "status", "options",
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut text = Vec::with_capacity(len as usize + 160);
    while (text.len() as u64) < len {
        let w: Vec<&str> = (0..4).map(|_| WORDS[(next() % 32) as usize]).collect();
        let line = format!(
            "function {}_{}({}, {}) {{ return {}.{}({}, {}) || \"{}-{}\"; }}\n",
            w[0],
            next() % 10_000,
            w[1],
            w[2],
            w[1],
            w[3],
            w[2],
            next() % 100_000,
            w[0],
            next() % 1000
        );
        text.extend_from_slice(line.as_bytes());
    }
    text.truncate(len as usize);
    fs::write(root.join(&name), &text)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&text)?;
    let gz = gz.finish()?;
    fs::write(root.join(format!("{name}.gz")), &gz)?;
    let mut h = crc32fast::Hasher::new();
    h.update(&gz);
    Ok(Item {
        path: format!("{prefix}{name}"),
        expect: exact.then(|| Expect {
            len: gz.len() as u64,
            crc: h.finalize(),
        }),
    })
}

/// Writes one generated file (skipped when one of that length and content is there).
pub fn write_generated(root: &Path, rel: &str, len: u64) -> io::Result<PathBuf> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    if fs::metadata(&path).map(|m| m.len() == len).unwrap_or(false) {
        let mut h = crc32fast::Hasher::new();
        h.update(&fs::read(&path)?);
        if h.finalize() == content_crc(rel, len) {
            return Ok(path);
        }
    }
    // Written beside and renamed, so a server reading the set never sees half a file.
    let tmp = path.with_extension("linerate-tmp");
    let mut f = io::BufWriter::new(fs::File::create(&tmp)?);
    content(rel, len, |b| f.write_all(b))?;
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(&tmp, &path)?;
    Ok(path)
}

/// What `bench files` made.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FileSet {
    /// Files in the set.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
}

/// Writes one file per size under `root` (named by [`size_file_name`]).
pub fn write_sizes(root: &Path, sizes: &[u64]) -> io::Result<FileSet> {
    let mut set = FileSet::default();
    for &len in sizes {
        write_generated(root, &size_file_name(len), len)?;
        set.files += 1;
        set.bytes += len;
    }
    Ok(set)
}

/// Writes the SpecWeb99-style set of `dirs` directories under `root/specweb99/`.
pub fn write_specweb99(root: &Path, dirs: usize) -> io::Result<FileSet> {
    let mut set = FileSet::default();
    for d in 0..dirs {
        for c in 0..4 {
            for k in 0..FILES_PER_CLASS {
                let len = specweb_size(c, k);
                write_generated(root, &specweb_path(d, c, k), len)?;
                set.files += 1;
                set.bytes += len;
            }
        }
    }
    Ok(set)
}

/// The item for a file of the sizes set under `prefix`.
pub fn size_item(prefix: &str, bytes: u64) -> Item {
    let name = size_file_name(bytes);
    Item {
        path: format!("{prefix}{name}"),
        expect: Some(Expect {
            len: bytes,
            crc: content_crc(&name, bytes),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specweb_sizes_span_the_classes() {
        assert_eq!(specweb_size(0, 0), 102);
        assert_eq!(specweb_size(0, 8), 921);
        assert_eq!(specweb_size(1, 0), 1024);
        assert_eq!(specweb_size(2, 8), 92160);
        assert_eq!(specweb_size(3, 8), 921600);
    }

    #[test]
    fn mix_follows_the_class_shares_and_zipf() {
        let w = Workload::specweb99("/", 10);
        let mut p = w.picker(7, 0);
        let n = 200_000;
        let mut class = [0u32; 4];
        let mut dir = [0u32; 10];
        for _ in 0..n {
            let i = p.next(w.items().len());
            class[(i / FILES_PER_CLASS) % 4] += 1;
            dir[i / (4 * FILES_PER_CLASS)] += 1;
        }
        for (c, &count) in class.iter().enumerate() {
            let share = 100.0 * count as f64 / n as f64;
            assert!(
                (share - CLASS_PERCENT[c] as f64).abs() < 0.6,
                "class {c}: {share}%"
            );
        }
        // Zipf: directory 0 about twice as popular as directory 1, ten times directory 9.
        let r01 = dir[0] as f64 / dir[1] as f64;
        let r09 = dir[0] as f64 / dir[9] as f64;
        assert!((1.8..2.2).contains(&r01), "dir0/dir1 = {r01}");
        assert!((8.5..11.5).contains(&r09), "dir0/dir9 = {r09}");
    }

    #[test]
    fn same_seed_same_sequence_other_connection_other_sequence() {
        let w = Workload::specweb99("/", 4);
        let seq = |seed, idx| {
            let mut p = w.picker(seed, idx);
            (0..50).map(|_| p.next(w.items().len())).collect::<Vec<_>>()
        };
        assert_eq!(seq(1, 0), seq(1, 0));
        assert_ne!(seq(1, 0), seq(1, 1));
    }

    #[test]
    fn generated_files_match_their_expectations() {
        let dir = tempfile::tempdir().unwrap();
        let set = write_sizes(dir.path(), &[0, 100, 5000]).unwrap();
        assert_eq!(set.files, 3);
        for n in [0u64, 100, 5000] {
            let it = size_item("/", n);
            let body = fs::read(dir.path().join(size_file_name(n))).unwrap();
            assert_eq!(body.len() as u64, it.expect.unwrap().len);
            assert_eq!(crc32fast::hash(&body), it.expect.unwrap().crc);
        }
        // Blocks differ from each other.
        let body = fs::read(dir.path().join(size_file_name(5000))).unwrap();
        assert_ne!(&body[..4096][..100], &body[4096..][..100]);
        // A damaged file is rewritten; an intact one is kept.
        let p = dir.path().join(size_file_name(100));
        fs::write(&p, vec![0u8; 100]).unwrap();
        write_sizes(dir.path(), &[100]).unwrap();
        assert_eq!(
            crc32fast::hash(&fs::read(&p).unwrap()),
            size_item("/", 100).expect.unwrap().crc
        );
    }
}
