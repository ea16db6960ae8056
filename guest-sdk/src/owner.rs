//! Owner references: how an object says which controller object it belongs to.
//!
//! An object with a *controller* owner reference is deleted by the garbage collector
//! when its owner goes, and its changes wake the owner's key in controllers that watch
//! it with [`Watch::owned_by`](crate::Watch::owned_by).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::{Error, ErrorCode, Gvk};

/// The controller reference to `owner` (of kind `kind`), blocking the owner's
/// foreground deletion until the dependent is gone. The owner must have been read
/// from the cluster: its uid is part of the reference.
pub fn controller_reference(kind: &Gvk, owner: &ObjectMeta) -> Result<OwnerReference, Error> {
    let name = owner
        .name
        .clone()
        .ok_or_else(|| invalid("the owner has no name"))?;
    let uid = owner.uid.clone().ok_or_else(|| {
        invalid(&format!(
            "owner {name} has no uid; read it from the cluster"
        ))
    })?;
    let api_version = match kind.group.as_str() {
        "" => kind.version.clone(),
        group => format!("{group}/{}", kind.version),
    };
    Ok(OwnerReference {
        api_version,
        kind: kind.kind.clone(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// Makes `owner` the controller of the object with metadata `owned`, replacing an
/// earlier reference to the same owner. Fails if another object already controls it
/// (an object has at most one controller), like controller-runtime's
/// `SetControllerReference`.
pub fn set_controller_reference(
    owned: &mut ObjectMeta,
    kind: &Gvk,
    owner: &ObjectMeta,
) -> Result<(), Error> {
    let reference = controller_reference(kind, owner)?;
    let refs = owned.owner_references.get_or_insert_with(Vec::new);
    if let Some(other) = refs
        .iter()
        .find(|r| r.controller == Some(true) && r.uid != reference.uid)
    {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("already controlled by {} {}", other.kind, other.name),
        ));
    }
    refs.retain(|r| r.uid != reference.uid);
    refs.push(reference);
    Ok(())
}

fn invalid(message: &str) -> Error {
    Error::invalid(format!("owner reference: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            uid: uid.map(str::to_string),
            ..ObjectMeta::default()
        }
    }

    fn web_app() -> Gvk {
        Gvk::new("demo.example.com", "v1", "WebApp")
    }

    #[test]
    fn the_reference_names_the_owner_and_marks_it_controller() {
        let r = controller_reference(&web_app(), &meta("shop", Some("u1"))).expect("ok");
        assert_eq!(r.api_version, "demo.example.com/v1");
        assert_eq!(
            (r.kind.as_str(), r.name.as_str(), r.uid.as_str()),
            ("WebApp", "shop", "u1")
        );
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
        let core = controller_reference(&Gvk::new("", "v1", "ConfigMap"), &meta("c", Some("u")));
        assert_eq!(core.expect("ok").api_version, "v1");
    }

    #[test]
    fn an_owner_without_uid_is_refused() {
        let err = controller_reference(&web_app(), &meta("shop", None)).expect_err("no uid");
        assert!(err.code == ErrorCode::Invalid && err.message.contains("shop has no uid"));
    }

    #[test]
    fn setting_twice_keeps_one_reference_and_a_second_controller_is_refused() {
        let mut owned = ObjectMeta::default();
        let owner = meta("shop", Some("u1"));
        set_controller_reference(&mut owned, &web_app(), &owner).expect("first");
        set_controller_reference(&mut owned, &web_app(), &owner).expect("again");
        assert_eq!(owned.owner_references.as_ref().map(Vec::len), Some(1));
        let other = meta("blog", Some("u2"));
        let err = set_controller_reference(&mut owned, &web_app(), &other).expect_err("taken");
        assert!(err.is_conflict() && err.message.contains("already controlled by WebApp shop"));
    }
}
