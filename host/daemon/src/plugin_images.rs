//! `wasm-controller-manager gather-plugins`: the plugins of several plugin images
//! gathered into the host's plugins directory by the host's own image.
//!
//! A plugin image is its author's: its init container runs the author's entrypoint,
//! which may write anything into the volume it is given. So each image gets a volume
//! of its own, and this step — run from the host's image, which the operator trusts —
//! copies their plugin files into the directory the host watches. No image can then
//! write, replace or remove another image's plugins; a file name two images both ship
//! (a plugin's identity is its file's name) is refused, naming both, and nothing is
//! installed, so the operator sees the conflict at rollout instead of a plugin quietly
//! running as another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wcm_core::plugin::file::{PLUGIN_SUFFIX, SizeLimit};
use wcm_core::runtime::settings::plugin_of;

/// Largest file gathered (a plugin; settings are smaller still).
const MAX_FILE_BYTES: u64 = 512 << 20;

/// Why the plugins could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// Two images ship a file of one name.
    #[error("{name} is in two plugin images ({} and {}); each plugin file must come from one image, so none was installed", .first.display(), .second.display())]
    Conflict {
        /// The file's name.
        name: String,
        /// The first image's directory.
        first: PathBuf,
        /// The second's.
        second: PathBuf,
    },
    /// A directory cannot be read, or a file copied.
    #[error("{}: {source}", .path.display())]
    Io {
        /// What could not be read or written.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not one to install (not a regular file, too large).
    #[error(transparent)]
    File(#[from] wcm_core::plugin::file::PluginFileError),
}

/// One file gathered: where it came from and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gathered {
    /// Its name in the plugins directory.
    pub name: String,
    /// The image directory it came from.
    pub from: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Copies every plugin file (`*.wasm`) and settings file of `sources` into `to`, each
/// written under a hidden name and renamed into place (the host ignores hidden files,
/// so it never sees half a file). Refuses, before copying anything, a name found in
/// two sources.
pub fn gather(sources: &[PathBuf], to: &Path) -> Result<Vec<Gathered>, GatherError> {
    let mut found: BTreeMap<String, PathBuf> = BTreeMap::new();
    for source in sources {
        for name in installable(source)? {
            if let Some(first) = found.get(&name) {
                let (first, second) = (first.clone(), source.clone());
                return Err(GatherError::Conflict {
                    name,
                    first,
                    second,
                });
            }
            found.insert(name, source.clone());
        }
    }
    let mut gathered = Vec::new();
    for (name, from) in found {
        let limit = SizeLimit {
            max: MAX_FILE_BYTES,
            hint: "",
        };
        let file = wcm_core::plugin::file::open(&from.join(&name), limit)?;
        let bytes = install(to, &name, file, MAX_FILE_BYTES)?;
        gathered.push(Gathered { name, from, bytes });
    }
    Ok(gathered)
}

/// The plugin and settings files of `dir`, by name: not hidden.
fn installable(dir: &Path) -> Result<Vec<String>, GatherError> {
    let io = |source| GatherError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry
            .map_err(io)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        let path = dir.join(&name);
        let plugin = name.ends_with(PLUGIN_SUFFIX) || plugin_of(&path).is_some();
        if plugin && !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Copies `from` (at most `max` bytes) to `dir/name` through a hidden temporary file,
/// synced, renamed; returns its size. Streamed: a plugin of hundreds of MiB costs the
/// copy's buffer, not its size.
fn install(dir: &Path, name: &str, from: std::fs::File, max: u64) -> Result<u64, GatherError> {
    let target = dir.join(name);
    let io = |source| GatherError::Io {
        path: target.clone(),
        source,
    };
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .tempfile_in(dir)
        .map_err(io)?;
    let bytes = std::io::copy(&mut std::io::Read::take(from, max), &mut temp).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    let temp = temp.into_temp_path();
    std::fs::set_permissions(&temp, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .map_err(io)?;
    temp.persist(&target).map_err(|e| io(e.error))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).expect("write");
        }
        dir
    }

    #[test]
    fn the_plugins_of_every_image_are_gathered_and_nothing_else() {
        let a = image(&[
            ("pod-counter.wasm", b"a"),
            ("pod-counter.settings.yaml", b"x: 1"),
            ("README", b"no"),
        ]);
        let b = image(&[("phase-labeller.wasm", b"bb"), (".hidden.wasm", b"no")]);
        let to = tempfile::tempdir().expect("tempdir");
        let sources = [a.path().to_path_buf(), b.path().to_path_buf()];
        let gathered = gather(&sources, to.path()).expect("gathered");
        let names: Vec<&str> = gathered.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "phase-labeller.wasm",
                "pod-counter.settings.yaml",
                "pod-counter.wasm"
            ]
        );
        assert_eq!(
            std::fs::read(to.path().join("phase-labeller.wasm")).expect("read"),
            b"bb"
        );
        let left: Vec<String> = (std::fs::read_dir(to.path()).expect("list"))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    #[test]
    fn one_image_cannot_replace_anothers_plugin() {
        let real = image(&[("pod-counter.wasm", b"real")]);
        let impostor = image(&[("pod-counter.wasm", b"evil"), ("other.wasm", b"o")]);
        let to = tempfile::tempdir().expect("tempdir");
        let sources = [real.path().to_path_buf(), impostor.path().to_path_buf()];
        let e = gather(&sources, to.path())
            .expect_err("conflict")
            .to_string();
        assert!(
            e.contains("pod-counter.wasm is in two plugin images"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_dir(to.path()).expect("list").count(),
            0,
            "nothing installed"
        );
    }

    #[test]
    fn a_link_in_an_image_is_not_followed_out_of_it() {
        let outside = image(&[("secret", b"token")]);
        let a = image(&[]);
        std::os::unix::fs::symlink(outside.path().join("secret"), a.path().join("x.wasm"))
            .expect("link");
        let to = tempfile::tempdir().expect("tempdir");
        let e = gather(&[a.path().to_path_buf()], to.path()).expect_err("outside");
        assert!(e.to_string().contains("outside its directory"), "{e}");
    }
}
