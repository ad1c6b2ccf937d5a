//! A member's cluster settings: the same ones the `weft` server reads from its `[server]`
//! section, so that an embedded member and a server member are configured alike.

use std::net::SocketAddr;
use std::time::Duration;

use weft_cluster::Location;
use weft_cluster::membership::MembershipConfig;

/// Inbound cluster connections open at once by default.
pub const CONNECTIONS_MAX_DEFAULT: usize = crate::transport::CONNECTIONS_MAX_DEFAULT;
/// Entries per state-transfer request by default.
pub const STATE_TRANSFER_CHUNK_ENTRIES_DEFAULT: u32 = 1_000;
/// State-transfer rate limit by default, in bytes per second.
pub const STATE_TRANSFER_BYTES_PER_SECOND_DEFAULT: u64 = 64 * 1024 * 1024;

/// How often a member probes another by default.
pub const PROBE_PERIOD_DEFAULT: Duration = Duration::from_secs(1);
/// How long a probe waits for its direct answer by default.
pub const PROBE_TIMEOUT_DEFAULT: Duration = Duration::from_millis(500);
/// How long a suspected member has to refute it by default.
pub const SUSPECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// The shortest probe period accepted: probing more often costs datagrams and wakeups on
/// every member for no gain a busy machine could deliver.
pub const PROBE_PERIOD_MIN: Duration = Duration::from_millis(100);
/// The longest probe period accepted.
pub const PROBE_PERIOD_MAX: Duration = Duration::from_secs(60);
/// The shortest probe timeout accepted.
pub const PROBE_TIMEOUT_MIN: Duration = Duration::from_millis(10);
/// The shortest suspect timeout accepted.
pub const SUSPECT_TIMEOUT_MIN: Duration = Duration::from_millis(100);
/// The longest suspect timeout accepted.
pub const SUSPECT_TIMEOUT_MAX: Duration = Duration::from_secs(600);

/// Failure detection (SWIM over UDP): how soon a member that stopped answering is declared
/// down, and so how long the keys it was the primary of wait for a new owner. Shorter
/// timings detect a crash sooner; they also declare down a member that is only slow (a
/// long pause, a saturated machine), which then has to rejoin and have its data moved back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureDetection {
    /// How often a member probes another (each period, one member chosen in turn).
    pub probe_period: Duration,
    /// How long a probe waits for its direct answer before others are asked to probe
    /// indirectly; shorter than `probe_period`.
    pub probe_timeout: Duration,
    /// How long a member suspected (a probe and its indirect probes unanswered) has to
    /// refute it before it is declared down; at least `probe_period`.
    pub suspect_timeout: Duration,
}

impl Default for FailureDetection {
    fn default() -> Self {
        Self {
            probe_period: PROBE_PERIOD_DEFAULT,
            probe_timeout: PROBE_TIMEOUT_DEFAULT,
            suspect_timeout: SUSPECT_TIMEOUT_DEFAULT,
        }
    }
}

/// Failure-detection timings that do not work together or are out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailureDetectionError {
    /// The probe period is outside [`PROBE_PERIOD_MIN`]..=[`PROBE_PERIOD_MAX`].
    #[error("the probe period must be between {min:?} and {max:?}, not {period:?}", min = PROBE_PERIOD_MIN, max = PROBE_PERIOD_MAX)]
    ProbePeriod {
        /// The period given.
        period: Duration,
    },
    /// The probe timeout is below [`PROBE_TIMEOUT_MIN`] or not shorter than the period.
    #[error("the probe timeout must be at least {min:?} and shorter than the probe period ({period:?}), not {timeout:?}", min = PROBE_TIMEOUT_MIN)]
    ProbeTimeout {
        /// The timeout given.
        timeout: Duration,
        /// The probe period.
        period: Duration,
    },
    /// The suspect timeout is outside its range or shorter than the probe period.
    #[error("the suspect timeout must be between {min:?} and {max:?} and at least the probe period ({period:?}), not {timeout:?}", min = SUSPECT_TIMEOUT_MIN, max = SUSPECT_TIMEOUT_MAX)]
    SuspectTimeout {
        /// The timeout given.
        timeout: Duration,
        /// The probe period.
        period: Duration,
    },
}

