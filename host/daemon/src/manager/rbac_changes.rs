//! Changes of RBAC, as they happen: the plugins they concern have their rights
//! reviewed at once — a running one's review loop is asked for a review, one waiting
//! for a right tries to start now — instead of at the next review interval (a minute
//! by default), so a grant takes effect within seconds and a revocation shows in the
//! plugin's state within seconds.

use crate::controller::ControllerContext;
use wcm_core::rights::changes::{Concerned, RbacChanges};

/// Watches RBAC for `ctx`'s plugins when their rights are reviewed; without the rights
/// to, says so once and relies on the review interval.
pub(super) async fn watch_rbac(ctx: &ControllerContext) -> Option<RbacChanges> {
    let accounts = ctx.identities.accounts()?;
    match RbacChanges::start(&ctx.registry, accounts).await {
        Ok(changes) => Some(changes),
        Err(error) => {
            tracing::warn!(%error, every = ?ctx.review_every,
                "cannot watch RBAC; plugins' rights are reviewed every review interval only");
            None
        }
    }
}

/// The next change of RBAC, if RBAC is watched (never otherwise).
pub(super) async fn next_change(rbac: &mut Option<RbacChanges>) -> Option<Concerned> {
    match rbac {
        Some(rbac) => rbac.next().await,
        None => std::future::pending().await,
    }
}
