//! One RESP client's state: protocol version, selected database (cache), name, id, and
//! authentication; and command dispatch through the command table.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use weft_core::Cache;
use weft_resp::Protocol;

use super::reply::Reply;
use super::table;
use crate::ServerContext;

/// A RESP connection's state.
#[derive(Debug)]
pub struct Session {
    /// Server-wide state.
    pub context: Arc<ServerContext>,
    /// The cache of the selected database.
    pub cache: Cache,
    /// The selected database number.
    pub database: u32,
    /// RESP2 until HELLO 3.
    pub protocol: Protocol,
    /// CLIENT ID.
    pub client_id: u64,
    /// CLIENT SETNAME.
    pub client_name: Option<Bytes>,
    /// Whether AUTH succeeded (always true when no password is configured).
    pub authenticated: bool,
    /// Set by QUIT: close after flushing replies.
    pub quit: bool,
    /// The client's address.
    pub peer: SocketAddr,
    /// When the connection was opened.
    pub connected_at: Instant,
    /// The last command's name, for CLIENT INFO/LIST.
    pub last_command: &'static str,
}

impl Session {
    /// A session on database 0; `None` if no cache is mapped to it.
    #[must_use]
    pub fn new(context: Arc<ServerContext>, peer: SocketAddr) -> Option<Self> {
        let cache = context.manager.cache_for_resp_database(0)?;
        let client_id = context.next_client_id();
        let authenticated = context.settings.password.is_none();
        Some(Self {
            context,
            cache,
            database: 0,
            protocol: Protocol::Resp2,
            client_id,
            client_name: None,
            authenticated,
            quit: false,
            peer,
            connected_at: Instant::now(),
            last_command: "",
        })
    }

    /// Executes one request and appends its reply to `output`.
    pub fn execute(&mut self, args: &[Bytes], output: &mut BytesMut) {
        let mut reply = Reply::new(output, self.protocol);
        let Some(name) = args.first() else { return };
        let Some(spec) = table::lookup(name) else {
            reply.error(&table::unknown_command_error(args));
            return;
        };
        if !spec.arity_ok(args.len()) {
            reply.error(&format!(
                "ERR wrong number of arguments for '{}' command",
                spec.name
            ));
            return;
        }
        if !self.authenticated && !spec.allowed_unauthenticated() {
            reply.error("NOAUTH Authentication required.");
            return;
        }
        self.last_command = spec.name;
        (spec.handler)(self, args, &mut reply);
    }
}
