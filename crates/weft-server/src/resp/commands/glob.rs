//! Redis' glob-style pattern matching (`stringmatchlen` in Redis' `util.c`), used by KEYS
//! and SCAN MATCH: `*` any run of bytes, `?` one byte, `[abc]` a set, `[^a]` a negated set,
//! `[a-z]` a range (bounds in either order), `\x` the byte `x` literally.
//!
//! Redis' quirks are kept on purpose, so that a pattern selects exactly the keys it selects
//! in Redis: an unterminated `[` set matches like a terminated one, a trailing `\` is a
//! literal backslash, `[a-]` is the range `]`..`a`, and matching gives up (no match) past
//! 1000 nested `*`s, and the empty string matches only the empty pattern.
//!
//! Redis walks a NUL-terminated C string and peeks one byte past the end in places; here
//! [`Pattern::at`] returns 0 past the end, which is what Redis reads there.

/// Matches `string` against the glob `pattern`, case-sensitively.
#[must_use]
pub fn matches(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_from(Pattern(pattern), 0, string, &mut skip_longer, 0)
}

/// Deepest `*` recursion before giving up, as Redis' protection against abusive patterns.
const NESTING_MAX: usize = 1000;

#[derive(Clone, Copy)]
struct Pattern<'a>(&'a [u8]);

impl Pattern<'_> {
    /// The byte at `index`, or 0 (C's terminator) past the end.
    fn at(self, index: usize) -> u8 {
        self.0.get(index).copied().unwrap_or(0)
    }

    fn len(self) -> usize {
        self.0.len()
    }
}

/// Redis' `stringmatchlen_impl`. `p` is the pattern position (Redis' `pattern`; its
/// `patternLen` is always `pattern.len() - p`); `string` is what is left to match.
fn match_from(
    pattern: Pattern<'_>,
    mut p: usize,
    mut string: &[u8],
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    if nesting > NESTING_MAX {
        return false;
    }
    let remaining = |p: usize| pattern.len().saturating_sub(p);
    while remaining(p) > 0 && !string.is_empty() {
        match pattern.at(p) {
            b'*' => {
                while remaining(p) > 0 && pattern.at(p + 1) == b'*' {
                    p += 1;
                }
                if remaining(p) == 1 {
                    return true;
                }
                while !string.is_empty() {
                    if match_from(pattern, p + 1, string, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    string = &string[1..];
                }
                // Nothing after this `*` matches anywhere in the rest of the string, so no
                // longer match for an earlier `*` can help either.
                *skip_longer = true;
                return false;
            }
            b'?' => string = &string[1..],
            b'[' => {
                p += 1;
                let negated = pattern.at(p) == b'^';
                if negated {
                    p += 1;
                }
                let c = string[0];
                let mut matched = false;
                loop {
                    if pattern.at(p) == b'\\' && remaining(p) >= 2 {
                        p += 1;
                        if pattern.at(p) == c {
                            matched = true;
                        }
                    } else if pattern.at(p) == b']' {
                        break;
                    } else if remaining(p) == 0 {
                        // Unterminated set: step back so the common advance below ends the
                        // pattern.
                        p -= 1;
                        break;
                    } else if remaining(p) >= 3 && pattern.at(p + 1) == b'-' {
                        let (mut start, mut end) = (pattern.at(p), pattern.at(p + 2));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        p += 2;
                        if (start..=end).contains(&c) {
                            matched = true;
                        }
                    } else if pattern.at(p) == c {
                        matched = true;
                    }
                    p += 1;
                }
                if matched == negated {
                    return false;
                }
                string = &string[1..];
            }
            byte => {
                let literal = if byte == b'\\' && remaining(p) >= 2 {
                    p += 1;
                    pattern.at(p)
                } else {
                    byte
                };
                if literal != string[0] {
                    return false;
                }
                string = &string[1..];
            }
        }
        p += 1;
        if string.is_empty() {
            while pattern.at(p) == b'*' && remaining(p) > 0 {
                p += 1;
            }
            break;
        }
    }
    remaining(p) == 0 && string.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(pattern: &str, string: &str) -> bool {
        matches(pattern.as_bytes(), string.as_bytes())
    }

    // Proves `*` and `?` match runs and single bytes, anchored at both ends.
    #[test]
    fn star_and_question_mark() {
        // Redis' matcher never matches an empty string against a non-empty pattern, not
        // even `*` (KEYS and SCAN short-cut a lone `*`, so the empty key is still listed).
        assert!(!m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("user:*", "user:1"));
        assert!(!m("user:*", "users:1"));
        assert!(m("*:*:*", "a:b:c"));
        assert!(!m("*:*:*", "a:b"));
        assert!(m("a**b", "axxb"));
        assert!(m("a*", "a"));
        assert!(m("a***", "a"));
        assert!(!m("a", "ab"));
        assert!(!m("ab", "a"));
        assert!(m("", ""));
        assert!(!m("", "a"));
        assert!(!m("?", ""));
    }

    // Proves sets, negated sets and ranges, including reversed ranges.
    #[test]
    fn sets_and_ranges() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("[0-9][0-9]", "42"));
        assert!(!m("[0-9]", "x"));
        assert!(!m("[]", "a"));
        assert!(m("[^]", "a"));
    }

    // Proves backslash escapes, inside and outside sets.
    #[test]
    fn escapes() {
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("\\?", "?"));
        assert!(!m("\\?", "a"));
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
        assert!(m("a\\", "a\\"));
    }

    // Proves Redis' quirks are kept: unterminated sets, `[a-]` as a range up to `]`.
    #[test]
    fn redis_quirks() {
        assert!(m("[a", "a"));
        assert!(!m("[a", "b"));
        assert!(m("x[ab", "xb"));
        // `[a-]` is the range `]`..`a` (bounds swapped), unterminated.
        assert!(m("[a-]", "_"));
        assert!(m("[a-]", "]"));
        assert!(!m("[a-]", "b"));
        assert!(!m("[a-]", "-"));
    }

    // Proves binary keys and patterns work, and that pathological patterns end quickly.
    #[test]
    fn binary_and_pathological() {
        assert!(matches(b"\x00*\xff", b"\x00abc\xff"));
        assert!(!matches(b"\x00*\xff", b"\x00abc"));
        let pattern = "a*".repeat(30) + "b";
        let string = "a".repeat(60);
        assert!(!m(&pattern, &string));
        let deep = "*a".repeat(1500);
        assert!(!m(&deep, &"a".repeat(1500)));
    }
}
