//! `linerate bench stream --table`: the command line of [`crate::table`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::stream::Limit;
use crate::table::{self, Event, Grid, TableConfig};
use linerate_tx::format_size;

use super::{stop_flag, stream_config, usage_error, StreamArgs};

/// Runs per cell without -i.
const DEFAULT_ROUNDS: u32 = 5;
/// Seconds per run without -l or -n.
const DEFAULT_SECONDS: u64 = 3;
/// Output directory without --out.
const DEFAULT_OUT: &str = "bench-out/seed000";

/// The grid of the command line: seed 000's, with each list given replaced.
fn grid(a: &StreamArgs) -> Result<Grid, String> {
    let mut g = Grid::default();
    if let Some(s) = &a.paths {
        g.paths = table::parse_paths(s).map_err(|e| format!("--paths: {e}"))?;
    }
    if let Some(s) = &a.bufs {
        g.bufs = table::parse_sizes(s).map_err(|e| format!("--bufs: {e}"))?;
    }
    if let Some(s) = &a.send_sizes {
        g.sizes = table::parse_sizes(s).map_err(|e| format!("--sizes: {e}"))?;
    }
    if let Some(s) = &a.strategies {
        g.strategies = table::parse_strategies(s).map_err(|e| format!("--strategies: {e}"))?;
    }
    Ok(g)
}

pub(crate) fn run_table(a: &StreamArgs) -> anyhow::Result<ExitCode> {
    let rounds = a.iterations.unwrap_or(DEFAULT_ROUNDS);
    if rounds < 3 {
        return Ok(usage_error("-i: statistics need at least 3 runs per cell"));
    }
    let grid = match grid(a) {
        Ok(g) => g,
        Err(e) => return Ok(usage_error(&e)),
    };
    let mut base = match stream_config(a) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(&e)),
    };
    if a.bytes.is_none() && a.length.is_none() {
        base.limit = Limit::Time(Duration::from_secs(DEFAULT_SECONDS));
    }
    let cfg = TableConfig {
        grid,
        rounds: rounds as usize,
        base,
        out: a.out.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_OUT)),
        confidence: a.confidence,
    };
    let stop = stop_flag()?;
    // At a terminal the progress is one line rewritten; in a log, a line per run.
    let tty = std::io::stderr().is_terminal();
    let mut on_event = |e: Event<'_>| match e {
        Event::Skipped { path, reason } => {
            eprintln!("linerate: skipping path {}: {reason}", path.key());
        }
        Event::Run {
            done,
            total,
            round,
            cell,
        } => {
            let line = format!(
                "[{done}/{total}] run {round} {} -s {} -m {} {}",
                cell.path.key(),
                format_size(cell.buf as u64),
                format_size(cell.send_size as u64),
                cell.strategy
            );
            if tty {
                eprint!("\r{line}      ");
            } else {
                eprintln!("{line}");
            }
        }
    };
    let result = table::run(&cfg, &stop, &mut on_event);
    if tty {
        eprintln!();
    }
    let r = result?;
    let runs = r.cells.len() * r.rounds;
    eprintln!("wrote {} ({runs} runs)", r.raw.display());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", table::markdown(&r));
    }
    Ok(ExitCode::SUCCESS)
}
