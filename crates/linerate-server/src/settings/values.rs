//! The settings' value types: each parses a flag's text and a key's value (a number,
//! a string, a list) and checks its range in one place, so a flag and a key refuse the
//! same values with the same words; and the macros that write a value type's text form
//! once (`as_text!`, `via!`, `sink!`).

use super::*;

/// A byte count from `LO` to `HI`: `16384`, `16K`, `4M`, `1G` (binary multiples), in a
/// flag or a key (a number or a string there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes<const LO: u64, const HI: u64>(pub u64);

/// The words for a byte range: "1 byte to 1M".
fn byte_range(lo: u64, hi: u64) -> String {
    let show = |n: u64| match n {
        1 => "1 byte".to_string(),
        n => linerate_tx::format_size(n),
    };
    format!("{} to {}", show(lo), show(hi))
}

impl<const LO: u64, const HI: u64> Bytes<LO, HI> {
    fn checked(n: u64, shown: &str) -> Result<Self, ValueError> {
        if (LO..=HI).contains(&n) {
            Ok(Bytes(n))
        } else {
            Err(ValueError::Range {
                value: shown.to_string(),
                range: byte_range(LO, HI).into(),
            })
        }
    }
}

impl<const LO: u64, const HI: u64> FromStr for Bytes<LO, HI> {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let n = linerate_tx::parse_size(s).map_err(ValueError::kind)?;
        Self::checked(n, s)
    }
}

impl<'de, const LO: u64, const HI: u64> Deserialize<'de> for Bytes<LO, HI> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(n) => {
                let n = u64::try_from(n).map_err(|_| D::Error::custom("must not be negative"))?;
                Self::checked(n, &n.to_string()).map_err(D::Error::custom)
            }
            NumberOrText::Float(_) => Err(D::Error::custom("a byte count is a whole number")),
            NumberOrText::Text(t) => t.parse().map_err(D::Error::custom),
        }
    }
}

impl<const LO: u64, const HI: u64> Serialize for Bytes<LO, HI> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A count from `LO` to `HI`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count<const LO: u64, const HI: u64>(pub u64);

impl<const LO: u64, const HI: u64> Count<LO, HI> {
    fn checked(n: u64) -> Result<Self, ValueError> {
        if (LO..=HI).contains(&n) {
            Ok(Count(n))
        } else {
            Err(ValueError::Count {
                value: n,
                lo: LO,
                hi: HI,
            })
        }
    }
}

impl<const LO: u64, const HI: u64> FromStr for Count<LO, HI> {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let n: u64 = s
            .parse()
            .map_err(|_| ValueError::is(s, "not a whole number"))?;
        Self::checked(n)
    }
}

impl<'de, const LO: u64, const HI: u64> Deserialize<'de> for Count<LO, HI> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(n) => {
                let n = u64::try_from(n).map_err(|_| D::Error::custom("must not be negative"))?;
                Self::checked(n).map_err(D::Error::custom)
            }
            NumberOrText::Float(_) => Err(D::Error::custom("a count is a whole number")),
            NumberOrText::Text(t) => t.parse().map_err(D::Error::custom),
        }
    }
}

impl<const LO: u64, const HI: u64> Serialize for Count<LO, HI> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A duration of more than 0 and at most a day: seconds as a number (`1.5`), or with a
/// unit (`500ms`, `30s`, `2m`, `1h`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seconds(pub Duration);

impl Seconds {
    fn checked(secs: f64, shown: &str) -> Result<Seconds, ValueError> {
        if secs > 0.0 && secs <= 86_400.0 {
            Ok(Seconds(Duration::from_secs_f64(secs)))
        } else {
            Err(ValueError::Range {
                value: shown.to_string(),
                range: "more than 0 and at most 86400 seconds".into(),
            })
        }
    }
}

impl FromStr for Seconds {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Seconds, ValueError> {
        let t = s.trim();
        let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1e-3)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60.0)
        } else if let Some(n) = t.strip_suffix('h') {
            (n, 3600.0)
        } else {
            (t, 1.0)
        };
        let v: f64 = num.trim().parse().map_err(|_| {
            ValueError::is(
                s,
                "not a duration (a number of seconds, or 500ms, 30s, 2m, 1h)",
            )
        })?;
        Seconds::checked(v * scale, s)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(n) => Seconds::checked(n as f64, &n.to_string()),
            NumberOrText::Float(v) => Seconds::checked(v, &v.to_string()),
            NumberOrText::Text(t) => t.parse(),
        }
        .map_err(D::Error::custom)
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0.as_secs_f64())
    }
}

