//! Operation codes (requests; a response is the request's code plus one, with the
//! exceptions in [`response_of`]).

#![allow(missing_docs)]

pub const PUT: u8 = 0x01;
pub const GET: u8 = 0x03;
pub const PUT_IF_ABSENT: u8 = 0x05;
pub const REPLACE: u8 = 0x07;
pub const REPLACE_IF_UNMODIFIED: u8 = 0x09;
pub const REMOVE: u8 = 0x0B;
pub const REMOVE_IF_UNMODIFIED: u8 = 0x0D;
pub const CONTAINS_KEY: u8 = 0x0F;
pub const GET_WITH_VERSION: u8 = 0x11;
pub const CLEAR: u8 = 0x13;
pub const STATS: u8 = 0x15;
pub const PING: u8 = 0x17;
pub const BULK_GET: u8 = 0x19;
pub const GET_WITH_METADATA: u8 = 0x1B;
pub const BULK_GET_KEYS: u8 = 0x1D;
pub const QUERY: u8 = 0x1F;
pub const AUTH_MECH_LIST: u8 = 0x21;
pub const AUTH: u8 = 0x23;
pub const ADD_CLIENT_LISTENER: u8 = 0x25;
pub const REMOVE_CLIENT_LISTENER: u8 = 0x27;
pub const SIZE: u8 = 0x29;
pub const EXEC: u8 = 0x2B;
pub const PUT_ALL: u8 = 0x2D;
pub const GET_ALL: u8 = 0x2F;
pub const ITERATION_START: u8 = 0x31;
pub const ITERATION_NEXT: u8 = 0x33;
pub const ITERATION_END: u8 = 0x35;
pub const GET_STREAM: u8 = 0x37;
pub const PUT_STREAM: u8 = 0x39;
pub const ADD_BLOOM_FILTER_LISTENER: u8 = 0x41;
pub const UPDATE_BLOOM_FILTER: u8 = 0x43;
pub const COUNTER_IS_DEFINED: u8 = 0x4F;
pub const COUNTER_GET_AND_SET: u8 = 0x7F;

/// The response opcode for any error.
pub const ERROR: u8 = 0x50;
/// Event opcodes.
pub const EVENT_CREATED: u8 = 0x60;
pub const EVENT_MODIFIED: u8 = 0x61;
pub const EVENT_REMOVED: u8 = 0x62;
pub const EVENT_EXPIRED: u8 = 0x63;

/// The response opcode of a request opcode.
#[must_use]
pub const fn response_of(request: u8) -> u8 {
    match request {
        COUNTER_IS_DEFINED => 0x51,
        COUNTER_GET_AND_SET => 0x80,
        // The 4.1 stream operations count down: request 0xEF answers 0xEE.
        0xE4..=0xEF => request - 1,
        other => other.wrapping_add(1),
    }
}

/// The name Infinispan's server gives a request opcode (its `HotRodOperation`), as it names
/// the operation in errors (`ISPN006017: Operation 'GET' requires authentication`).
#[must_use]
pub const fn name(request: u8) -> Option<&'static str> {
    Some(match request {
        PUT => "PUT",
        GET => "GET",
        PUT_IF_ABSENT => "PUT_IF_ABSENT",
        REPLACE => "REPLACE",
        REPLACE_IF_UNMODIFIED => "REPLACE_IF_UNMODIFIED",
        REMOVE => "REMOVE",
        REMOVE_IF_UNMODIFIED => "REMOVE_IF_UNMODIFIED",
        CONTAINS_KEY => "CONTAINS_KEY",
        GET_WITH_VERSION => "GET_WITH_VERSION",
        CLEAR => "CLEAR",
        STATS => "STATS",
        PING => "PING",
        BULK_GET => "BULK_GET",
        GET_WITH_METADATA => "GET_WITH_METADATA",
        BULK_GET_KEYS => "BULK_GET_KEYS",
        QUERY => "QUERY",
        AUTH_MECH_LIST => "AUTH_MECH_LIST",
        AUTH => "AUTH",
        ADD_CLIENT_LISTENER => "ADD_CLIENT_LISTENER",
        REMOVE_CLIENT_LISTENER => "REMOVE_CLIENT_LISTENER",
        SIZE => "SIZE",
        EXEC => "EXEC",
        PUT_ALL => "PUT_ALL",
        GET_ALL => "GET_ALL",
        ITERATION_START => "ITERATION_START",
        ITERATION_NEXT => "ITERATION_NEXT",
        ITERATION_END => "ITERATION_END",
        GET_STREAM => "GET_STREAM",
        PUT_STREAM => "PUT_STREAM",
        ADD_BLOOM_FILTER_LISTENER => "ADD_BLOOM_FILTER_CLIENT_LISTENER",
        UPDATE_BLOOM_FILTER => "UPDATE_BLOOM_FILTER",
        COUNTER_IS_DEFINED => "COUNTER_IS_DEFINED",
        COUNTER_GET_AND_SET => "COUNTER_GET_AND_SET",
        _ => return None,
    })
}

/// The request opcodes this codec decodes, in the order PING advertises them.
pub const SERVED: [u8; 29] = [
    PUT,
    GET,
    PUT_IF_ABSENT,
    REPLACE,
    REPLACE_IF_UNMODIFIED,
    REMOVE,
    REMOVE_IF_UNMODIFIED,
    CONTAINS_KEY,
    GET_WITH_VERSION,
    CLEAR,
    STATS,
    PING,
    BULK_GET,
    GET_WITH_METADATA,
    BULK_GET_KEYS,
    AUTH_MECH_LIST,
    AUTH,
    ADD_CLIENT_LISTENER,
    REMOVE_CLIENT_LISTENER,
    SIZE,
    EXEC,
    PUT_ALL,
    GET_ALL,
    ITERATION_START,
    ITERATION_NEXT,
    ITERATION_END,
    GET_STREAM,
    ADD_BLOOM_FILTER_LISTENER,
    UPDATE_BLOOM_FILTER,
];
