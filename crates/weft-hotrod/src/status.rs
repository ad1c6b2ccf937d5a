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

    /// True for the error statuses (sent with the error opcode and a message).
    #[must_use]
    pub const fn is_error(self) -> bool {
        self.code() >= 0x81
    }
}
