//! docs/guide.md's command reference is the built binary's own `--help`: this test fails
//! when a block differs from what `msc <command> --help` prints, when a subcommand clap
//! knows has no block, or when a block names a subcommand that no longer exists.
//! `MSC_GUIDE_WRITE=1 cargo test --test guide` rewrites the section instead.

use std::path::{Path, PathBuf};
use std::process::Command;

const BEGIN: &str = "<!-- command reference: generated from `msc --help` by tests/guide.rs -->";
const END: &str = "<!-- end of command reference -->";
const REGENERATE: &str = "MSC_GUIDE_WRITE=1 cargo test --test guide";

fn guide_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide.md")
}

/// The subcommands as clap defines them (hidden ones left out), in definition order.
fn subcommands() -> Vec<String> {
    msc::cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

/// What the built binary prints for `msc [SUBCOMMAND] --help`.
fn help(subcommand: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_msc"));
    cmd.args(subcommand).arg("--help");
    // Plain text whatever the caller's terminal settings.
    cmd.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE");
    let out = cmd.output().expect("the msc binary runs");
    let shown = subcommand.map_or("msc --help".to_string(), |s| format!("msc {s} --help"));
    assert!(out.status.success(), "`{shown}` exited with {}", out.status);
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// One subcommand's block: a heading, then the help between markers.
fn block(subcommand: Option<&str>, text: &str) -> String {
    let name = subcommand.map_or("msc".to_string(), |s| format!("msc {s}"));
    // Trailing spaces (clap pads some blank lines) would not survive an editor's cleanup.
    let text: String = text
        .trim_end()
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    format!("### `{name}`\n\n<!-- help: {name} -->\n```text\n{text}```\n<!-- end help -->\n")
}

/// The whole generated section body, between `BEGIN` and `END`.
fn expected_section(subcommands: &[String]) -> (String, Vec<(String, String)>) {
    let mut blocks = vec![("msc".to_string(), block(None, &help(None)))];
    for s in subcommands {
        blocks.push((format!("msc {s}"), block(Some(s), &help(Some(s)))));
    }
    let body = blocks
        .iter()
        .map(|(_, b)| b.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (body, blocks)
}

/// The text between the markers, with the offsets of the body in `guide`.
fn current_section(guide: &str) -> Option<(usize, usize)> {
    let start = guide.find(BEGIN)? + BEGIN.len();
    let end = start + guide[start..].find(END)?;
    Some((start, end))
}

/// The blocks found in the guide's section, by the name in their marker.
fn current_blocks(section: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = section;
    while let Some(i) = rest.find("<!-- help: ") {
        let after = &rest[i + "<!-- help: ".len()..];
        let Some(close) = after.find(" -->") else {
            break;
        };
        let name = after[..close].to_string();
        let body_end = after.find("<!-- end help -->").unwrap_or(after.len());
        found.push((name, after[close + " -->".len()..body_end].to_string()));
        rest = &after[body_end..];
    }
    found
}

/// Why the guide's section differs, block by block.
fn differences(expected: &[(String, String)], section: &str) -> Vec<String> {
    let current = current_blocks(section);
    let mut why = Vec::new();
    for (name, want) in expected {
        match current.iter().find(|(n, _)| n == name) {
            None => why.push(format!("`{name}` has no block")),
            Some((_, have)) => {
                let start = want.find(&format!("<!-- help: {name} -->")).unwrap_or(0);
                let want_body = &want[start + format!("<!-- help: {name} -->").len()..];
                let want_body = want_body.trim_end_matches("<!-- end help -->\n");
                if let Some((k, (w, h))) = want_body
                    .lines()
                    .zip(have.lines())
                    .enumerate()
                    .find(|(_, (w, h))| w != h)
                {
                    why.push(format!(
                        "`{name}` differs at line {}:\n    guide:  {h}\n    binary: {w}",
                        k + 1
                    ));
                } else if want_body.lines().count() != have.lines().count() {
                    why.push(format!(
                        "`{name}` has {} lines in the guide, {} from the binary",
                        have.lines().count(),
                        want_body.lines().count()
                    ));
                }
            }
        }
    }
    for (name, _) in &current {
        if !expected.iter().any(|(n, _)| n == name) {
            why.push(format!("`{name}` has a block but is no subcommand of msc"));
        }
    }
    if why.is_empty() {
        why.push("the text around the blocks differs".to_string());
    }
    why
}

#[test]
fn the_command_reference_is_the_binary_s_help() {
    let path = guide_path();
    let guide = std::fs::read_to_string(&path).expect("docs/guide.md is readable");
    let (start, end) = current_section(&guide).unwrap_or_else(|| {
        panic!(
            "docs/guide.md has no command reference between the markers\n  {BEGIN}\n  {END}\n\
             add them under `## Command reference`, then run `{REGENERATE}`"
        )
    });
    let (body, blocks) = expected_section(&subcommands());
    let body = format!("\n\n{body}\n");
    if guide[start..end] == body {
        return;
    }
    if std::env::var_os("MSC_GUIDE_WRITE").is_some_and(|v| v == "1") {
        let rewritten = format!("{}{body}{}", &guide[..start], &guide[end..]);
        std::fs::write(&path, rewritten).expect("docs/guide.md is writable");
        eprintln!("rewrote the command reference in {}", path.display());
        return;
    }
    panic!(
        "docs/guide.md's command reference is not what `msc --help` prints:\n  {}\n\
         rewrite it with `{REGENERATE}` and review `git diff docs/guide.md`",
        differences(&blocks, &guide[start..end]).join("\n  ")
    );
}

#[test]
fn the_reference_lists_the_subcommands_the_top_level_help_shows() {
    // The blocks are built from clap's own list: it must be the list `msc --help` shows
    // (clap's `help` aside), so a subcommand cannot go without a block.
    let top = help(None);
    let shown: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        // A name is indented by two spaces; a wrapped description by more.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&name| name != "help")
        .collect();
    assert!(!shown.is_empty(), "`msc --help` lists no commands:\n{top}");
    assert_eq!(
        subcommands(),
        shown,
        "clap's subcommands and `msc --help` disagree"
    );
}
