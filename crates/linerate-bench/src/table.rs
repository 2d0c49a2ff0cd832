//! `linerate bench stream --table`: seed 000's table on this machine. Every cell of a
//! grid of paths (loopback, and two namespaces over veth with TSO on or off) × socket
//! buffers (`-s` and `-S`) × send sizes (`-m`) × strategies is one [`stream::run`],
//! repeated for a number of rounds and interleaved: the strategy is the innermost loop
//! and the rounds the outermost, so the machine's drift falls on every cell alike.
//!
//! Each run's result goes to `OUT/raw.jsonl` as it ends (one JSON object per line, with
//! the cell's keys), each cell's samples to `OUT/samples/` (ministat files, one per cell
//! and [metric](stream::METRICS)). The summary is a markdown table per path (mean ±
//! standard deviation of every metric) and the two bars of seed 000's issue over netns
//! with TSO on: sender service demand of `sendfile-4k`, then of `sendfile-chunk-64K`,
//! against batched `sendfile`, each judged by [`series::judge`] (Student's t and the
//! paired reading).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use linerate_stat::{Better, Confidence, DataSet};
use linerate_tx::{format_size, Strategy};
use serde::Serialize;

use crate::netns::Topology;
use crate::series::{self, Samples, Verdict};
use crate::stream::{
    self, NetnsSettings, StreamConfig, StreamError, StreamResult, StreamSource, METRICS,
};
use crate::StopFlag;

/// Where the bytes of a cell travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TablePath {
    /// Loopback, to a sink started on 127.0.0.1.
    #[serde(rename = "loopback")]
    Loopback,
    /// Two namespaces over veth, TSO and GSO on (`--netns --tso on`).
    #[serde(rename = "on")]
    TsoOn,
    /// Two namespaces over veth, TSO and GSO off (`--netns --tso off`).
    #[serde(rename = "off")]
    TsoOff,
}

impl TablePath {
    /// Every path, in the table's order.
    pub const ALL: [TablePath; 3] = [TablePath::Loopback, TablePath::TsoOn, TablePath::TsoOff];

    /// The name on the command line and in raw.jsonl's `cell_path`.
    pub fn key(self) -> &'static str {
        match self {
            TablePath::Loopback => "loopback",
            TablePath::TsoOn => "on",
            TablePath::TsoOff => "off",
        }
    }

    /// The heading of the path's table.
    pub fn title(self) -> &'static str {
        match self {
            TablePath::Loopback => "loopback",
            TablePath::TsoOn => "netns, TSO on",
            TablePath::TsoOff => "netns, TSO off",
        }
    }

    fn netns(self) -> Option<NetnsSettings> {
        match self {
            TablePath::Loopback => None,
            TablePath::TsoOn => Some(NetnsSettings { tso: true }),
            TablePath::TsoOff => Some(NetnsSettings { tso: false }),
        }
    }
}

impl FromStr for TablePath {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TablePath::ALL
            .into_iter()
            .find(|p| p.key() == s)
            .ok_or_else(|| format!("unknown path '{s}' (expected loopback, on or off)"))
    }
}

/// The grid: every combination of its four lists is a cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Paths.
    pub paths: Vec<TablePath>,
    /// Socket buffers, the sender's `SO_SNDBUF` and the sink's `SO_RCVBUF` alike.
    pub bufs: Vec<usize>,
    /// Caps on bytes per call (netperf's send size, `-m`).
    pub sizes: Vec<usize>,
    /// Strategies.
    pub strategies: Vec<Strategy>,
}

impl Default for Grid {
    /// Seed 000's grid: three paths, buffers of 32, 64 and 128 KiB, send sizes of 64 KiB
    /// and 1 MiB, every strategy.
    fn default() -> Self {
        Grid {
            paths: TablePath::ALL.to_vec(),
            bufs: vec![32 << 10, 64 << 10, 128 << 10],
            sizes: vec![64 << 10, 1 << 20],
            strategies: Strategy::ALL.to_vec(),
        }
    }
}

impl Grid {
    /// The cells in run order within a round: paths, then buffers, then send sizes, then
    /// strategies (innermost).
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &path in &self.paths {
            for &buf in &self.bufs {
                for &send_size in &self.sizes {
                    for &strategy in &self.strategies {
                        cells.push(Cell {
                            path,
                            buf,
                            send_size,
                            strategy,
                        });
                    }
                }
            }
        }
        cells
    }
}

