//! `linerate compress DIR`: the command line over [`linerate_server::compress`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use linerate_server::compress::{self, Options, Outcome};
use linerate_server::settings::{Codings, Count};

#[derive(Args, Debug)]
pub struct CompressArgs {
    /// The directory (a document root).
    pub dir: PathBuf,
    /// Variants to write [default: br,zstd,gzip].
    #[arg(long, value_name = "CODINGS")]
    pub codings: Option<Codings>,
    /// gzip level, 1 (fast) to 9 (small) [default: 9].
    #[arg(long, value_name = "N")]
    pub gzip_level: Option<Count<1, 9>>,
    /// Brotli quality, 0 to 11 [default: 11].
    #[arg(long, value_name = "N")]
    pub brotli_level: Option<Count<0, 11>>,
    /// Zstandard level, 1 to 22 [default: 19].
    #[arg(long, value_name = "N")]
    pub zstd_level: Option<Count<1, 22>>,
    /// Least saving, in percent of the file, for a variant to be written [default: 10].
    #[arg(long, value_name = "PERCENT")]
    pub min_saving: Option<Count<0, 99>>,
    /// Files compressed at once [default: one per CPU].
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<Count<1, 1024>>,
    /// Also files and directories whose names start with ".".
    #[arg(long)]
    pub dotfiles: bool,
    /// Print the totals as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no line per variant written.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: CompressArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let d = Options::default();
    let opts = Options {
        codings: a.codings.map_or(d.codings, |c| c.0),
        gzip_level: a.gzip_level.map_or(d.gzip_level, |n| n.0 as u32),
        brotli_level: a.brotli_level.map_or(d.brotli_level, |n| n.0 as u32),
        zstd_level: a.zstd_level.map_or(d.zstd_level, |n| n.0 as i32),
        min_saving: a.min_saving.map_or(d.min_saving, |n| n.0 as f64 / 100.0),
        jobs: a.jobs.map_or(d.jobs, |n| n.0 as usize),
        dotfiles: a.dotfiles,
    };
    let meta = std::fs::metadata(&a.dir).with_context(|| a.dir.display().to_string())?;
    if !meta.is_dir() {
        anyhow::bail!("{}: not a directory", a.dir.display());
    }
    let plan = compress::plan(&a.dir, &opts).with_context(|| a.dir.display().to_string())?;
    let bar = (!a.quiet && !a.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(plan.jobs.len() as u64);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("[{bar:40}] {pos}/{len} variants {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let report = compress::run(&plan, &opts, &|job, outcome| {
        if let Some(b) = &bar {
            b.inc(1);
            b.set_message(job.file.display().to_string());
        }
        if let Outcome::Failed(e) = outcome {
            eprintln!("linerate compress: {e}");
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !a.quiet {
        let pct = if report.bytes_in > 0 {
            100.0 * report.bytes_out as f64 / report.bytes_in as f64
        } else {
            0.0
        };
        println!(
            "{} files: {} variants written ({} -> {} bytes, {pct:.1}%), {} current, {} not worth it (under {}% saved), {} failed",
            report.files,
            report.written,
            report.bytes_in,
            report.bytes_out,
            report.current,
            report.not_smaller,
            (opts.min_saving * 100.0).round(),
            report.errors.len()
        );
    }
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_FAILURE)
    })
}
