//! Key commands (being written).
use bytes::Bytes;
use crate::resp::{Reply, Session};
macro_rules! pending { ($($n:ident),*) => { $(pub fn $n(_s: &mut Session, _a: &[Bytes], r: &mut Reply<'_>) { r.error("ERR not yet"); })* } }
pending!(del, exists, expire, pexpire, expireat, pexpireat, ttl, pttl, expiretime, pexpiretime, persist, type_, keys, scan, randomkey, rename, renamenx, touch);
