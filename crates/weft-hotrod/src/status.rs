//! Response status codes.

/// The status byte of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Status {
    /// Success.
    Success = 0x00,
    /// A conditional operation did not apply.
    NotExecuted = 0x01,
    /// The key does not exist.
    KeyDoesNotExist = 0x02,
    /// Success; the previous value follows.
    SuccessWithPrevious = 0x03,
    /// Not executed; the current value follows.
    NotExecutedWithPrevious = 0x04,
    /// Unknown iteration id.
    InvalidIteration = 0x05,
    /// Bad magic or message id.
    InvalidMagicOrMessageId = 0x81,
    /// Unknown operation.
    UnknownCommand = 0x82,
    /// Unknown protocol version.
    UnknownVersion = 0x83,
    /// The request could not be parsed, or names an unknown cache.
    RequestParsingError = 0x84,
    /// The server failed to serve the request.
    ServerError = 0x85,
    /// The operation timed out.
    CommandTimeout = 0x86,
    /// A node is suspected (clients fail over).
    NodeSuspected = 0x87,
    /// The server or cache is not running (clients fail over).
    IllegalLifecycleState = 0x88,
}

impl Status {
    /// The wire byte.
    #[must_use]
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The status of a wire byte, if it is one.
    #[must_use]
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x00 => Self::Success,
            0x01 => Self::NotExecuted,
            0x02 => Self::KeyDoesNotExist,
            0x03 => Self::SuccessWithPrevious,
            0x04 => Self::NotExecutedWithPrevious,
            0x05 => Self::InvalidIteration,
            0x81 => Self::InvalidMagicOrMessageId,
            0x82 => Self::UnknownCommand,
            0x83 => Self::UnknownVersion,
            0x84 => Self::RequestParsingError,
            0x85 => Self::ServerError,
            0x86 => Self::CommandTimeout,
            0x87 => Self::NodeSuspected,
            0x88 => Self::IllegalLifecycleState,
            _ => return None,
        })
    }

    /// True for the error statuses (sent with the error opcode and a message).
    #[must_use]
    pub const fn is_error(self) -> bool {
        self.code() >= 0x81
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every status survives code → status, and other bytes are not statuses.
    #[test]
    fn codes_round_trip() {
        let mut known = 0;
        for code in 0..=u8::MAX {
            if let Some(status) = Status::from_code(code) {
                assert_eq!(status.code(), code);
                known += 1;
            }
        }
        assert_eq!(known, 14);
        assert_eq!(Status::from_code(0x06), None);
    }
}
