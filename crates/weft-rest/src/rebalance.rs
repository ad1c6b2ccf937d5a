//! `GET /rest/v2/cluster/rebalance` (Weft's own; Infinispan has no such route): how far each
//! clustered cache's rebalance has come across the whole cluster, computed from what the
//! node asked already knows — the agreed topology (its phase, what each member must fetch,
//! which members confirmed the phase) and this node's own state-transfer counters. `weft cli`
//! draws its progress bars from it.
//!
//! A rebalance has three phases (read old/write all, read all/write all, read new/write
//! all), each ended when every member confirmed it; a member confirms the first once its
//! transfers are done, so the segments of the members that confirmed it have arrived. Other
//! members' partial transfers are not known here, only this node's.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use crate::error::RestError;
use crate::{CacheTopologyView, MemberRebalanceView, Shared, json};

/// The phases of a rebalance, in order, as [`CacheTopologyView::phase`] names them.
const PHASES: [&str; 3] = [
    "read-old-write-all",
    "read-all-write-all",
    "read-new-write-all",
];

/// The report of `GET /rest/v2/cluster/rebalance`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RebalanceReport {
    /// The node that answered.
    pub node_name: String,
    /// Whether any clustered cache is rebalancing.
    pub rebalancing: bool,
    /// Each clustered cache, by name.
    pub caches: Vec<CacheRebalance>,
}

/// One clustered cache's rebalance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CacheRebalance {
    /// The cache.
    pub cache: String,
    /// The topology id installed here.
    pub topology_id: u32,
    /// The rebalance it belongs to.
    pub rebalance_id: u32,
    /// `stable`, or the phase under way.
    pub phase: String,
    /// 0 when stable, else the phase's number (1–3).
    pub phase_number: u8,
    /// Segment copies the rebalance moves, over all members.
    pub segments_total: u64,
    /// Those known to have arrived (see the module's documentation).
    pub segments_done: u64,
    /// Members in the rebalance.
    pub members_total: u64,
    /// Members that confirmed the current phase.
    pub members_confirmed: u64,
    /// The whole rebalance's progress, from 0 to 1 (1 when stable), counted in units of
    /// work: each segment copy to move, and each member's confirmation of each of the three
    /// phases. Copies dominate: the later phases pass in milliseconds.
    pub progress: f64,
    /// Each member's part.
    pub members: Vec<MemberRebalanceView>,
    /// Whether the cache is DEGRADED (a rebalance may then wait for members to return).
    pub degraded: bool,
}

/// The rebalance of one cache, as `node` sees it.
#[must_use]
pub(crate) fn cache_rebalance(node: &str, view: &CacheTopologyView) -> CacheRebalance {
    let phase_number = PHASES
        .iter()
        .position(|phase| *phase == view.phase)
        .map_or(0, |index| index as u8 + 1);
    let stable = phase_number == 0;
    let members = if stable {
        Vec::new()
    } else {
        view.rebalance.clone()
    };
    let segments_total: u64 = members.iter().map(|m| m.segments_to_fetch).sum();
    let segments_done = match phase_number {
        0 => 0,
        1 => members
            .iter()
            .map(|m| {
                if m.confirmed {
                    m.segments_to_fetch
                } else if m.member == node {
                    view.transfer.segments_done.min(m.segments_to_fetch)
                } else {
                    0
                }
            })
            .sum(),
        _ => segments_total,
    };
    let members_total = members.len() as u64;
    let members_confirmed = members.iter().filter(|m| m.confirmed).count() as u64;
    let progress = if phase_number == 0 {
        1.0
    } else {
        let confirmations = u64::from(phase_number - 1) * members_total + members_confirmed;
        let units = segments_total + PHASES.len() as u64 * members_total;
        if units == 0 {
            0.0
        } else {
            (segments_done + confirmations) as f64 / units as f64
        }
    };
    CacheRebalance {
        cache: view.cache.clone(),
        topology_id: view.topology_id,
        rebalance_id: view.rebalance_id,
        phase: view.phase.clone(),
        phase_number,
        segments_total,
        segments_done,
        members_total,
        members_confirmed,
        progress,
        members,
        degraded: view.degraded,
    }
}

/// `GET /rest/v2/cluster/rebalance`.
///
/// # Errors
/// A 500 if the report cannot be written as JSON (it always can).
pub(crate) async fn rebalance(State(state): State<Shared>) -> Result<Response, RestError> {
    let cluster = state.cluster_members();
    let caches: Vec<CacheRebalance> = cluster
        .caches
        .iter()
        .map(|view| cache_rebalance(state.node_name(), view))
        .collect();
    let report = RebalanceReport {
        node_name: state.node_name().to_owned(),
        rebalancing: caches.iter().any(|cache| cache.phase_number != 0),
        caches,
    };
    serde_json::to_value(&report)
        .map(|value| json::respond(&value))
        .map_err(|error| RestError::internal(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransferView;

    fn member(name: &str, segments_to_fetch: u64, confirmed: bool) -> MemberRebalanceView {
        MemberRebalanceView {
            member: name.into(),
            segments_to_fetch,
            confirmed,
        }
    }

    // Proves the first phase counts the segments of members that confirmed and this node's
    // own transfer, and later phases count confirmations.
    #[test]
    fn progress_follows_segments_then_confirmations() {
        let mut view = CacheTopologyView {
            cache: "default".into(),
            phase: "read-old-write-all".into(),
            rebalance: vec![
                member("a", 10, true),
                member("b", 20, false),
                member("c", 30, false),
            ],
            transfer: TransferView {
                segments_total: 20,
                segments_done: 5,
                entries: 100,
            },
            ..CacheTopologyView::default()
        };
        let report = cache_rebalance("b", &view);
        assert_eq!(report.phase_number, 1);
        assert_eq!((report.segments_done, report.segments_total), (15, 60));
        assert_eq!((report.members_confirmed, report.members_total), (1, 3));
        // 15 of 60 copies and 1 of 9 confirmations.
        assert!((report.progress - 16.0 / 69.0).abs() < 1e-9);
        // A node outside the rebalance knows only the confirmed members' segments.
        assert_eq!(cache_rebalance("d", &view).segments_done, 10);

        view.phase = "read-new-write-all".into();
        view.rebalance = vec![
            member("a", 10, true),
            member("b", 20, true),
            member("c", 30, false),
        ];
        let report = cache_rebalance("b", &view);
        assert_eq!((report.phase_number, report.segments_done), (3, 60));
        assert!((report.progress - 68.0 / 69.0).abs() < 1e-9);

        view.phase = "stable".into();
        let report = cache_rebalance("b", &view);
        assert_eq!((report.phase_number, report.segments_total), (0, 0));
        assert!(report.members.is_empty());
        assert!((report.progress - 1.0).abs() < 1e-9);
    }
}
