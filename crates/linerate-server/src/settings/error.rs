//! Why a setting was refused, typed: what a value's type says ([`ValueError`], the
//! same words for a flag, which clap names, and for a key), and where a file's setting
//! was written ([`ConfigError`]: the file, the line, the block, the key), with the
//! nearest key for one misspelt.

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;

/// Why a value was refused: the same words for a flag and a key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Outside its range: `'17M': must be 0 to 16M`.
    #[error("'{value}': must be {range}")]
    Range {
        value: String,
        range: Cow<'static, str>,
    },
    /// A count outside its range: `0: must be 1 to 1024`.
    #[error("{value}: must be {lo} to {hi}")]
    Count { value: u64, lo: u64, hi: u64 },
    /// What it is not, or is and may not be: `'x' is not a whole number`.
    #[error("'{value}' is {is}")]
    Is {
        value: String,
        is: Cow<'static, str>,
    },
    /// What to give instead, or what is wrong in it: `'x': give error, warn, info or
    /// debug`.
    #[error("'{value}': {says}")]
    Says {
        value: String,
        says: Cow<'static, str>,
    },
    /// A value of the wrong kind, none, or one another crate's parser refused, in its
    /// words: `give stdout, off or a file`.
    #[error("{0}")]
    Kind(Cow<'static, str>),
}

impl ValueError {
    pub fn is(value: &str, is: impl Into<Cow<'static, str>>) -> ValueError {
        ValueError::Is {
            value: value.to_string(),
            is: is.into(),
        }
    }

    pub fn says(value: &str, says: impl Into<Cow<'static, str>>) -> ValueError {
        ValueError::Says {
            value: value.to_string(),
            says: says.into(),
        }
    }

    pub fn kind(text: impl Into<Cow<'static, str>>) -> ValueError {
        ValueError::Kind(text.into())
    }
}

/// A setting of a file refused, and where it was written (boxed: an error is rare,
/// and a `Result` carrying it stays small).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(Box<Refusal>);

/// What [`ConfigError`] holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The file (none: text parsed on its own).
    pub file: Option<PathBuf>,
    /// Its line, where the error points into one.
    pub line: Option<usize>,
    /// The block: `site #2 (/srv/b)`, `rule /assets/`, `site: rule /x/`.
    pub block: Option<String>,
    /// The key, with its table's (`cors: origins`).
    pub key: Option<String>,
    pub reason: Reason,
}

/// What was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A value its type, or the block around it, refuses.
    Value(ValueError),
    /// A key the block does not take: the nearest one it does, when one is near (as
    /// clap says for a flag); else the keys it takes, as the parser lists them.
    UnknownKey {
        typed: String,
        nearest: Option<String>,
        expected: String,
    },
    /// What reading or parsing the file said (a value's refusal reaches it as its
    /// words).
    Parse(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Value(e) => e.fmt(f),
            Reason::UnknownKey {
                typed,
                nearest: Some(key),
                ..
            } => write!(f, "unknown key `{typed}`; did you mean `{key}`?"),
            Reason::UnknownKey {
                typed,
                nearest: None,
                expected,
            } => write!(f, "unknown key `{typed}`{expected}"),
            Reason::Parse(text) => f.write_str(text),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(block) = &self.block {
            write!(f, "{block}: ")?;
        }
        let reason = self.reason.to_string();
        // A reason that names its key already is not prefixed with it again.
        match &self.key {
            Some(key) if !reason.contains(key.as_str()) => write!(f, "{key}: {reason}"),
            _ => f.write_str(&reason),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConfigError {}

impl std::ops::Deref for ConfigError {
    type Target = Refusal;
    fn deref(&self) -> &Refusal {
        &self.0
    }
}

impl std::ops::DerefMut for ConfigError {
    fn deref_mut(&mut self) -> &mut Refusal {
        &mut self.0
    }
}

impl From<Refusal> for ConfigError {
    fn from(r: Refusal) -> ConfigError {
        ConfigError(Box::new(r))
    }
}

impl ConfigError {
    /// `key`'s value refused.
    pub fn at_key(key: impl Into<String>, e: ValueError) -> ConfigError {
        Refusal {
            file: None,
            line: None,
            block: None,
            key: Some(key.into()),
            reason: Reason::Value(e),
        }
        .into()
    }

    /// A block refused as a whole.
    pub fn of_block(block: impl Into<String>, e: ValueError) -> ConfigError {
        Refusal {
            file: None,
            line: None,
            block: Some(block.into()),
            key: None,
            reason: Reason::Value(e),
        }
        .into()
    }

    /// The same, inside `block` (an outer block comes first: `site #1 (/srv): rule /x/`).
    pub fn in_block(mut self, block: impl fmt::Display) -> ConfigError {
        self.block = Some(match self.block.take() {
            Some(inner) => format!("{block}: {inner}"),
            None => block.to_string(),
        });
        self
    }

    /// The same, in `file`.
    pub fn in_file(mut self, file: &std::path::Path) -> ConfigError {
        self.file = Some(file.to_path_buf());
        self
    }

    /// What reading or parsing said, with nothing more known.
    pub fn parse(text: impl Into<String>) -> ConfigError {
        Refusal {
            file: None,
            line: None,
            block: None,
            key: None,
            reason: Reason::Parse(text.into()),
        }
        .into()
    }
}
