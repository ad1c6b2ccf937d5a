//! How long a client may take to send a request, for every protocol.
//!
//! A connection must send its whole first request within `first-request-timeout-secs` of
//! being accepted: protocol detection counts against it, and so does the rest of that
//! request. Afterwards a connection may idle as long as it likes between requests (Redis'
//! `timeout 0`: pooled clients keep connections open for hours), but a request that has
//! begun to arrive must arrive whole within `request-timeout-secs` of the last request
//! completed before it. Each byte received earns `1 / request-min-bytes-per-second`
//! seconds more, so a large value sent at a useful speed is never cut off while one
//! trickled a byte at a time is (Apache's `mod_reqtimeout` works the same way).
//!
//! The deadlines use tokio's clock, so tests run them on a paused one.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::ServerSection;

/// One connection's deadline for the request it is receiving.
#[derive(Debug)]
pub struct RequestDeadline {
    /// When the connection closes unless a request completes first; `None` while no request
    /// is under way on an established connection.
    at: Option<Instant>,
    /// No request has completed yet: the first-request deadline holds until one does.
    first: bool,
    request_timeout: Duration,
    allowance: Allowance,
}

impl RequestDeadline {
    /// The deadline of a connection accepted at `accepted`.
    #[must_use]
    pub fn new(settings: &ServerSection, accepted: Instant) -> Self {
        Self {
            // A timeout too large for the clock is no timeout.
            at: accepted.checked_add(Duration::from_secs(settings.first_request_timeout_secs)),
            first: true,
            request_timeout: Duration::from_secs(settings.request_timeout_secs),
            allowance: Allowance::new(settings.request_min_bytes_per_second),
        }
    }

    /// When the connection must close unless a request completes first.
    #[must_use]
    pub fn at(&self) -> Option<Instant> {
        self.at
    }

    /// Counts `bytes` received: a request under way gets the time they earn.
    pub fn received(&mut self, bytes: usize) {
        if let Some(at) = self.at {
            self.at = at.checked_add(self.allowance.earned(bytes));
        }
    }

    /// After decoding what was received: whether some request `completed`, and whether part
    /// of one is still `pending`. A completed request ends the first-request deadline; a
    /// pending one on an established connection starts a request deadline unless one runs.
    pub fn decoded(&mut self, completed: bool, pending: bool) {
        if completed {
            self.first = false;
            self.at = None;
        }
        if self.first {
            return;
        }
        if !pending {
            self.at = None;
        } else if self.at.is_none() {
            self.at = Instant::now().checked_add(self.request_timeout);
        }
    }

    /// Resolves when the deadline passes; never while there is none.
    pub async fn expired(&self) {
        match self.at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }
}

/// The time bytes received earn at `request-min-bytes-per-second`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Allowance {
    bytes_per_second: u64,
}

impl Allowance {
    pub(crate) fn new(bytes_per_second: u64) -> Self {
        Self { bytes_per_second }
    }

    /// What `bytes` earn: nothing when no rate is set.
    pub(crate) fn earned(self, bytes: usize) -> Duration {
        if self.bytes_per_second == 0 {
            return Duration::ZERO;
        }
        let nanos = (bytes as u128) * 1_000_000_000 / u128::from(self.bytes_per_second);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ServerSection {
        ServerSection {
            first_request_timeout_secs: 10,
            request_timeout_secs: 30,
            request_min_bytes_per_second: 1000,
            ..ServerSection::default()
        }
    }

    // Proves the first-request deadline holds, extended by what arrives, until a request
    // completes; then an idle connection has none, and a partial request starts one.
    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_requests() {
        let accepted = Instant::now();
        let mut deadline = RequestDeadline::new(&settings(), accepted);
        assert_eq!(deadline.at(), Some(accepted + Duration::from_secs(10)));
        deadline.received(500);
        deadline.decoded(false, true);
        assert_eq!(
            deadline.at(),
            Some(accepted + Duration::from_millis(10_500))
        );
        // Nothing complete and nothing pending (empty lines skipped): still the first one.
        deadline.decoded(false, false);
        assert_eq!(
            deadline.at(),
            Some(accepted + Duration::from_millis(10_500))
        );

        deadline.decoded(true, false);
        assert_eq!(
            deadline.at(),
            None,
            "an established idle connection has no deadline"
        );

        tokio::time::advance(Duration::from_secs(100)).await;
        deadline.received(2000);
        deadline.decoded(false, true);
        let started = Instant::now();
        assert_eq!(deadline.at(), Some(started + Duration::from_secs(30)));
        deadline.received(1000);
        deadline.decoded(false, true);
        assert_eq!(deadline.at(), Some(started + Duration::from_secs(31)));
        deadline.decoded(true, true);
        assert_eq!(
            deadline.at(),
            Some(Instant::now() + Duration::from_secs(30)),
            "a completed request restarts the clock for the partial one after it"
        );
    }

    // Proves a zero rate earns nothing, and a huge byte count does not overflow.
    #[test]
    fn allowance_is_bounded() {
        assert_eq!(Allowance::new(0).earned(1 << 30), Duration::ZERO);
        assert_eq!(Allowance::new(1024).earned(2048), Duration::from_secs(2));
        assert_eq!(
            Allowance::new(1).earned(usize::MAX),
            Duration::from_nanos(u64::MAX)
        );
    }
}
