//! ministat-compatible statistics for linerate: data sets read the way ministat reads
//! them, their summary (N, Min, Max, Median, Avg, Stddev), Student's t comparison at
//! the six confidence levels of ministat's table, and ministat's report with its ASCII
//! plot, byte for byte as Debian's `ministat` 20150715 prints it. Beside ministat, the
//! paired reading of interleaved samples ([`paired`]: rounds won, sign test, ratio).
//!
//! Written by hand because the output must match ministat's, quirks included (the
//! upper-middle median, the unclamped variance, the plot's height rule, C `%g`
//! formatting); no statistics crate prints that. Every other crate of linerate uses
//! this one for means and confidence intervals.
//!
//! # Non-goals
//! Other tests than Student's t with pooled variance and the paired sign test; more than
//! seven data sets.

#![forbid(unsafe_code)]

pub mod cli;
pub mod command;
mod format;
mod input;
pub mod paired;
mod report;
mod stats;

pub use format::{format_g, format_g_width};
pub use input::{read_dataset, ReadOptions, StatError};
pub use paired::{format_paired, paired, Better, Paired, PairedError};
pub use report::{render, Crash, ReportOptions};
pub use stats::{compare, Comparison, Confidence, DataSet, T_TABLE};