/// `--http2`: on, off or only; in a file also `true` and `false` (the key was a
/// boolean before `only` came).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http2(pub linerate_http::request::Http2);

impl FromStr for Http2 {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Http2, ValueError> {
        s.parse().map(Http2).map_err(ValueError::kind)
    }
}

impl fmt::Display for Http2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de> Deserialize<'de> for Http2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum BoolOrText {
            Bool(bool),
            Text(String),
        }
        match BoolOrText::deserialize(d)? {
            BoolOrText::Bool(true) => Ok(Http2(linerate_http::request::Http2::On)),
            BoolOrText::Bool(false) => Ok(Http2(linerate_http::request::Http2::Off)),
            BoolOrText::Text(t) => t.parse().map_err(D::Error::custom),
        }
    }
}

impl Serialize for Http2 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a key may hold when it takes a number or a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Int(i64),
    Float(f64),
    Text(String),
}

/// Implements `Deserialize` and `Serialize` of a type through its `FromStr` and
/// `Display`: a key holds the same words as the flag.
macro_rules! as_text {
    ($t:ty) => {
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use serde::de::Error as _;
                String::deserialize(d)?.parse().map_err(D::Error::custom)
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}
pub(crate) use as_text;

/// A setting that is another crate's type: its words are that type's `FromStr` and
/// `Display`, and it is read and written as text (`as_text!`).
macro_rules! via {
    ($t:ident) => {
        impl FromStr for $t {
            type Err = ValueError;
            fn from_str(s: &str) -> Result<$t, ValueError> {
                s.parse()
                    .map($t)
                    .map_err(|e| ValueError::kind(e.to_string()))
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        as_text!($t);
    };
}

/// A transmit strategy by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit(pub linerate_tx::Strategy);

via!(Transmit);

/// The header trusted proxies name the client in, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardedHeader(pub linerate_http::forwarded::Header);

via!(ForwardedHeader);

/// An event-loop driver by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Driver(pub linerate_event::DriverChoice);

via!(Driver);

// Config's word settings (`words!`), read and written as text.
as_text!(AcmeChallenge);
as_text!(EtagMode);
as_text!(KernelTls);
as_text!(Steer);

/// A log's destination: `off`, the console's word, or a file.
macro_rules! sink {
    ($t:ident, $console:ident = $word:literal) => {
        impl FromStr for $t {
            type Err = ValueError;
            fn from_str(s: &str) -> Result<$t, ValueError> {
                match s {
                    "off" => Ok($t::Off),
                    $word => Ok($t::$console),
                    "" => Err(ValueError::kind(concat!("give ", $word, ", off or a file"))),
                    p => Ok($t::File(PathBuf::from(p))),
                }
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $t::Off => f.write_str("off"),
                    $t::$console => f.write_str($word),
                    $t::File(p) => write!(f, "{}", p.display()),
                }
            }
        }

        as_text!($t);
    };
}

sink!(AccessLog, Stdout = "stdout");
sink!(ErrorLog, Stderr = "stderr");

impl FromStr for LogFormat {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<LogFormat, ValueError> {
        match s {
            "clf" => Ok(LogFormat::Clf),
            "combined" => Ok(LogFormat::Combined),
            "json" => Ok(LogFormat::Json),
            _ if s.contains('$') => s.parse().map(LogFormat::Custom),
            _ => Err(ValueError::says(
                s,
                "give clf, combined, json or a line with $variables (\"$remote_addr $status\")",
            )),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::Clf => "clf",
            LogFormat::Combined => "combined",
            LogFormat::Json => "json",
            LogFormat::Custom(t) => &t.source,
        })
    }
}

as_text!(LogFormat);

/// The least severe error-log lines written: error, warn, info or debug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level(pub tracing::Level);

impl FromStr for Level {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Level, ValueError> {
        match s {
            "error" => Ok(Level(tracing::Level::ERROR)),
            "warn" => Ok(Level(tracing::Level::WARN)),
            "info" => Ok(Level(tracing::Level::INFO)),
            "debug" => Ok(Level(tracing::Level::DEBUG)),
            _ => Err(ValueError::says(s, "give error, warn, info or debug")),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.as_str().to_ascii_lowercase())
    }
}

as_text!(Level);

/// A request path (starts with `/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlPath(pub String);

impl FromStr for UrlPath {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<UrlPath, ValueError> {
        if s.starts_with('/') {
            Ok(UrlPath(s.to_string()))
        } else {
            Err(ValueError::says(s, "must start with /"))
        }
    }
}

impl fmt::Display for UrlPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

as_text!(UrlPath);

/// A rule's `fallback`: a path, or `false` (no fallback here, whatever a less specific
/// rule gives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FallbackSetting {
    Page(UrlPath),
    Off,
}

