//! One RESP client's state: protocol version, selected database (cache), name, id, and
//! authentication; and command dispatch through the command table.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use weft_core::Cache;
use weft_resp::Protocol;

use super::commands::lists::Block;
use super::reply::Reply;
use super::table;
use crate::ServerContext;

/// A reply outgrew `client-output-bytes-max`: the connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimitExceeded {
    /// The limit in force, in bytes.
    pub limit: usize,
}

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
    /// The last command's name (Redis' `cmd=`). CLIENT INFO/LIST list only this connection,
    /// whose last command is the one running, so they do not read it yet.
    pub last_command: &'static str,
    /// Set by a blocking command that found nothing: the connection loop waits, then runs
    /// the command again.
    pub blocked: Option<Block>,
    /// While a blocked command is retried: its deadline, kept from the first attempt.
    pub block_deadline: Option<Instant>,
    /// Commands queued since MULTI.
    pub multi: Option<Multi>,
    /// True while EXEC runs the queued commands.
    pub executing: bool,
    /// WATCHed keys: the cache, the key, and its version then (`None`: absent).
    pub watched: Vec<(Cache, Bytes, Option<u64>)>,
}

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct Multi {
    /// The queued commands.
    pub queued: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: EXEC will abort.
    pub failed: bool,
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
            blocked: None,
            block_deadline: None,
            multi: None,
            executing: false,
            watched: Vec::new(),
        })
    }

    /// Executes one request and appends its reply to `output`.
    ///
    /// # Errors
    /// [`OutputLimitExceeded`] when the reply would take `output` past
    /// `client-output-bytes-max`; the partial reply is removed from `output` (replies to
    /// earlier requests stay) and the connection must be closed.
    pub fn execute(
        &mut self,
        args: &[Bytes],
        output: &mut BytesMut,
    ) -> Result<(), OutputLimitExceeded> {
        let start = output.len();
        let limit = self.context.settings.client_output_bytes_max;
        let mut reply = Reply::with_limit(output, self.protocol, start.saturating_add(limit));
        // EXEC runs alone; every other command may run beside the others (see `ServerContext::
        // transaction_gate`).
        let context = Arc::clone(&self.context);
        if args
            .first()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"exec"))
        {
            let _exclusive = context.transaction_gate.write();
            self.dispatch(args, &mut reply);
        } else {
            let _shared = context.transaction_gate.read();
            self.dispatch(args, &mut reply);
        }
        if reply.overflowed() {
            output.truncate(start);
            return Err(OutputLimitExceeded { limit });
        }
        Ok(())
    }

    /// Whether MULTI is queueing commands (blocking commands then do not block).
    #[must_use]
    pub fn in_transaction(&self) -> bool {
        self.multi.is_some() || self.executing
    }

    /// Runs one command as EXEC does: no gate (EXEC holds it), no queueing.
    pub fn dispatch_queued(&mut self, args: &[Bytes], reply: &mut Reply<'_>) {
        self.dispatch(args, reply);
    }

    fn dispatch(&mut self, args: &[Bytes], reply: &mut Reply<'_>) {
        let Some(name) = args.first() else { return };
        let Some(spec) = table::lookup(name) else {
            reply.error(&table::unknown_command_error(args));
            self.flag_transaction();
            return;
        };
        if !spec.arity_ok(args.len()) {
            reply.error(&format!(
                "ERR wrong number of arguments for '{}' command",
                spec.name
            ));
            self.flag_transaction();
            return;
        }
        if self.multi.is_some() && !self.executing && !spec.runs_inside_multi() {
            if let Some(multi) = &mut self.multi {
                multi.queued.push(args.to_vec());
            }
            reply.simple("QUEUED");
            return;
        }
        if !self.authenticated && !spec.allowed_unauthenticated() {
            reply.error("NOAUTH Authentication required.");
            return;
        }
        self.last_command = spec.name;
        (spec.handler)(self, args, reply);
    }

    /// A command refused while MULTI queues makes EXEC abort.
    fn flag_transaction(&mut self) {
        if let Some(multi) = &mut self.multi
            && !self.executing
        {
            multi.failed = true;
        }
    }
}
