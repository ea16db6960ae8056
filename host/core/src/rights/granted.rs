//! What RBAC last granted a plugin, as the host enforces it on reads: a watch whose
//! `list` or `watch` the plugin's ServiceAccount lacks is closed, so the plugin is not
//! served that kind from the shared caches and its changes queue no keys, until a
//! review finds the rule granted again. A write the API server refuses as forbidden,
//! or a change of RBAC that may concern the plugin, asks for a review at once.

use std::sync::RwLock;

use tokio::sync::Notify;

use super::access::Rule;

/// The last review's findings for one version of a plugin.
#[derive(Debug, Default)]
pub struct Granted {
    state: RwLock<State>,
    /// Asks the plugin's review loop for a review now; requests made before it gets
    /// to them count as one.
    review_now: Notify,
}

#[derive(Debug, Default, Clone)]
struct State {
    /// Per watch (registration order): the read rules it lacks, empty when open.
    closed: Vec<Vec<Rule>>,
    /// Rules the registration implies, and those denied; `None` when the plugin
    /// shares the host's identity and nothing is reviewed.
    reviewed: Option<Review>,
}

/// Declared rules against denied ones, for the plugin table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// How many rules the registration implies.
    pub declared: usize,
    /// The ones the plugin's ServiceAccount is not granted.
    pub denied: Vec<Rule>,
    /// Whether the host itself may not impersonate the plugin's ServiceAccount (the
    /// host's rights for the plugin, part of the plugin's RBAC): then every write and
    /// Event of the plugin fails, whatever its own rights.
    pub host_cannot_impersonate: bool,
}

impl Granted {
    /// Every watch open, nothing reviewed: the plugin shares the host's identity.
    pub fn everything() -> Granted {
        Granted::default()
    }

    /// The findings of a review: `closed` per watch, and all the declared rules
    /// against the denied ones.
    pub fn reviewed(closed: Vec<Vec<Rule>>, review: Review) -> Granted {
        let granted = Granted::default();
        granted.update(closed, review);
        granted
    }

    /// Replaces the findings with a newer review's.
    pub fn update(&self, closed: Vec<Vec<Rule>>, review: Review) {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        *state = State {
            closed,
            reviewed: Some(review),
        };
    }

    /// Whether watch `index` may be read and may queue keys.
    pub fn is_open(&self, index: usize) -> bool {
        self.lacking(index).is_empty()
    }

    /// The read rules watch `index` lacks (empty when it is open).
    pub fn lacking(&self, index: usize) -> Vec<Rule> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        state.closed.get(index).cloned().unwrap_or_default()
    }

    /// Every read rule lacked by a closed watch, once each.
    pub fn closed_rules(&self) -> Vec<Rule> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let mut rules: Vec<Rule> = state.closed.iter().flatten().cloned().collect();
        rules.sort();
        rules.dedup();
        rules
    }

    /// Asks for a review of the plugin's rights as soon as its review loop can make
    /// one: its rights changed, or a write was refused for lack of one.
    pub fn review_soon(&self) {
        self.review_now.notify_one();
    }

    /// Waits until a review is asked for.
    pub async fn review_asked(&self) {
        self.review_now.notified().await;
    }

    /// Every declared rule the last review found denied (reads and writes).
    pub fn denied_rules(&self) -> Vec<crate::rights::access::Rule> {
        self.review().map(|r| r.denied).unwrap_or_default()
    }

    /// Whether the last review found that the host may not impersonate the plugin.
    pub fn host_cannot_impersonate(&self) -> bool {
        self.review().is_some_and(|r| r.host_cannot_impersonate)
    }

    /// The last review, if the plugin's rights are reviewed at all.
    pub fn review(&self) -> Option<Review> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        state.reviewed.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verb: &str) -> Rule {
        Rule {
            verb: verb.into(),
            group: String::new(),
            resource: "secrets".into(),
            namespace: None,
        }
    }

    #[test]
    fn a_watch_is_closed_while_a_review_finds_its_read_rules_denied() {
        let granted = Granted::everything();
        assert!(granted.is_open(0) && granted.review().is_none());
        let denied = Review {
            declared: 6,
            denied: vec![rule("list"), rule("watch")],
            host_cannot_impersonate: false,
        };
        granted.update(vec![vec![], vec![rule("list"), rule("watch")]], denied);
        assert!(granted.is_open(0));
        assert!(!granted.is_open(1));
        assert_eq!(granted.closed_rules(), vec![rule("list"), rule("watch")]);
        let all = Review {
            declared: 6,
            denied: vec![],
            host_cannot_impersonate: false,
        };
        granted.update(vec![vec![], vec![]], all.clone());
        assert!(granted.is_open(1));
        assert_eq!(granted.review(), Some(all));
    }
}