impl FailureDetection {
    /// Checks that the timings are in range and work together: a probe must time out
    /// before the next one starts, and a suspected member must have at least a probe period
    /// to hear of the suspicion and refute it.
    ///
    /// # Errors
    /// The first timing that is out of range, as [`FailureDetectionError`].
    pub fn check(&self) -> Result<(), FailureDetectionError> {
        let period = self.probe_period;
        if !(PROBE_PERIOD_MIN..=PROBE_PERIOD_MAX).contains(&period) {
            return Err(FailureDetectionError::ProbePeriod { period });
        }
        if self.probe_timeout < PROBE_TIMEOUT_MIN || self.probe_timeout >= period {
            return Err(FailureDetectionError::ProbeTimeout {
                timeout: self.probe_timeout,
                period,
            });
        }
        let timeout = self.suspect_timeout;
        if !(SUSPECT_TIMEOUT_MIN..=SUSPECT_TIMEOUT_MAX).contains(&timeout) || timeout < period {
            return Err(FailureDetectionError::SuspectTimeout { timeout, period });
        }
        Ok(())
    }

    /// The membership protocol's timing.
    #[must_use]
    pub fn membership(&self) -> MembershipConfig {
        MembershipConfig {
            probe_period: self.probe_period,
            probe_rtt: self.probe_timeout,
            suspect_to_down_after: self.suspect_timeout,
            ..MembershipConfig::default()
        }
    }
}

/// How one member takes part in a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridConfig {
    /// This member's name, unique in the cluster.
    pub name: String,
    /// The cluster address: UDP for membership and TCP for everything else, one port.
    pub listen: SocketAddr,
    /// Members to join, as `host:port` of their cluster addresses (names resolved at start).
    pub join: Vec<String>,
    /// The secret the members share; every cluster connection proves it (empty = none).
    pub secret: Option<String>,
    /// Largest frame accepted on the cluster port.
    pub frame_bytes_max: usize,
    /// Inbound cluster connections open at once.
    pub connections_max: usize,
    /// Where this member runs: site, rack and machine (owners are spread across them).
    pub location: Location,
    /// Entries per state-transfer request.
    pub state_transfer_chunk_entries: u32,
    /// State-transfer rate limit in bytes per second (0 = none).
    pub state_transfer_bytes_per_second: u64,
    /// How soon a member that stopped answering is declared down.
    pub failure_detection: FailureDetection,
    /// Mutual TLS on every cluster connection (see [`crate::tls`]); absent = plaintext.
    pub tls: Option<crate::tls::ClusterTls>,
}

impl GridConfig {
    /// A member named `name` listening at `listen` and joining `join`, every other setting
    /// at its default.
    #[must_use]
    pub fn new(name: impl Into<String>, listen: SocketAddr, join: Vec<String>) -> Self {
        Self {
            name: name.into(),
            listen,
            join,
            secret: None,
            frame_bytes_max: weft_cluster::wire::FRAME_BYTES_MAX,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            location: Location::default(),
            state_transfer_chunk_entries: STATE_TRANSFER_CHUNK_ENTRIES_DEFAULT,
            state_transfer_bytes_per_second: STATE_TRANSFER_BYTES_PER_SECOND_DEFAULT,
            failure_detection: FailureDetection::default(),
            tls: None,
        }
    }

    /// The same, with the cluster `secret`.
    #[must_use]
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the default timings are the membership protocol's own defaults and pass the
    // check, and that timings which cannot work together are refused.
    #[test]
    fn failure_detection_timings_are_checked() {
        let defaults = FailureDetection::default();
        assert_eq!(defaults.check(), Ok(()));
        assert_eq!(defaults.membership(), MembershipConfig::default());
        let ms = Duration::from_millis;
        let with = |period, timeout, suspect| FailureDetection {
            probe_period: ms(period),
            probe_timeout: ms(timeout),
            suspect_timeout: ms(suspect),
        };
        assert_eq!(with(200, 100, 1_000).check(), Ok(()));
        assert!(matches!(
            with(50, 10, 1_000).check(),
            Err(FailureDetectionError::ProbePeriod { .. })
        ));
        assert!(matches!(
            with(500, 500, 1_000).check(),
            Err(FailureDetectionError::ProbeTimeout { .. })
        ));
        assert!(matches!(
            with(500, 5, 1_000).check(),
            Err(FailureDetectionError::ProbeTimeout { .. })
        ));
        assert!(matches!(
            with(1_000, 500, 900).check(),
            Err(FailureDetectionError::SuspectTimeout { .. })
        ));
        assert!(matches!(
            with(1_000, 500, 601_000).check(),
            Err(FailureDetectionError::SuspectTimeout { .. })
        ));
    }
}
