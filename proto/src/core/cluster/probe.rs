//! What the simulator's probes read of a core to check L5 (docs/cluster.md,
//! "Availability"): plain views of the tables, never used by the protocol.

use crate::core::Core;

impl Core {
    /// For the simulator's checks only: the tickets that block their
    /// object on this agent as their owner (granted, or inherited), as
    /// (object, home id, request).
    #[doc(hidden)]
    pub fn debug_owned_blocking(&self) -> Vec<(Vec<u8>, String, u64)> {
        let me = &self.cluster.me;
        let Some(l) = self.cluster.leader.table.as_ref().filter(|l| l.ready) else {
            return Vec::new();
        };
        let mut all = Vec::new();
        for (name, o) in &l.objects {
            if self.owner_of(name).as_ref() != Some(me) {
                continue;
            }
            for t in o.tickets.iter().filter(|t| t.blocks()) {
                all.push((name.to_vec(), t.home.to_string(), t.req));
            }
        }
        all
    }

    /// For the simulator's checks only: this agent's id and its clients'
    /// requests (object, request).
    #[doc(hidden)]
    pub fn debug_requests(&self) -> (String, Vec<(Vec<u8>, u64)>) {
        let mut all = Vec::new();
        for (name, o) in &self.table.objects {
            for t in &o.tickets {
                all.push((name.to_vec(), t.id.0));
            }
        }
        (self.cluster.me.to_string(), all)
    }
}
