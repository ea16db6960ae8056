//! `wasm-controller-manager new`: a standalone plugin project in a new directory, in
//! Rust, Go, Python or JavaScript, with everything it needs carried by this binary:
//! the contract (WIT), the Rust or Go SDK source, a working example reconcile, a unit
//! test, fixtures and the expected report for `wasm-controller-manager test`, a
//! Makefile (`make build`, `make test`) and a README. Nothing is fetched from this
//! repository; the language's own toolchain fetches the rest (crates, Go modules,
//! componentize-py, componentize-js).

mod templates;

use std::path::{Path, PathBuf};

pub use templates::Language;

/// Why a project could not be created.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name cannot be a plugin's, a crate's and a label prefix's.
    #[error(
        "{0:?} cannot be a plugin name: use 1 to 40 lowercase letters, digits and '-', \
         starting with a letter and ending with a letter or digit"
    )]
    Name(String),
    /// The directory exists already.
    #[error("{}: exists already; choose another name or --dir", .0.display())]
    Exists(PathBuf),
    /// A file could not be written.
    #[error("{}: cannot write it: {cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The longest name accepted: `<name>.example.com/enabled` stays a short label key
/// and `wcm-plugin-<name>` a valid ServiceAccount name.
const MAX_NAME: usize = 40;

/// Checks a project (and plugin) name.
pub fn check_name(name: &str) -> Result<(), NewError> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_NAME
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && (bytes.iter()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    match valid {
        true => Ok(()),
        false => Err(NewError::Name(name.to_string())),
    }
}

/// Writes a new project for plugin `name` in `language` into `dir` (which must not
/// exist); returns the files written, relative to `dir`.
pub fn create(name: &str, language: Language, dir: &Path) -> Result<Vec<PathBuf>, NewError> {
    check_name(name)?;
    if dir.exists() {
        return Err(NewError::Exists(dir.to_path_buf()));
    }
    let mut written = Vec::new();
    for (relative, content) in templates::files(name, language) {
        let path = dir.join(&relative);
        let write = |cause| NewError::Write {
            path: path.clone(),
            cause,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write)?;
        }
        std::fs::write(&path, content).map_err(write)?;
        written.push(PathBuf::from(relative));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_labels_that_start_with_a_letter() {
        for good in ["a", "config-check", "x2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "a".repeat(MAX_NAME + 1);
        for bad in [
            "",
            "2fast",
            "Upper",
            "trailing-",
            "dots.in",
            "under_score",
            &long,
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_project_is_written_whole_and_never_over_an_existing_directory() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("keys");
        let files = create("keys", Language::Python, &dir).expect("created");
        for expected in [
            "Makefile",
            "app.py",
            "testdata/expected.yaml",
            "wit/controller.wit",
        ] {
            assert!(files.contains(&PathBuf::from(expected)), "{expected}");
            assert!(dir.join(expected).is_file(), "{expected}");
        }
        let readme = std::fs::read_to_string(dir.join("README.md")).expect("readme");
        assert!(readme.contains("keys.example.com/enabled"), "{readme}");
        let again = create("keys", Language::Python, &dir).expect_err("exists");
        assert!(matches!(again, NewError::Exists(_)), "{again}");
    }
}