impl<'de> Deserialize<'de> for FallbackSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum PathOrBool {
            Bool(bool),
            Text(String),
        }
        match PathOrBool::deserialize(d)? {
            PathOrBool::Bool(false) => Ok(FallbackSetting::Off),
            PathOrBool::Text(t) => t.parse().map(FallbackSetting::Page),
            PathOrBool::Bool(true) => Err(ValueError::kind(
                "give a path (\"/index.html\"), or false to switch an inherited fallback off",
            )),
        }
        .map_err(D::Error::custom)
    }
}

impl FallbackSetting {
    /// What the rule runs on.
    pub(crate) fn to_fallback(&self) -> Fallback {
        match self {
            FallbackSetting::Page(p) => Fallback::Page(p.0.clone()),
            FallbackSetting::Off => Fallback::Off,
        }
    }
}

impl Serialize for FallbackSetting {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FallbackSetting::Page(p) => s.collect_str(p),
            FallbackSetting::Off => s.serialize_bool(false),
        }
    }
}

/// Content codings in order of preference: `br,zstd,gzip`, or `none`; in the file
/// also a list (`["br", "gzip"]`, `[]` for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Codings(pub Vec<linerate_http::coding::Coding>);

impl FromStr for Codings {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Codings, ValueError> {
        let t = s.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("none") {
            return Ok(Codings(Vec::new()));
        }
        let mut out = Vec::new();
        for w in t.split(',') {
            let c: linerate_http::coding::Coding = w.parse().map_err(ValueError::kind)?;
            if out.contains(&c) {
                return Err(ValueError::says(s, format!("{c} is named twice")));
            }
            out.push(c);
        }
        Ok(Codings(out))
    }
}

impl fmt::Display for Codings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let words: Vec<&str> = self.0.iter().map(|c| c.token()).collect();
        f.write_str(&words.join(","))
    }
}

impl<'de> Deserialize<'de> for Codings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrList {
            One(String),
            List(Vec<String>),
        }
        let text = match OneOrList::deserialize(d)
            .map_err(|_| D::Error::custom("give a list of codings: [\"br\", \"zstd\", \"gzip\"]"))?
        {
            OneOrList::One(s) => s,
            OneOrList::List(l) if l.is_empty() => "none".to_string(),
            OneOrList::List(l) => l.join(","),
        };
        text.parse().map_err(D::Error::custom)
    }
}

impl Serialize for Codings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How far ahead `expires` puts `Cache-Control: max-age` and `Expires`: `30d`,
/// `12h`, `1y`, `2h 30m`, or a number of seconds; at most 10 years.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Age(pub Duration);

impl FromStr for Age {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Age, ValueError> {
        let t = s.trim();
        let d = match t.parse::<u64>() {
            Ok(n) => Duration::from_secs(n),
            Err(_) => humantime::parse_duration(t)
                .map_err(|_| ValueError::is(s, "not an age (30d, 12h, 1y, or seconds)"))?,
        };
        if d > Duration::from_secs(10 * 365 * 86_400) {
            return Err(ValueError::says(s, "at most 10 years"));
        }
        Ok(Age(Duration::from_secs(d.as_secs())))
    }
}

impl fmt::Display for Age {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs())
    }
}

impl<'de> Deserialize<'de> for Age {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Int(n) if n >= 0 => n.to_string().parse(),
            NumberOrText::Text(t) => t.parse(),
            _ => Err(ValueError::kind(
                "give an age: \"30d\", \"12h\", or whole seconds",
            )),
        }
        .map_err(D::Error::custom)
    }
}

impl Serialize for Age {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0.as_secs())
    }
}

/// A rule's `path`: `/PREFIX`, `=/EXACT` or a glob (see [`crate::rules`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulePath(pub PathMatch);

impl FromStr for RulePath {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<RulePath, ValueError> {
        PathMatch::parse(s.trim())
            .map(RulePath)
            .map_err(ValueError::kind)
    }
}

