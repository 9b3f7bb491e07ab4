//! A scene's `name`: it names the default output folder (`out/<name>`, `out/<name>-fit`),
//! so it must be one safe path component and never a way to write elsewhere.

/// Longest name accepted (well under every file system's component limit).
pub const MAX_NAME: usize = 120;

/// Why `name` cannot be a folder name, or `None` when it can: not empty, not `.` or `..`,
/// no leading dot, no path separator, drive colon, control character or other character
/// that some file system rejects.
pub fn problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("must not be empty".into());
    }
    if let Some(c) = name.chars().find(|&c| !is_allowed(c)) {
        return Some(format!(
            "'{}' contains {c:?}; a name is one folder name (no / \\ : * ? \" < > | or control characters)",
            name.escape_debug()
        ));
    }
    if name.starts_with('.') {
        return Some(format!(
            "'{name}' starts with a dot (a hidden folder, `.` or `..`)"
        ));
    }
    if name != name.trim() {
        return Some(format!("'{name}' starts or ends with a space"));
    }
    if name.len() > MAX_NAME {
        return Some(format!("is longer than {MAX_NAME} bytes"));
    }
    None
}

fn is_allowed(c: char) -> bool {
    !c.is_control() && !matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|')
}

/// A safe folder name from a file stem (the default name): disallowed characters become
/// `_`, a leading dot or an empty stem gets a `_` in front, an overlong one is cut.
pub fn sanitize(stem: &str) -> String {
    let mut name: String = stem
        .trim()
        .chars()
        .map(|c| if is_allowed(c) { c } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, '_');
    }
    while name.len() > MAX_NAME {
        name.pop();
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_output_folder_are_refused() {
        for bad in [
            "",
            " ",
            ".",
            "..",
            "../../x",
            "/abs/path",
            "a/b",
            "a\\b",
            "C:x",
            ".hidden",
            "a\0b",
            "tab\there",
            " pad",
            "pad ",
        ] {
            assert!(problem(bad).is_some(), "{bad:?} accepted");
        }
        assert!(problem(&"x".repeat(MAX_NAME + 1)).is_some());
        for good in [
            "torus",
            "my torus",
            "run-1.5_a=b+c",
            "données",
            &"x".repeat(MAX_NAME),
        ] {
            assert_eq!(problem(good), None, "{good:?} refused");
        }
    }

    #[test]
    fn sanitized_stems_are_always_accepted() {
        for stem in ["", ".", "..", ".x", "a:b", "a\tb", " x ", &"é".repeat(100)] {
            let s = sanitize(stem);
            assert_eq!(problem(&s), None, "{stem:?} -> {s:?}");
        }
        assert_eq!(sanitize("torus"), "torus");
    }
}