/// A comma-separated list of paths: `loopback,on,off`.
pub fn parse_paths(s: &str) -> Result<Vec<TablePath>, String> {
    parse_list(s, str::parse)
}

/// A comma-separated list of byte counts (`32K,64K,128K`), each from 1 byte to
/// `i32::MAX` (what a socket option takes).
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    parse_list(s, |w| match linerate_tx::parse_size(w)? {
        0 => Err(format!("'{w}': must be at least 1 byte")),
        n if n > i32::MAX as u64 => Err(format!("'{w}' is too large")),
        n => Ok(n as usize),
    })
}

/// A comma-separated list of strategies: `copy,sendfile-4k,sendfile`.
pub fn parse_strategies(s: &str) -> Result<Vec<Strategy>, String> {
    parse_list(s, |w| {
        w.parse()
            .map_err(|e: linerate_tx::ParseStrategyError| e.to_string())
    })
}

/// Non-empty, comma-separated, each item parsed and given once.
fn parse_list<T: PartialEq>(
    s: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for word in s.split(',').map(str::trim) {
        if word.is_empty() {
            return Err(format!(
                "'{s}': give a comma-separated list with no empty item"
            ));
        }
        let v = parse(word)?;
        if out.contains(&v) {
            return Err(format!("'{word}' is given twice"));
        }
        out.push(v);
    }
    Ok(out)
}

/// One cell of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// Where the bytes travel.
    pub path: TablePath,
    /// `-s` and `-S`.
    pub buf: usize,
    /// `-m`.
    pub send_size: usize,
    /// The strategy.
    pub strategy: Strategy,
}

impl Cell {
    /// The cell's name, and its sample files' (`on-s32K-m64K-sendfile-4k.sender_sd`).
    pub fn label(&self) -> String {
        format!(
            "{}-s{}-m{}-{}",
            self.path.key(),
            format_size(self.buf as u64),
            format_size(self.send_size as u64),
            self.strategy
        )
    }

    /// `base` with the cell's path, buffers, send size and strategy.
    fn config(&self, base: &StreamConfig) -> StreamConfig {
        let mut c = base.clone();
        c.target = None;
        c.netns = self.path.netns();
        c.sndbuf = Some(self.buf);
        c.rcvbuf = Some(self.buf);
        c.tx.max_call_bytes = Some(self.send_size);
        c.tx.strategy = self.strategy;
        c
    }
}

/// Settings of a table run.
#[derive(Clone, Debug)]
pub struct TableConfig {
    /// The cells.
    pub grid: Grid,
    /// Runs per cell.
    pub rounds: usize,
    /// Everything a cell does not set: the limit, the source, pinning, the sink's
    /// discard, the transmit knobs. A generated temporary file is made once and sent
    /// by every run.
    pub base: StreamConfig,
    /// Where raw.jsonl and samples/ go.
    pub out: PathBuf,
    /// Confidence of the bars' verdicts.
    pub confidence: Confidence,
}

/// What the run is doing, for a progress display.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A namespace path cannot be built here and is left out.
    Skipped {
        /// The path.
        path: TablePath,
        /// Why, in one line.
        reason: &'a str,
    },
    /// A run starts.
    Run {
        /// Runs started so far, this one included.
        done: usize,
        /// Runs in all.
        total: usize,
        /// The round, from 1.
        round: usize,
        /// The cell.
        cell: &'a Cell,
    },
}

/// Why a table run failed.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// A run failed or was interrupted.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// An output file.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Every path was skipped or the grid is empty.
    #[error("nothing to run: {0}")]
    NothingToRun(String),
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> TableError + '_ {
    move |source| TableError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A path left out, and why.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedPath {
    /// The path.
    pub path: TablePath,
    /// Why.
    pub reason: String,
}

/// One metric of one cell.
#[derive(Clone, Debug, Serialize)]
pub struct MetricSamples {
    /// The metric's name (see [`stream::METRICS`]).
    pub metric: &'static str,
    /// One value per round, in round order.
    pub values: Vec<f64>,
    /// Mean (`None` under three values, which linerate-stat does not summarize).
    pub mean: Option<f64>,
    /// Sample standard deviation (`None` under three values).
    pub stddev: Option<f64>,
}

