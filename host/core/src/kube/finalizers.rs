//! Finalizers a plugin adds to and removes from an object: their names checked as the
//! API server checks them, and the new list computed the same way for the live cluster
//! and the test kit.

use super::labels::{LabelError, validate_key};

/// Most finalizers one call may add or remove.
pub const MAX_PER_CALL: usize = 16;

/// Why a finalizer change was refused before any API call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinalizerError {
    /// A name is not a qualified name (`example.com/cleanup`).
    #[error("finalizer {0}")]
    Name(#[source] LabelError),
    /// Too many in one call.
    #[error("{0} finalizers in one call, more than {MAX_PER_CALL}")]
    TooMany(usize),
}

/// Checks every name of `add` and `remove`: qualified names, as label keys are (the
/// API server refuses others), at most [`MAX_PER_CALL`] in all.
pub fn check(add: &[String], remove: &[String]) -> Result<(), FinalizerError> {
    let count = add.len() + remove.len();
    if count > MAX_PER_CALL {
        return Err(FinalizerError::TooMany(count));
    }
    for name in add.iter().chain(remove) {
        validate_key(name).map_err(FinalizerError::Name)?;
    }
    Ok(())
}

/// `current` without `remove` and with every missing name of `add` appended: the
/// others keep their order (other controllers' finalizers are left alone).
pub fn changed(current: &[String], add: &[String], remove: &[String]) -> Vec<String> {
    let mut wanted: Vec<String> = (current.iter())
        .filter(|f| !remove.contains(f))
        .cloned()
        .collect();
    for name in add {
        if !wanted.contains(name) && !remove.contains(name) {
            wanted.push(name.clone());
        }
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn others_finalizers_keep_their_place_and_adding_twice_adds_once() {
        let current = names(&["a.io/x", "mine.io/clean", "b.io/y"]);
        assert_eq!(
            changed(&current, &names(&["mine.io/clean", "mine.io/new"]), &[]),
            names(&["a.io/x", "mine.io/clean", "b.io/y", "mine.io/new"])
        );
        assert_eq!(
            changed(&current, &[], &names(&["mine.io/clean"])),
            names(&["a.io/x", "b.io/y"])
        );
    }

    #[test]
    fn names_are_checked_before_anything_is_sent() {
        assert!(check(&names(&["example.com/cleanup"]), &[]).is_ok());
        let bad = check(&names(&["not a name"]), &[]).expect_err("spaces");
        assert!(bad.to_string().starts_with("finalizer"), "{bad}");
        let many: Vec<String> = (0..17).map(|i| format!("e.io/f{i}")).collect();
        assert_eq!(check(&many, &[]), Err(FinalizerError::TooMany(17)));
    }
}
