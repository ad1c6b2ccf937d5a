//! Splitting an inline request line into arguments with Redis's
//! `sdssplitargs` rules.
//!
//! - Arguments are separated by whitespace (C `isspace`).
//! - `"double quotes"` support `\n \r \t \b \a`, `\xHH` and `\<any>` (the
//!   character itself, so `\\` and `\"`).
//! - `'single quotes'` support only `\'`.
//! - A closing quote must be followed by whitespace or the end of the line
//!   (`"foo"bar` is an error), but an opening quote may follow other
//!   characters (`foo"bar"` is the single argument `foobar`).
//! - Redis splits a C string, so a NUL byte ends the line.

use std::ops::Range;

use crate::error::ProtocolError;
use crate::number::is_c_space;

/// One inline argument: a range of the line when it contains no quotes, so it
/// can be sliced out without copying, or the unescaped bytes otherwise.
#[derive(Debug)]
pub(crate) enum InlineArg {
    Borrowed(Range<usize>),
    Owned(Vec<u8>),
}

/// Splits `line` (without its line terminator) into arguments. Ranges are
/// relative to the start of `line`.
pub(crate) fn split_inline(line: &[u8]) -> Result<Vec<InlineArg>, ProtocolError> {
    let line = match memchr::memchr(0, line) {
        Some(nul) => line.get(..nul).unwrap_or_default(),
        None => line,
    };
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|&b| is_c_space(b)) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let (arg, next) = read_token(line, i)?;
        args.push(arg);
        i = next;
    }
}

/// Quoting mode inside a token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Reads the token starting at `start` (a non-space byte); returns it and the
/// offset just past it.
fn read_token(line: &[u8], start: usize) -> Result<(InlineArg, usize), ProtocolError> {
    // `owned` is only created once the token turns out to contain a quote.
    let mut owned: Option<Vec<u8>> = None;
    let mut quote = Quote::None;
    let mut i = start;
    loop {
        let byte = line.get(i).copied();
        let next = line.get(i + 1).copied();
        match quote {
            Quote::None => match byte {
                // Unquoted tokens end at these four only, not at every
                // `isspace` byte (vertical tab and form feed are kept).
                None | Some(b' ' | b'\n' | b'\r' | b'\t') => {
                    let arg = match owned {
                        Some(bytes) => InlineArg::Owned(bytes),
                        None => InlineArg::Borrowed(start..i),
                    };
                    return Ok((arg, i));
                }
                Some(open @ (b'"' | b'\'')) => {
                    quote = if open == b'"' {
                        Quote::Double
                    } else {
                        Quote::Single
                    };
                    owned.get_or_insert_with(|| line.get(start..i).unwrap_or_default().to_vec());
                    i += 1;
                }
                Some(other) => {
                    if let Some(bytes) = owned.as_mut() {
                        bytes.push(other);
                    }
                    i += 1;
                }
            },
            Quote::Double => {
                let bytes = owned.get_or_insert_with(Vec::new);
                match (byte, next) {
                    (None, _) => return Err(ProtocolError::UnbalancedQuotes),
                    (Some(b'\\'), Some(b'x')) => {
                        let high = line.get(i + 2).copied().and_then(hex_digit);
                        let low = line.get(i + 3).copied().and_then(hex_digit);
                        if let (Some(high), Some(low)) = (high, low) {
                            bytes.push(high * 16 + low);
                            i += 4;
                        } else {
                            // Not a valid `\xHH`: an ordinary escape of `x`.
                            bytes.push(b'x');
                            i += 2;
                        }
                    }
                    (Some(b'\\'), Some(escaped)) => {
                        bytes.push(match escaped {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => b'\x08',
                            b'a' => b'\x07',
                            other => other,
                        });
                        i += 2;
                    }
                    (Some(b'"'), after) => {
                        close_quote(after)?;
                        i += 1;
                        return Ok((InlineArg::Owned(std::mem::take(bytes)), i));
                    }
                    (Some(other), _) => {
                        bytes.push(other);
                        i += 1;
                    }
                }
            }
            Quote::Single => {
                let bytes = owned.get_or_insert_with(Vec::new);
                match (byte, next) {
                    (None, _) => return Err(ProtocolError::UnbalancedQuotes),
                    (Some(b'\\'), Some(b'\'')) => {
                        bytes.push(b'\'');
                        i += 2;
                    }
                    (Some(b'\''), after) => {
                        close_quote(after)?;
                        i += 1;
                        return Ok((InlineArg::Owned(std::mem::take(bytes)), i));
                    }
                    (Some(other), _) => {
                        bytes.push(other);
                        i += 1;
                    }
                }
            }
        }
    }
}

/// A closing quote must be followed by whitespace or the end of the line.
fn close_quote(after: Option<u8>) -> Result<(), ProtocolError> {
    match after {
        Some(byte) if !is_c_space(byte) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(()),
    }
}

fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}
