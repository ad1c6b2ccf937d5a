//! Cluster members and where they run.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A member's identity: its unique node name in the cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MemberId(pub String);

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a member runs, each level optional (Infinispan's site, rack and machine ids). A
/// member without a machine id counts as a machine of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Data center or region.
    pub site: Option<String>,
    /// Rack within the site.
    pub rack: Option<String>,
    /// Physical host: members on one machine fail together.
    pub machine: Option<String>,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Member {
    /// Its identity.
    pub id: MemberId,
    /// Where it runs.
    pub location: Location,
}

impl Member {
    /// A member with no location ids (its own machine).
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: MemberId(id.into()),
            location: Location::default(),
        }
    }

    /// A member at `site`/`rack`/`machine` (empty strings mean "not given").
    #[must_use]
    pub fn at(id: impl Into<String>, site: &str, rack: &str, machine: &str) -> Self {
        let given = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        Self {
            id: MemberId(id.into()),
            location: Location {
                site: given(site),
                rack: given(rack),
                machine: given(machine),
            },
        }
    }

    /// How far apart two members are, for placing backups: 3 on different sites, 2 on
    /// different racks of a site, 1 on different machines of a rack, 0 on one machine. Levels
    /// a member does not give count as shared, except the machine: each member without a
    /// machine id is a machine of its own.
    #[must_use]
    pub fn distance(&self, other: &Self) -> u8 {
        let (a, b) = (&self.location, &other.location);
        let differ =
            |x: &Option<String>, y: &Option<String>| matches!((x, y), (Some(x), Some(y)) if x != y);
        if differ(&a.site, &b.site) {
            return 3;
        }
        if differ(&a.rack, &b.rack) {
            return 2;
        }
        let same_machine = match (&a.machine, &b.machine) {
            (Some(x), Some(y)) => x == y,
            _ => self.id == other.id,
        };
        u8::from(!same_machine)
    }
}
