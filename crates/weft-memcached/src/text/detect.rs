//! Telling a memcached text connection apart on a shared port, from its first bytes.

/// The commands that start a memcached text connection on a shared port: every classic
/// command. Redis clients send multibulk (`*`), and the commands are lower-case words
/// memcached clients send as such, so a first line starting with one of them is memcached.
pub const DETECTED_COMMANDS: &[&[u8]] = &[
    b"get",
    b"gets",
    b"gat",
    b"gats",
    b"set",
    b"add",
    b"replace",
    b"append",
    b"prepend",
    b"cas",
    b"delete",
    b"incr",
    b"decr",
    b"touch",
    b"flush_all",
    b"version",
    b"verbosity",
    b"stats",
    b"quit",
];

/// memcached accepts up to this many spaces before a command; more are not memcached.
const LEADING_SPACES_MAX: usize = 100;

/// Whether `first` (a connection's first bytes) starts a memcached text command: a first
/// word, after at most 100 spaces, that is one of [`DETECTED_COMMANDS`] (case-sensitive)
/// followed by a space, `\r` or `\n`. `None` while the bytes so far could still become one.
#[must_use]
pub fn looks_like_text_command(first: &[u8]) -> Option<bool> {
    let spaces = first.iter().take_while(|&&byte| byte == b' ').count();
    if spaces > LEADING_SPACES_MAX {
        return Some(false);
    }
    let rest = first.get(spaces..).unwrap_or_default();
    match rest
        .iter()
        .position(|&byte| matches!(byte, b' ' | b'\r' | b'\n'))
    {
        Some(end) => {
            let word = rest.get(..end).unwrap_or_default();
            Some(DETECTED_COMMANDS.contains(&word))
        }
        None if DETECTED_COMMANDS
            .iter()
            .any(|command| command.starts_with(rest)) =>
        {
            None
        }
        None => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves memcached commands are recognised, and Redis inline commands are not.
    #[test]
    fn recognises_memcached_commands_only() {
        assert_eq!(looks_like_text_command(b"get k\r\n"), Some(true));
        assert_eq!(looks_like_text_command(b"set k 0 0 1\r\nx\r\n"), Some(true));
        assert_eq!(looks_like_text_command(b"  version\r\n"), Some(true));
        assert_eq!(looks_like_text_command(b"stats\n"), Some(true));
        assert_eq!(looks_like_text_command(b"flush_all"), None);
        assert_eq!(looks_like_text_command(b"ge"), None);
        assert_eq!(looks_like_text_command(b""), None);
        assert_eq!(looks_like_text_command(b"GET k\r\n"), Some(false));
        assert_eq!(looks_like_text_command(b"PING\r\n"), Some(false));
        assert_eq!(looks_like_text_command(b"ping\r\n"), Some(false));
        assert_eq!(looks_like_text_command(b"getx k\r\n"), Some(false));
        assert_eq!(looks_like_text_command(b"*1\r\n"), Some(false));
    }
}