impl fmt::Display for RulePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

as_text!(RulePath);

/// An index file's name (`--index`): a name in the directory, not a path: no `/`, no
/// NUL, not `.` or `..`, at most 255 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexName(pub String);

impl FromStr for IndexName {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<IndexName, ValueError> {
        if s.is_empty() || s == "." || s == ".." || s.contains(['/', '\0']) || s.len() > 255 {
            return Err(ValueError::says(s, "an index is a file's name, not a path"));
        }
        Ok(IndexName(s.to_string()))
    }
}

impl fmt::Display for IndexName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

as_text!(IndexName);

/// File permission bits in octal: `0660`, `660` (at most `0777`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode(pub u32);

impl FromStr for Mode {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Mode, ValueError> {
        let t = s.trim();
        match u32::from_str_radix(t.strip_prefix("0o").unwrap_or(t), 8) {
            Ok(m) if m <= 0o777 && !t.is_empty() => Ok(Mode(m)),
            _ => Err(ValueError::is(s, "not a mode (octal, 0000 to 0777: 0660)")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Text(t) => t.parse().map_err(D::Error::custom),
            // A TOML number cannot say it is octal by its look (0660 is not TOML).
            _ => Err(D::Error::custom(
                "write a mode in quotes, in octal: \"0660\"",
            )),
        }
    }
}

impl Serialize for Mode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A listen address as an operator writes it: `8080` or `:8080` (every IPv4 address),
/// `[::]:8080`, `127.0.0.1:8080`, `HOST:PORT` with a name (`localhost:8080`: each
/// address it resolves to), or `unix:/PATH` (a Unix socket; an absolute path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenAddr {
    text: String,
    /// The endpoints it stands for.
    pub addrs: Vec<Endpoint>,
}

impl FromStr for ListenAddr {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<ListenAddr, ValueError> {
        let t = s.trim();
        if let Some(path) = t.strip_prefix("unix:") {
            let path = std::path::Path::new(path);
            if !path.is_absolute() {
                return Err(ValueError::says(s, "a Unix socket is unix:/ABSOLUTE/PATH"));
            }
            // sun_path holds 107 bytes and a NUL.
            if path.as_os_str().len() > 107 {
                return Err(ValueError::says(
                    s,
                    "a Unix socket's path is at most 107 bytes",
                ));
            }
            return Ok(ListenAddr {
                text: t.to_string(),
                addrs: vec![Endpoint::Unix(path.to_path_buf())],
            });
        }
        let port_only = t.strip_prefix(':').unwrap_or(t);
        let addrs = if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
            let port: u16 = port_only
                .parse()
                .map_err(|_| ValueError::says(s, "a port is 0 to 65535"))?;
            vec![SocketAddr::from(([0, 0, 0, 0], port))]
        } else if let Ok(a) = t.parse::<SocketAddr>() {
            vec![a]
        } else {
            let bad = || {
                ValueError::is(
                    s,
                    "not an address (PORT, :PORT, HOST:PORT, [IPv6]:PORT, unix:/PATH)",
                )
            };
            if !t.contains(':') {
                return Err(bad());
            }
            let mut addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(t)
                .map_err(|e| ValueError::says(s, e.to_string()))?
                .collect();
            addrs.dedup();
            if addrs.is_empty() {
                return Err(bad());
            }
            addrs
        };
        Ok(ListenAddr {
            text: t.to_string(),
            addrs: addrs.into_iter().map(Endpoint::Ip).collect(),
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

as_text!(ListenAddr);

as_text!(Cidr);

/// The addresses of `--listen`'s kind of values.
pub(super) fn endpoints(l: Vec<ListenAddr>) -> Vec<Endpoint> {
    l.into_iter().flat_map(|l| l.addrs).collect()
}

/// `listen`: one address or a list of them in the file.
pub(super) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ListenAddr>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let v = match OneOrMany::deserialize(d)
        .map_err(|_| D::Error::custom("give an address (\"127.0.0.1:8080\") or a list of them"))?
    {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    };
    if v.is_empty() {
        return Err(D::Error::custom("needs at least one address"));
    }
    v.iter()
        .map(|s| s.parse().map_err(D::Error::custom))
        .collect()
}

/// The largest request line or header block a setting may allow.
pub const MAX_HEAD_LIMIT: u64 = 1 << 20;
