//! Reading mesh files: a failure with its place in the file, line breaks (LF, CRLF or a
//! lone CR), a token reader over text that keeps line numbers, a byte reader for binary
//! blocks, and the allocation cap that keeps a corrupt header count (2 billion vertices
//! in a 1 kB file) from reserving memory.

use super::file::At;
use glam::DVec3;

/// A parse failure before it is given its format and file ([`super::MeshError::File`]).
#[derive(Debug)]
pub struct Fail {
    pub at: Option<At>,
    pub message: String,
}

pub(super) fn fail(at: impl Into<Option<At>>, message: impl Into<String>) -> Fail {
    Fail {
        at: at.into(),
        message: message.into(),
    }
}

pub(super) type Parsed<T> = Result<T, Fail>;

/// The text after a UTF-8 byte-order mark, if any (editors on Windows write one; it is
/// not part of the first token). UTF-16 text is refused by name.
pub(super) fn strip_bom(bytes: &[u8]) -> Parsed<&[u8]> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(fail(
            At::Line(1),
            "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as \
             UTF-8 or ASCII",
        ));
    }
    Ok(bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes))
}

/// Whether `bytes[k]` ends a line: `\n`, or a lone `\r` (classic Mac OS line endings);
/// the `\r` of `\r\n` does not (its `\n` does).
pub(super) fn line_break(bytes: &[u8], k: usize) -> bool {
    match bytes.get(k) {
        Some(b'\n') => true,
        Some(b'\r') => bytes.get(k + 1) != Some(&b'\n'),
        _ => false,
    }
}

/// The lines of `text`, broken at LF, CRLF or a lone CR, in any mix (`str::lines` keeps
/// a lone CR inside a line).
pub(super) fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let next = if rest[end..].starts_with("\r\n") {
            end + 2
        } else {
            (end + 1).min(rest.len())
        };
        rest = &rest[next..];
        Some(line)
    })
}

/// Whether the first line of `bytes` ends with a lone CR: a file of classic Mac OS lines,
/// whose binary data after a header line starts right after its CR (even at an LF byte).
pub(super) fn cr_lines(bytes: &[u8]) -> bool {
    let first = bytes.iter().position(|&c| c == b'\n' || c == b'\r');
    first.is_some_and(|k| bytes[k] == b'\r' && line_break(bytes, k))
}

/// Where the line after a header line's end at `k` (before any trailing blanks) starts:
/// where a binary body starts, so a byte off shifts every value. Past LF, CRLF (CRs before
/// an LF), or a lone CR in a file of [`cr_lines`].
pub(super) fn after_line_end(bytes: &[u8], k: usize) -> usize {
    let blanks = bytes[k..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let after = &bytes[k + blanks..];
    if cr_lines(bytes) {
        return k + if after.starts_with(b"\r") {
            blanks + 1
        } else {
            0
        };
    }
    let mut body = k;
    if after.starts_with(b"\n") || after.starts_with(b"\r\n") {
        body += blanks;
    }
    while body < bytes.len() && (bytes[body] == b'\r' || bytes[body] == b'\n') {
        body += 1;
        if bytes[body - 1] == b'\n' {
            break;
        }
    }
    body
}

/// Room for `count` items of at least `min_bytes` each in `available` bytes, as a
/// `usize` that is safe to reserve: a header count the file cannot hold is corrupt.
pub(super) fn capped(
    at: impl Into<Option<At>>,
    what: &str,
    count: u64,
    min_bytes: u64,
    available: usize,
) -> Parsed<usize> {
    let fits = count
        .checked_mul(min_bytes.max(1))
        .is_some_and(|b| b <= available as u64);
    if !fits {
        return Err(fail(
            at,
            format!(
                "the header gives {count} {what}, more than the {available} bytes left in \
                 the file can hold (truncated file or wrong count)"
            ),
        ));
    }
    Ok(count as usize)
}

/// Whitespace-separated tokens with their line numbers (lines end at LF, CRLF or a lone
/// CR); `comment` starts a comment that runs to the end of the line.
pub(super) struct Tokens<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
    /// 1-based line of the last token read (of `pos` before the first).
    pub line: usize,
    comment: Option<u8>,
}

impl<'a> Tokens<'a> {
    pub fn new(bytes: &'a [u8], comment: Option<u8>) -> Self {
        Self {
            bytes,
            pos: 0,
            line: 1,
            comment,
        }
    }

