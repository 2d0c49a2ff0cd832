//! `linerate stat` as a process: the I/O around [`crate::cli`]'s pure function (the
//! terminal's width, standard input, printing what it wrote, and ending as ministat
//! ends, by a signal for its crash). The binary hands its arguments here.

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;

use crate::cli::{self, Environment, Exit, Outcome};

/// Runs `linerate stat ARGS` (the words after `stat`).
pub fn main(args: &[String]) -> ExitCode {
    if args.len() == 1 && args[0] == "--help" {
        print!("{}", cli::help());
        return ExitCode::SUCCESS;
    }
    // `--paired` is not ministat's (its getopt refuses `--`-words), so no ministat
    // command line changes meaning.
    if args.first().map(String::as_str) == Some("--paired") {
        return print_outcome(cli::paired(&args[1..]));
    }
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let mut stdin = || -> Box<dyn std::io::BufRead> { Box::new(std::io::stdin().lock()) };
    let env = Environment {
        terminal_columns: tty.then(|| linerate_sys::term::terminal_columns(stdout.as_fd())),
        columns_var: std::env::var("COLUMNS").ok(),
        posixly_correct: std::env::var_os("POSIXLY_CORRECT").is_some(),
        stdin: &mut stdin,
    };
    print_outcome(cli::run(args, env))
}

/// Writes what a `stat` run printed and ends as it says.
fn print_outcome(out: Outcome) -> ExitCode {
    let stdout = std::io::stdout();
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    let mut lock = stdout.lock();
    // A closed pipe (| head) is not an error worth a message.
    let _ = lock
        .write_all(out.stdout.as_bytes())
        .and_then(|()| lock.flush());
    match out.exit {
        Exit::Code(c) => ExitCode::from(c as u8),
        Exit::Crash => linerate_sys::term::die_of_signal(linerate_sys::term::SIGSEGV),
    }
}
