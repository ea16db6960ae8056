//! Finalizers: clean up what a controller made outside its object before Kubernetes
//! deletes the object, as kube-runtime's `finalizer` and controller-runtime's
//! `controllerutil.AddFinalizer`/`RemoveFinalizer` do.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{Error, ObjectRef, cluster};

/// Where an object stands after [`finalize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalized {
    /// The object lives and carries the finalizer: reconcile it as usual.
    Active,
    /// The object is being deleted and its cleanup is done (or was not this
    /// controller's to do): reconcile nothing more.
    Deleting,
}

/// The usual pattern in one call. While the object lives, adds `finalizer` to it (once;
/// the write wakes the key again). Once it is being deleted and still carries
/// `finalizer`, runs `cleanup` and then removes `finalizer`, which lets Kubernetes
/// delete the object when no other finalizer holds it. A failed `cleanup` keeps the
/// finalizer (the object stays) and returns the error, so the key is retried.
///
/// Needs the `patch` permission on the object's kind.
pub fn finalize(
    obj: &ObjectRef,
    meta: &ObjectMeta,
    finalizer: &str,
    cleanup: impl FnOnce() -> Result<(), Error>,
) -> Result<Finalized, Error> {
    let carries = (meta.finalizers.iter().flatten()).any(|f| f == finalizer);
    if meta.deletion_timestamp.is_some() {
        if carries {
            cleanup()?;
            cluster::patch_finalizers(obj, &[], &[finalizer])?;
        }
        return Ok(Finalized::Deleting);
    }
    if !carries {
        cluster::patch_finalizers(obj, &[finalizer], &[])?;
    }
    Ok(Finalized::Active)
}
