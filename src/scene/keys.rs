//! Dotted key paths (`integrator.solver.omega`, `external_charges[0].charge`) and the
//! mapping between them and positions in the TOML text, so every error can name its key
//! and line.

use std::ops::Range;
use toml::de::{DeTable, DeValue};

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// `a.b[0].c`.
pub(super) fn format_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Parses `a.b[0].c` (also `a.b.0.c`). `None` for an empty segment or a malformed index.
pub(super) fn parse_path(key: &str) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(p) => (&part[..p], &part[p..]),
            None => (part, ""),
        };
        if name.is_empty() {
            // "[0]" directly after a dot is not allowed; an empty name never is.
            return None;
        }
        match name.parse::<usize>() {
            Ok(i) if !out.is_empty() => out.push(Seg::Index(i)),
            _ => out.push(Seg::Key(name.to_string())),
        }
        while !rest.is_empty() {
            let close = rest.find(']')?;
            let i: usize = rest.get(1..close)?.parse().ok()?;
            out.push(Seg::Index(i));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return None;
            }
        }
    }
    Some(out)
}

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// The deepest key whose name or value covers `span` (empty path: the document itself).
pub(super) fn path_at(root: &DeTable<'_>, span: &Range<usize>) -> Vec<Seg> {
    let mut best = Vec::new();
    if span.start < span.end {
        let mut cur = Vec::new();
        walk_table(root, span, &mut cur, &mut best);
    }
    best
}

fn walk_table(t: &DeTable<'_>, span: &Range<usize>, cur: &mut Vec<Seg>, best: &mut Vec<Seg>) {
    for (k, v) in t.iter() {
        cur.push(Seg::Key(k.get_ref().to_string()));
        if (contains(&k.span(), span) || contains(&v.span(), span)) && cur.len() > best.len() {
            *best = cur.clone();
        }
        walk_value(v.get_ref(), span, cur, best);
        cur.pop();
    }
}

fn walk_value(v: &DeValue<'_>, span: &Range<usize>, cur: &mut Vec<Seg>, best: &mut Vec<Seg>) {
    match v {
        DeValue::Table(t) => walk_table(t, span, cur, best),
        DeValue::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                cur.push(Seg::Index(i));
                if contains(&item.span(), span) && cur.len() > best.len() {
                    *best = cur.clone();
                }
                walk_value(item.get_ref(), span, cur, best);
                cur.pop();
            }
        }
        _ => {}
    }
}

/// Byte span of the key (or array element) at `path`, if the text has it.
pub(super) fn span_of(root: &DeTable<'_>, path: &[Seg]) -> Option<Range<usize>> {
    let mut table = root;
    let mut value: Option<&DeValue<'_>> = None;
    let mut span = None;
    for seg in path {
        match (seg, value) {
            (Seg::Key(key), None) | (Seg::Key(key), Some(DeValue::Table(_))) => {
                if let Some(DeValue::Table(t)) = value {
                    table = t;
                }
                let (k, v) = table.iter().find(|(k, _)| k.get_ref() == key)?;
                span = Some(k.span());
                value = Some(v.get_ref());
            }
            (Seg::Index(i), Some(DeValue::Array(a))) => {
                let item = a.get(*i)?;
                span = Some(item.span());
                value = Some(item.get_ref());
            }
            _ => return None,
        }
    }
    span
}

/// The key a malformed line is about, read from the text itself (the parser cannot give
/// it: the entry did not parse). `[header]` lines name their table; `key = ...` lines are
/// prefixed with the table of the nearest header above (with its index for `[[array]]`).
pub(super) fn key_on_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line.checked_sub(1)?)?.trim();
    let header = |l: &str| -> Option<(String, bool)> {
        let l = l.split('#').next()?.trim();
        if let Some(inner) = l.strip_prefix("[[") {
            Some((inner.trim_end_matches(']').trim().to_string(), true))
        } else {
            l.strip_prefix('[')
                .map(|inner| (inner.trim_end_matches(']').trim().to_string(), false))
        }
    };
    if let Some((name, _)) = header(here) {
        return (!name.is_empty()).then_some(name);
    }
    let (left, _) = here.split_once('=')?;
    let left = left.trim();
    let bare = |c: char| c.is_ascii_alphanumeric() || "_-.\"' ".contains(c);
    if left.is_empty() || !left.chars().all(bare) {
        return None;
    }
    let left: String = left
        .split('.')
        .map(|p| p.trim().trim_matches('"'))
        .collect::<Vec<_>>()
        .join(".");
    let above = lines[..line - 1].iter().rev().find_map(|l| header(l));
    Some(match above {
        None => left,
        Some((name, false)) => format!("{name}.{left}"),
        Some((name, true)) => {
            let count = lines[..line - 1]
                .iter()
                .filter(|l| matches!(header(l), Some((ref n, true)) if *n == name))
                .count();
            format!("{name}[{}].{left}", count.saturating_sub(1))
        }
    })
}

/// The spanned parse of a scene text, for looking up where a key is. Parsed with error
/// recovery, so even a malformed text maps the keys it does have.
pub(super) struct SourceMap<'a> {
    text: &'a str,
    root: DeTable<'a>,
}

impl<'a> SourceMap<'a> {
    pub fn new(text: &'a str) -> Self {
        let (root, _errors) = DeTable::parse_recoverable(text);
        Self {
            text,
            root: root.into_inner(),
        }
    }
    /// Line of `key` in the text (`None` when the text does not set it).
    pub fn line(&self, key: &str) -> Option<usize> {
        let span = span_of(&self.root, &parse_path(key)?)?;
        Some(line_of(self.text, span.start))
    }
    /// The key covering a byte span (empty when none does).
    pub fn key_at(&self, span: &Range<usize>) -> String {
        format_path(&path_at(&self.root, span))
    }
}