/// The runs of one cell, summarized.
#[derive(Clone, Debug, Serialize)]
pub struct CellResult {
    /// The cell's name, as in its sample files.
    pub label: String,
    /// Path.
    pub path: TablePath,
    /// `-s` and `-S`.
    pub buf: String,
    /// `-m`.
    pub send_size: String,
    /// Strategy.
    pub strategy: String,
    /// Every metric of [`stream::METRICS`], in its order.
    pub samples: Vec<MetricSamples>,
    #[serde(skip)]
    cell: Cell,
}

impl CellResult {
    fn metric(&self, name: &str) -> Option<&MetricSamples> {
        self.samples.iter().find(|m| m.metric == name)
    }

    fn mean(&self, name: &str) -> f64 {
        self.metric(name).and_then(|m| m.mean).unwrap_or(f64::NAN)
    }
}

/// A bar judged.
#[derive(Clone, Debug, Serialize)]
pub struct JudgedBar {
    /// The two sample files of sender service demand, relative to the output directory:
    /// the baseline's, then the variant's.
    pub files: [String; 2],
    /// ministat's report of the two, as `linerate stat -c C FILES` run in the output
    /// directory prints it.
    pub report: String,
    /// Student's t verdict and paired reading of the variant against the baseline.
    pub verdict: Verdict,
    /// Why there is no paired reading, when there is none.
    pub unpaired: Option<String>,
    /// Mean sender service demand of the baseline over that of the variant.
    pub sender_sd_ratio: f64,
    /// Mean calls per MB: baseline, variant.
    pub calls_per_mb: [f64; 2],
    /// Mean wake-ups per MB: baseline, variant.
    pub wakeups_per_mb: [f64; 2],
}

/// A bar's outcome.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BarOutcome {
    /// Both cells ran: the verdict.
    Judged(Box<JudgedBar>),
    /// A cell is missing.
    NotJudged {
        /// Which and why.
        reason: String,
    },
}

/// One of seed 000's bars at one buffer and send size: sender service demand of a
/// baseline strategy against batched `sendfile`, over netns with TSO on.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    /// 1 (against one call per page) or 2 (against 64 KiB chunks).
    pub number: u8,
    /// The heading.
    pub title: String,
    /// `-s` and `-S`.
    pub buf: String,
    /// `-m`.
    pub send_size: String,
    /// The baseline strategy.
    pub baseline: String,
    /// The strategy compared with it.
    pub variant: String,
    /// The verdict, or why there is none.
    pub outcome: BarOutcome,
}

/// The whole result of a table run.
#[derive(Clone, Debug, Serialize)]
pub struct TableResult {
    /// The output directory.
    pub out: PathBuf,
    /// The raw results, one JSON object per run.
    pub raw: PathBuf,
    /// Runs per cell.
    pub rounds: usize,
    /// Confidence of the verdicts, percent.
    pub confidence: f64,
    /// The paths asked for, in order.
    pub paths: Vec<TablePath>,
    /// The paths left out, and why.
    pub skipped: Vec<SkippedPath>,
    /// The cells run, in grid order.
    pub cells: Vec<CellResult>,
    /// The bars, every buffer and send size of the grid for bar 1, then for bar 2.
    pub bars: Vec<Bar>,
}

/// One line of raw.jsonl: the run's result and its cell's keys.
#[derive(Serialize)]
struct RawLine<'a> {
    #[serde(flatten)]
    result: &'a StreamResult,
    run: usize,
    cell_path: &'static str,
    cell_buf: String,
    cell_m: String,
}