    pub fn at(&self) -> At {
        At::Line(self.line)
    }

    /// Skips whitespace and comments, counting lines.
    fn skip_space(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if line_break(self.bytes, self.pos) {
                self.line += 1;
            } else if Some(b) == self.comment {
                self.skip_line();
                continue;
            } else if !b.is_ascii_whitespace() {
                return;
            }
            self.pos += 1;
        }
    }

    /// The next token, or `None` at the end of the text.
    pub fn next(&mut self) -> Option<&'a str> {
        self.skip_space();
        let start = self.pos;
        while self
            .bytes
            .get(self.pos)
            .is_some_and(|b| !b.is_ascii_whitespace() && Some(*b) != self.comment)
        {
            self.pos += 1;
        }
        (start < self.pos)
            .then(|| std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("\u{FFFD}"))
    }

    /// The next token; the end of the text is a truncated file.
    pub fn word(&mut self, what: &str) -> Parsed<&'a str> {
        match self.next() {
            Some(t) => Ok(t),
            None => Err(fail(
                self.at(),
                format!("the file ends where {what} was expected (truncated file or wrong count)"),
            )),
        }
    }

    pub fn expect(&mut self, word: &str) -> Parsed<()> {
        let t = self.word(&format!("`{word}`"))?;
        if t.eq_ignore_ascii_case(word) {
            Ok(())
        } else {
            Err(fail(self.at(), format!("expected `{word}`, found `{t}`")))
        }
    }

    pub fn f64(&mut self, what: &str) -> Parsed<f64> {
        let t = self.word(what)?;
        t.parse::<f64>()
            .map_err(|_| fail(self.at(), format!("{what}: `{t}` is not a number")))
    }

    pub fn u64(&mut self, what: &str) -> Parsed<u64> {
        let t = self.word(what)?;
        t.parse::<u64>().map_err(|_| {
            fail(
                self.at(),
                format!("{what}: `{t}` is not a non-negative integer"),
            )
        })
    }

    pub fn i64(&mut self, what: &str) -> Parsed<i64> {
        let t = self.word(what)?;
        t.parse::<i64>()
            .map_err(|_| fail(self.at(), format!("{what}: `{t}` is not an integer")))
    }

    /// Three coordinates, finite.
    pub fn point(&mut self, what: &str) -> Parsed<DVec3> {
        let p = DVec3::new(self.f64(what)?, self.f64(what)?, self.f64(what)?);
        finite(p, self.at(), what)?;
        Ok(p)
    }

    /// Skips the rest of the current line, up to its line break (LF, CRLF or a lone CR).
    pub fn skip_line(&mut self) {
        while self.pos < self.bytes.len() && !line_break(self.bytes, self.pos) {
            self.pos += 1;
        }
    }

    /// Bytes left after the current position.
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
}

/// A position must be finite: NaN and inf are refused where they are read.
pub(super) fn finite(p: DVec3, at: At, what: &str) -> Parsed<()> {
    if p.is_finite() {
        Ok(())
    } else {
        Err(fail(
            at,
            format!("{what} is not finite ({}, {}, {})", p.x, p.y, p.z),
        ))
    }
}

/// Little- or big-endian binary numbers from a byte slice, with the offset for errors.
pub(super) struct Bytes<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
    pub big_endian: bool,
}

impl<'a> Bytes<'a> {
    pub fn take(&mut self, n: usize, what: &str) -> Parsed<&'a [u8]> {
        match self.pos.checked_add(n).filter(|&e| e <= self.bytes.len()) {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(fail(
                At::Byte(self.pos as u64),
                format!("the file ends inside {what} (truncated file or wrong count)"),
            )),
        }
    }
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
}

macro_rules! binary_reader {
    ($($name:ident: $t:ty),*) => {
        impl Bytes<'_> {
            $(pub fn $name(&mut self, what: &str) -> Parsed<$t> {
                let big = self.big_endian;
                let b = self.take(std::mem::size_of::<$t>(), what)?;
                let a = b.try_into().expect("sized");
                Ok(if big { <$t>::from_be_bytes(a) } else { <$t>::from_le_bytes(a) })
            })*
        }
    };
}
binary_reader!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32, u64: u64, i64: i64, f32: f32, f64: f64);
