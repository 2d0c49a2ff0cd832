//! contrib/linerate.toml against the keys: every key once, with its default.

use super::*;

/// contrib/linerate.toml's `# key = value` lines and its uncommented ones: (key,
/// value, is an example or required, so not a default).
fn documented() -> Vec<(String, String, bool)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/linerate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("# ").or((!l.starts_with('#')).then_some(l)))
        .filter_map(|l| {
            let (key, rest) = l.split_once(" = ")?;
            if key.contains(' ') {
                return None;
            }
            let (value, note) = rest.split_once('#').unwrap_or((rest, ""));
            Some((
                key.to_string(),
                value.trim().to_string(),
                note.trim_start().starts_with("example")
                    || note.trim_start().starts_with("required"),
            ))
        })
        .collect()
}

/// The example `[[site]]` blocks (lines `#  ...`) load, uncommented.
#[test]
fn contrib_linerate_toml_site_example_loads() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/linerate.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let blocks: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("#  "))
        .map(|l| format!("{l}\n"))
        .collect();
    let s = Settings::parse(&blocks).unwrap();
    assert_eq!(s.sites.len(), 5, "{blocks}");
    assert_eq!(s.rules.len(), 9, "{blocks}");
    let mut cfg = Config::new(PathBuf::from("."));
    s.apply(&mut cfg);
    assert_eq!(
        cfg.sites[0].names,
        ["docs.example.com", "*.docs.example.com"]
    );
    assert!(cfg.sites[1].acme && !cfg.sites[0].acme);
    assert!(cfg.sites[2].autoindex && !cfg.sites[0].autoindex);
    assert!(cfg.sites[4].default);
    // The intranet's allow/deny: a site rule for `/`.
    let fx = crate::rules::Effective::of(&cfg.sites[3].rules, "/a.html");
    let ip = |s: &str| Some(s.parse::<std::net::IpAddr>().unwrap());
    assert!(fx.admits(ip("10.1.1.1")) && fx.admits(None));
    assert!(!fx.admits(ip("10.0.66.1")) && !fx.admits(ip("192.0.2.1")));
}

#[test]
fn contrib_linerate_toml_documents_every_key_with_its_default() {
    let doc = documented();
    let mut keys: Vec<&str> = doc.iter().map(|(k, _, _)| k.as_str()).collect();
    keys.sort_unstable();
    let mut want = Settings::keys();
    want.sort();
    assert_eq!(keys, want, "every key once");
    // Uncommented, the whole file loads.
    let all: String = doc.iter().map(|(k, v, _)| format!("{k} = {v}\n")).collect();
    Settings::parse(&all).unwrap();
    // A value given as the default is the default.
    let defaults = format!("{:?}", Config::new(PathBuf::from(".")));
    for (k, v, example) in &doc {
        if *example {
            continue;
        }
        let mut cfg = Config::new(PathBuf::from("."));
        Settings::parse(&format!("{k} = {v}\n"))
            .unwrap()
            .apply(&mut cfg);
        assert_eq!(format!("{cfg:?}"), defaults, "{k} = {v} is not the default");
    }
}