/// Runs the grid and summarizes it. Namespace paths that cannot be built here are
/// skipped (reported through `on_event` and in the result); a failed run stops the
/// table, with what ran so far in raw.jsonl.
pub fn run(
    cfg: &TableConfig,
    stop: &StopFlag,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TableResult, TableError> {
    std::fs::create_dir_all(&cfg.out).map_err(io_error(&cfg.out))?;
    let mut skipped = Vec::new();
    for &path in &cfg.grid.paths {
        if let Some(s) = path.netns() {
            if crate::stopped(stop) {
                return Err(StreamError::Interrupted.into());
            }
            // Built and removed at once: what a run would meet, without a run's cost.
            if let Err(e) = Topology::create(s.tso, cfg.base.sink_cpu, None) {
                let reason = e.to_string();
                on_event(Event::Skipped {
                    path,
                    reason: &reason,
                });
                skipped.push(SkippedPath { path, reason });
            }
        }
    }
    let cells: Vec<Cell> = cfg
        .grid
        .cells()
        .into_iter()
        .filter(|c| !skipped.iter().any(|s| s.path == c.path))
        .collect();
    if cells.is_empty() {
        return Err(TableError::NothingToRun(if skipped.is_empty() {
            "the grid is empty".into()
        } else {
            "every path was skipped".into()
        }));
    }
    let mut base = cfg.base.clone();
    let _temp = match base.source {
        StreamSource::TempFile(n) => {
            let t = stream::make_temp_file(n).map_err(StreamError::from)?;
            base.source = StreamSource::File(t.path().to_path_buf());
            Some(t)
        }
        _ => None,
    };
    let configs: Vec<StreamConfig> = cells.iter().map(|c| c.config(&base)).collect();
    let raw_path = cfg.out.join("raw.jsonl");
    let mut raw = File::create(&raw_path).map_err(io_error(&raw_path))?;
    let total = cells.len() * cfg.rounds;
    let mut done = 0;
    let order: Vec<usize> = (0..cells.len()).collect();
    let runs = series::interleave(&order, cfg.rounds, stop, |&i, round| {
        let cell = &cells[i];
        done += 1;
        on_event(Event::Run {
            done,
            total,
            round: round + 1,
            cell,
        });
        let result = stream::run(&configs[i], stop)?;
        let line = serde_json::to_string(&RawLine {
            result: &result,
            run: round + 1,
            cell_path: cell.path.key(),
            cell_buf: format_size(cell.buf as u64),
            cell_m: format_size(cell.send_size as u64),
        })
        .map_err(io::Error::from)
        .map_err(io_error(&raw_path))?;
        writeln!(raw, "{line}").map_err(io_error(&raw_path))?;
        Ok::<_, TableError>(result)
    })?;
    let mut result = summarize(cfg, &cells, &runs, skipped)?;
    result.raw = raw_path;
    Ok(result)
}

/// The cells' samples (written to OUT/samples/), their summaries, and the bars.
fn summarize(
    cfg: &TableConfig,
    cells: &[Cell],
    runs: &[Vec<StreamResult>],
    skipped: Vec<SkippedPath>,
) -> Result<TableResult, TableError> {
    let samples_dir = cfg.out.join("samples");
    let mut results = Vec::with_capacity(cells.len());
    for (cell, rs) in cells.iter().zip(runs) {
        let label = cell.label();
        let mut samples = Vec::with_capacity(METRICS.len());
        for m in &METRICS {
            let s = Samples {
                variant: label.clone(),
                values: rs.iter().filter_map(m.value).collect(),
            };
            series::write_samples(&samples_dir, m.name, &s).map_err(io_error(&samples_dir))?;
            let data = DataSet::from_values(&label, s.values.clone());
            samples.push(MetricSamples {
                metric: m.name,
                mean: data.as_ref().map(DataSet::avg),
                // Equal values can leave ministat's running sums a hair below zero.
                stddev: data.as_ref().map(|d| d.var().max(0.0).sqrt()),
                values: s.values,
            });
        }
        results.push(CellResult {
            label,
            path: cell.path,
            buf: format_size(cell.buf as u64),
            send_size: format_size(cell.send_size as u64),
            strategy: cell.strategy.to_string(),
            samples,
            cell: *cell,
        });
    }
    let bars = bars(&cfg.grid, &skipped, &results, cfg.confidence);
    Ok(TableResult {
        out: cfg.out.clone(),
        raw: cfg.out.join("raw.jsonl"),
        rounds: cfg.rounds,
        confidence: cfg.confidence.percent(),
        paths: cfg.grid.paths.clone(),
        skipped,
        cells: results,
        bars,
    })
}

/// The metric the bars judge.
const BAR_METRIC: &str = "sender_sd";

/// Seed 000's two bars: (number, baseline strategy, what the heading says).
const BARS: [(u8, Strategy, &str); 2] = [
    (1, Strategy::Sendfile4k, "sendfile-4k vs sendfile"),
    (
        2,
        Strategy::SendfileChunked {
            chunk_bytes: 64 * 1024,
        },
        "64 KiB chunks vs sendfile",
    ),
];

fn bars(
    grid: &Grid,
    skipped: &[SkippedPath],
    cells: &[CellResult],
    confidence: Confidence,
) -> Vec<Bar> {
    let path = TablePath::TsoOn;
    let variant = Strategy::SendfileBatched;
    let mut out = Vec::new();
    for (number, baseline, what) in BARS {
        for &buf in &grid.bufs {
            for &send_size in &grid.sizes {
                let (b, m) = (format_size(buf as u64), format_size(send_size as u64));
                let find = |strategy| {
                    let want = Cell {
                        path,
                        buf,
                        send_size,
                        strategy,
                    };
                    cells.iter().find(|c| c.cell == want)
                };
                let missing = |s: Strategy| {
                    if !grid.paths.contains(&path) {
                        format!("{} not in --paths", path.title())
                    } else if let Some(sk) = skipped.iter().find(|k| k.path == path) {
                        format!("{} skipped: {}", path.title(), sk.reason)
                    } else if !grid.strategies.contains(&s) {
                        format!("{s} not in --strategies")
                    } else {
                        format!("no runs of {s}")
                    }
                };
                let outcome = match (find(baseline), find(variant)) {
                    (Some(a), Some(v)) => judge_bar(a, v, confidence),
                    (None, _) => BarOutcome::NotJudged {
                        reason: missing(baseline),
                    },
                    (_, None) => BarOutcome::NotJudged {
                        reason: missing(variant),
                    },
                };
                out.push(Bar {
                    number,
                    title: format!("Bar {number}, netns TSO on, -s {b} -m {m}: {what}"),
                    buf: b,
                    send_size: m,
                    baseline: baseline.to_string(),
                    variant: variant.to_string(),
                    outcome,
                });
            }
        }
    }
    out
}

fn judge_bar(a: &CellResult, v: &CellResult, confidence: Confidence) -> BarOutcome {
    let values = |c: &CellResult| {
        c.metric(BAR_METRIC)
            .map(|m| m.values.clone())
            .unwrap_or_default()
    };
    let sets = [
        Samples {
            variant: a.strategy.clone(),
            values: values(a),
        },
        Samples {
            variant: v.strategy.clone(),
            values: values(v),
        },
    ];
    let files =
        [a, v].map(|c| format!("samples/{}", series::sample_file_name(&c.label, BAR_METRIC)));
    let Some((report, mut verdicts)) =
        series::judge(BAR_METRIC, &sets, &files, confidence, Better::Lower)
    else {
        return BarOutcome::NotJudged {
            reason: "the statistics need 3 runs or more per cell".into(),
        };
    };
    let Some(verdict) = verdicts.pop() else {
        return BarOutcome::NotJudged {
            reason: "no verdict".into(),
        };
    };
    let unpaired = linerate_stat::paired(&sets[0].values, &sets[1].values, Better::Lower)
        .err()
        .map(|e| e.to_string());
    BarOutcome::Judged(Box::new(JudgedBar {
        files,
        report,
        verdict,
        unpaired,
        sender_sd_ratio: a.mean(BAR_METRIC) / v.mean(BAR_METRIC),
        calls_per_mb: [a.mean("syscalls_per_mb"), v.mean("syscalls_per_mb")],
        wakeups_per_mb: [a.mean("wakeups_per_mb"), v.mean("wakeups_per_mb")],
    }))
}

/// The table's columns after the cell's keys: (metric, heading, decimals).
const COLUMNS: [(&str, &str, usize); 6] = [
    ("throughput", "10^6 bits/s", 0),
    ("sender_sd", "sender SD", 3),
    ("receiver_sd", "receiver SD", 3),
    ("machine_sd", "machine SD", 3),
    ("syscalls_per_mb", "calls/MB", 1),
    ("wakeups_per_mb", "wake-ups/MB", 2),
];

/// The summary as markdown: the table per path (mean ± standard deviation), then the
/// bars, each with ministat's report and the paired reading, as the commands that
/// print them (run in the output directory) would; then the bars that could not be
/// judged, and why.
pub fn markdown(r: &TableResult) -> String {
    let mut s = String::new();
    s.push_str("## Seed 000's table on this machine\n\n");
    s.push_str(
        "Mean ± standard deviation over the runs of each cell (n per cell in the last column).\n\
         Service demand (SD) is CPU µs per KB moved: the sender's own thread, the sink's own\n\
         thread, and all CPUs (machine). Calls and wake-ups are the engine's, per MB sent.\n\n",
    );
    for &path in &r.paths {
        let _ = writeln!(s, "### {}\n", path.title());
        if let Some(sk) = r.skipped.iter().find(|k| k.path == path) {
            let _ = writeln!(s, "Not run: {}.\n", sk.reason);
            continue;
        }
        s.push_str("| -s/-S | -m | strategy |");
        for (_, heading, _) in COLUMNS {
            let _ = write!(s, " {heading} |");
        }
        s.push_str(" n |\n|---|---|---|");
        s.push_str(&"---|".repeat(COLUMNS.len() + 1));
        s.push('\n');
        for c in r.cells.iter().filter(|c| c.path == path) {
            let _ = write!(s, "| {} | {} | {} |", c.buf, c.send_size, c.strategy);
            for (metric, _, decimals) in COLUMNS {
                let cell = match c.metric(metric).map(|m| (m.mean, m.stddev)) {
                    Some((Some(mean), Some(sd))) => {
                        format!("{mean:.decimals$} ± {sd:.decimals$}")
                    }
                    _ => "-".to_string(),
                };
                let _ = write!(s, " {cell} |");
            }
            let n = c.samples.first().map_or(0, |m| m.values.len());
            let _ = writeln!(s, " {n} |");
        }
        s.push('\n');
    }
    s.push_str("## The bars\n\n");
    let conf = r.confidence;
    for bar in &r.bars {
        let BarOutcome::Judged(j) = &bar.outcome else {
            continue;
        };
        let _ = writeln!(s, "#### {}\n", bar.title);
        let (a, v) = (&bar.baseline, &bar.variant);
        let _ = writeln!(
            s,
            "Sender service demand, µs/KB: {a} {:.3}, {v} {:.3}: ratio {:.2}×.",
            j.verdict.baseline_mean, j.verdict.variant_mean, j.sender_sd_ratio
        );
        let _ = writeln!(
            s,
            "Calls per MB: {:.1} vs {:.1}; wake-ups per MB: {:.2} vs {:.2}.\n",
            j.calls_per_mb[0], j.calls_per_mb[1], j.wakeups_per_mb[0], j.wakeups_per_mb[1]
        );
        let [fa, fv] = &j.files;
        let _ = writeln!(s, "```\n$ linerate stat -c {conf} {fa} {fv}");
        let _ = writeln!(s, "{}", j.report.trim_end());
        let _ = writeln!(s, "$ linerate stat --paired lower {fa} {fv}");
        match (&j.verdict.paired, &j.unpaired) {
            (Some(p), _) => {
                let _ = writeln!(
                    s,
                    "{}",
                    linerate_stat::format_paired(p, &base_name(fa), &base_name(fv))
                );
            }
            (None, reason) => {
                let _ = writeln!(
                    s,
                    "(no paired reading: {})",
                    reason.as_deref().unwrap_or("the samples do not pair up")
                );
            }
        }
        s.push_str("```\n\n");
    }
    let not_judged: Vec<(&Bar, &str)> = r
        .bars
        .iter()
        .filter_map(|b| match &b.outcome {
            BarOutcome::NotJudged { reason } => Some((b, reason.as_str())),
            BarOutcome::Judged(_) => None,
        })
        .collect();
    if !not_judged.is_empty() {
        s.push_str("Not judged:\n\n");
        for (bar, reason) in not_judged {
            let _ = writeln!(s, "- {}: {reason}.", bar.title);
        }
        s.push('\n');
    }
    s
}

/// The file name of a sample file, as `linerate stat --paired` names it.
fn base_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuFigure;
    use crate::stream::{MachineFigure, PerMegabyte};

    fn result(strategy: Strategy, sender_sd: f64, calls: f64) -> StreamResult {
        let figure = |sd| CpuFigure {
            cpu_seconds: 1.0,
            percent_of_one_cpu: 50.0,
            service_demand_us_per_kb: sd,
        };
        StreamResult {
            strategy: strategy.to_string(),
            sizing: "remaining".into(),
            notsent_lowat: None,
            path: "netns tso on".into(),
            source: "memory".into(),
            recv_socket_bytes: 0,
            send_socket_bytes: 0,
            send_size_bytes: 0,
            elapsed_seconds: 1.0,
            bytes: 1 << 30,
            sink_bytes: Some(1 << 30),
            throughput_mbps: 8000.0 / sender_sd,
            sender: figure(sender_sd),
            receiver: Some(figure(0.3)),
            machine: MachineFigure::default(),
            counters: Default::default(),
            per_mb: PerMegabyte {
                syscalls: calls,
                wakeups: 2.0,
                eagain: 0.0,
            },
        }
    }

    fn config(grid: Grid, out: &Path) -> TableConfig {
        TableConfig {
            grid,
            rounds: 5,
            base: StreamConfig {
                target: None,
                limit: stream::Limit::Bytes(1),
                source: StreamSource::Memory(1),
                tx: Default::default(),
                sndbuf: None,
                rcvbuf: None,
                sender_cpu: None,
                sink_cpu: None,
                discard: crate::sink::Discard::Read,
                netns: None,
                linerate_exe: PathBuf::new(),
            },
            out: out.to_path_buf(),
            confidence: Confidence::default(),
        }
    }

    #[test]
    fn lists_parse_and_name_the_bad_item() {
        assert_eq!(
            parse_paths("loopback, on,off").unwrap(),
            TablePath::ALL.to_vec()
        );
        assert!(parse_paths("loopback,veth").unwrap_err().contains("'veth'"));
        assert!(parse_paths("on,on").unwrap_err().contains("twice"));
        assert!(parse_paths("on,").unwrap_err().contains("empty"));
        assert_eq!(
            parse_sizes("32K,1M,100").unwrap(),
            vec![32768, 1 << 20, 100]
        );
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("4G").unwrap_err().contains("too large"));
        assert_eq!(
            parse_strategies("copy,sendfile-4k,sendfile-chunk-64K,sendfile,splice,zerocopy")
                .unwrap(),
            Strategy::ALL.to_vec()
        );
        assert!(parse_strategies("mmap").unwrap_err().contains("mmap"));
        assert_eq!(Grid::default().strategies, Strategy::ALL.to_vec());
    }

    #[test]
    fn cells_run_with_the_strategy_innermost() {
        let grid = Grid {
            paths: vec![TablePath::Loopback, TablePath::TsoOn],
            bufs: vec![32 << 10, 64 << 10],
            sizes: vec![1 << 20],
            strategies: vec![Strategy::Sendfile4k, Strategy::SendfileBatched],
        };
        let labels: Vec<String> = grid.cells().iter().map(Cell::label).collect();
        assert_eq!(
            labels,
            [
                "loopback-s32K-m1M-sendfile-4k",
                "loopback-s32K-m1M-sendfile",
                "loopback-s64K-m1M-sendfile-4k",
                "loopback-s64K-m1M-sendfile",
                "on-s32K-m1M-sendfile-4k",
                "on-s32K-m1M-sendfile",
                "on-s64K-m1M-sendfile-4k",
                "on-s64K-m1M-sendfile",
            ]
        );
        let c = grid.cells()[5].config(&config(grid.clone(), Path::new("x")).base);
        assert_eq!((c.sndbuf, c.rcvbuf), (Some(32 << 10), Some(32 << 10)));
        assert_eq!(c.tx.max_call_bytes, Some(1 << 20));
        assert_eq!(c.tx.strategy, Strategy::SendfileBatched);
        assert!(c.netns.is_some_and(|n| n.tso));
    }

    #[test]
    fn bars_are_judged_where_both_cells_ran_and_explained_where_not() {
        let dir = tempfile::tempdir().unwrap();
        let grid = Grid {
            paths: vec![TablePath::TsoOn],
            bufs: vec![64 << 10],
            sizes: vec![64 << 10, 1 << 20],
            strategies: vec![Strategy::Sendfile4k, Strategy::SendfileBatched],
        };
        let cfg = config(grid.clone(), dir.path());
        let cells = grid.cells();
        let runs: Vec<Vec<StreamResult>> = cells
            .iter()
            .map(|c| {
                (0..5)
                    .map(|i| {
                        let sd = match c.strategy {
                            Strategy::Sendfile4k => 3.5 + 0.1 * i as f64,
                            _ => 0.6 + 0.01 * i as f64,
                        };
                        result(c.strategy, sd, 10.0)
                    })
                    .collect()
            })
            .collect();
        let r = summarize(&cfg, &cells, &runs, Vec::new()).unwrap();
        assert_eq!(r.cells.len(), 4);
        assert_eq!(r.bars.len(), 4, "two bars at two send sizes");
        let BarOutcome::Judged(j) = &r.bars[0].outcome else {
            panic!("bar 1 is judged: {:?}", r.bars[0].outcome);
        };
        assert!(j.verdict.comparison.significant);
        assert_eq!(j.verdict.paired.unwrap().wins, 5);
        assert!((j.sender_sd_ratio - 3.7 / 0.62).abs() < 1e-9);
        assert_eq!(j.files[0], "samples/on-s64K-m64K-sendfile-4k.sender_sd");
        // The sample files are ministat input, one value per round.
        let f = dir.path().join(&j.files[1]);
        assert_eq!(std::fs::read_to_string(f).unwrap().lines().count(), 5);
        assert!(dir
            .path()
            .join("samples/on-s64K-m1M-sendfile.wakeups_per_mb")
            .exists());
        let BarOutcome::NotJudged { reason } = &r.bars[2].outcome else {
            panic!("bar 2 has no sendfile-chunk-64K cells");
        };
        assert_eq!(reason, "sendfile-chunk-64K not in --strategies");

        let md = markdown(&r);
        assert!(md.contains("### netns, TSO on\n\n| -s/-S | -m | strategy | 10^6 bits/s |"));
        assert!(md.contains("| 64K | 1M | sendfile | "), "{md}");
        assert!(md.contains("| 3.700 ± 0.158 |"), "{md}");
        assert!(md.contains("#### Bar 1, netns TSO on, -s 64K -m 1M: sendfile-4k vs sendfile"));
        assert!(md.contains(
            "$ linerate stat -c 95 samples/on-s64K-m64K-sendfile-4k.sender_sd samples/on-s64K-m64K-sendfile.sender_sd\nx samples/"
        ));
        assert!(md.contains("Difference at 95.0% confidence"), "{md}");
        assert!(md.contains(
            "paired: on-s64K-m64K-sendfile.sender_sd better than on-s64K-m64K-sendfile-4k.sender_sd in 5 of 5 rounds"
        ), "{md}");
        assert!(md.contains(
            "Not judged:\n\n- Bar 2, netns TSO on, -s 64K -m 64K: 64 KiB chunks vs sendfile: sendfile-chunk-64K not in --strategies."
        ), "{md}");
    }

    #[test]
    fn a_path_not_run_leaves_its_bars_unjudged_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let grid = Grid {
            paths: vec![TablePath::Loopback, TablePath::TsoOn],
            bufs: vec![64 << 10],
            sizes: vec![64 << 10],
            strategies: vec![Strategy::Sendfile4k, Strategy::SendfileBatched],
        };
        let cfg = config(grid.clone(), dir.path());
        let cells: Vec<Cell> = grid
            .cells()
            .into_iter()
            .filter(|c| c.path == TablePath::Loopback)
            .collect();
        let runs: Vec<Vec<StreamResult>> = cells
            .iter()
            .map(|c| (0..3).map(|_| result(c.strategy, 1.0, 5.0)).collect())
            .collect();
        let skipped = vec![SkippedPath {
            path: TablePath::TsoOn,
            reason: "--netns needs root".into(),
        }];
        let r = summarize(&cfg, &cells, &runs, skipped).unwrap();
        let md = markdown(&r);
        assert!(
            md.contains("### netns, TSO on\n\nNot run: --netns needs root.\n"),
            "{md}"
        );
        assert!(
            md.contains("- Bar 1, netns TSO on, -s 64K -m 64K: sendfile-4k vs sendfile: netns, TSO on skipped: --netns needs root."),
            "{md}"
        );
        assert!(
            md.contains("| 64K | 64K | sendfile-4k | 8000 ± 0 |"),
            "{md}"
        );
        let mut grid2 = grid;
        grid2.paths = vec![TablePath::Loopback];
        let r = summarize(&config(grid2, dir.path()), &cells, &runs, Vec::new()).unwrap();
        let BarOutcome::NotJudged { reason } = &r.bars[0].outcome else {
            panic!("no netns cells");
        };
        assert_eq!(reason, "netns, TSO on not in --paths");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["bars"][0]["outcome"]["status"], "not_judged");
        assert_eq!(v["cells"][0]["path"], "loopback");
        assert_eq!(v["cells"][0]["samples"][1]["metric"], "sender_sd");
    }
}
