//! docs/http.md's promise: every rule is named by at least one test (a line
//! `Rules: docs/http.md R3, R6.`), and no source file names a Markdown document the
//! repository does not hold.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use linerate_testkit::{rust_sources, workspace};

/// This test's own file, which names what it looks for.
fn is_this_file(f: &Path) -> bool {
    let me = file!().rsplit('/').next().unwrap();
    f.file_name().is_some_and(|n| n.to_string_lossy() == me)
}

/// Rule ids defined in docs/http.md: lines `- **R3.** …`.
fn rules() -> BTreeSet<String> {
    let text = fs::read_to_string(workspace().join("docs/http.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("- **"))
        .filter_map(|l| l.split_once(".**").map(|(id, _)| id.to_string()))
        .collect()
}

/// Rule ids named on `Rules: docs/http.md …` lines anywhere in the crates.
fn cited() -> BTreeSet<String> {
    let files = rust_sources(&workspace().join("crates"));
    let mut out = BTreeSet::new();
    for f in files {
        if is_this_file(&f) {
            continue;
        }
        for line in fs::read_to_string(&f).unwrap().lines() {
            if let Some((_, ids)) = line.split_once("Rules: docs/http.md ") {
                for id in ids.trim_end_matches('.').split(", ") {
                    out.insert(id.trim().trim_end_matches('.').to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_rule_of_docs_http_md_is_named_by_a_test() {
    let rules = rules();
    assert!(rules.len() >= 30, "found only {rules:?} in docs/http.md");
    let cited = cited();
    let missing: Vec<_> = rules.difference(&cited).collect();
    assert!(missing.is_empty(), "rules no test names: {missing:?}");
    let unknown: Vec<_> = cited.difference(&rules).collect();
    assert!(
        unknown.is_empty(),
        "tests name rules docs/http.md lacks: {unknown:?}"
    );
}

#[test]
fn no_source_cites_a_document_outside_the_repository() {
    let files = rust_sources(&workspace().join("crates"));
    let mut seen = 0;
    for f in files {
        if is_this_file(&f) {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap();
        // Every `NAME.md` or `dir/NAME.md` named exists, at that path from the
        // workspace root (or, for a bare name, in docs/).
        for (i, _) in text.match_indices(".md") {
            let start = text[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .map_or(0, |p| p + 1);
            let cited = &text[start..i + 3];
            let after = text[i + 3..].chars().next();
            if cited.len() <= 3 || after.is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue;
            }
            seen += 1;
            let root = workspace();
            assert!(
                root.join(cited).exists() || root.join("docs").join(cited).exists(),
                "{} cites {cited}, which the repository does not hold",
                f.display()
            );
        }
    }
    assert!(seen > 20, "found only {seen} citations: the scan is broken");
}
