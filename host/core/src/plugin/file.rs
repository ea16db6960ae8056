//! A plugin file as the operator placed it. Its identity — the ServiceAccount it acts
//! as, its field manager, its metric label, its budgets — is its name in the plugins
//! directory, never what its code says about itself; and it (or its settings) is read
//! only if it is a regular file inside its directory, within a size bound.
//!
//! Why the file's name: the operator chose it, and a directory cannot hold two files of
//! one name, so two plugins can never share an identity whatever state they are in. A
//! name taken from the plugin's `register` let any file act as another plugin's
//! ServiceAccount while that plugin was not running (`docs/isolation.md`, "Identity").
//!
//! Why the checks on reading: the directory is the operator's, but what is in it may
//! come from elsewhere (a plugin image's init container, a ConfigMap). A FIFO would hang
//! the load, `/dev/zero` has no end, and a symlink out of the directory would hand the
//! plugin any file the host may read (a kubeconfig) as its settings. A ConfigMap
//! volume's `x.wasm -> ..data/x.wasm` resolves inside the directory and is fine.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::logs::shorten;

/// The ending of a plugin file's name.
pub const PLUGIN_SUFFIX: &str = ".wasm";

/// Why a plugin file (or its settings) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PluginFileError {
    /// The file's name does not make a plugin identity.
    #[error(
        "file name {name:?} does not name a plugin: a plugin's identity is its file's name \
         without `.wasm`, and {rule}; rename the file"
    )]
    Identity {
        /// The file's name as found.
        name: String,
        /// The rule it breaks.
        rule: super::name::NameError,
    },
    /// The file cannot be opened or read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device, a directory, a socket).
    #[error("{} is not a regular file ({kind})", .path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// A symlink that leads out of the file's directory.
    #[error(
        "{} leads to {} outside its directory {}; only files inside it are read",
        .path.display(), .target.display(), .dir.display()
    )]
    Outside {
        /// The file as named.
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
        /// The directory it must stay in.
        dir: PathBuf,
    },
    /// Larger than the bound.
    #[error("{} is {bytes} bytes, more than the limit of {max}{hint}", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least).
        bytes: u64,
        /// The bound.
        max: u64,
        /// Which flag sets the bound, if one does.
        hint: &'static str,
    },
}

/// The identity of the plugin in `path` (`/plugins/pod-counter.wasm` → `pod-counter`).
pub fn identity(path: &Path) -> Result<String, PluginFileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(PLUGIN_SUFFIX).unwrap_or_default();
    match super::name::check(stem) {
        Ok(()) => Ok(stem.to_string()),
        Err(rule) => Err(PluginFileError::Identity {
            name: shorten(&name),
            rule,
        }),
    }
}

/// A bound on what is read, and the flag that sets it (empty if none does).
#[derive(Debug, Clone, Copy)]
pub struct SizeLimit {
    /// Largest size read, in bytes.
    pub max: u64,
    /// The flag to name when it is exceeded (`" (--max-plugin-file-mib)"`).
    pub hint: &'static str,
}

/// Reads `path` whole if it is a regular file inside its own directory (after every
/// symlink is followed) of at most `limit.max` bytes. Blocking: call it where
/// blocking is allowed.
pub fn read(path: &Path, limit: SizeLimit) -> Result<Vec<u8>, PluginFileError> {
    let file = open(path, limit)?;
    let too_large = || PluginFileError::TooLarge {
        path: path.to_path_buf(),
        bytes: limit.max + 1,
        max: limit.max,
        hint: limit.hint,
    };
    let read = read_at_most(file, limit.max).map_err(|source| PluginFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read.ok_or_else(too_large)
}

/// Opens `path` for reading if it is a regular file inside its own directory (after
/// every symlink is followed) of at most `limit.max` bytes now. Blocking.
pub fn open(path: &Path, limit: SizeLimit) -> Result<File, PluginFileError> {
    let io = |source| PluginFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let resolved = resolve_inside(path)?;
    // Non-blocking, so a FIFO's open returns at once (it is refused just below), and
    // no symlink: `resolved` has none left, so one swapped in since is refused.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&resolved)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        let kind = kind_of(&meta.file_type());
        return Err(PluginFileError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    if meta.len() > limit.max {
        return Err(PluginFileError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
            max: limit.max,
            hint: limit.hint,
        });
    }
    Ok(file)
}

/// [`read`] on a blocking thread.
pub async fn read_async(path: &Path, limit: SizeLimit) -> Result<Vec<u8>, PluginFileError> {
    let owned = path.to_path_buf();
    match tokio::task::spawn_blocking(move || read(&owned, limit)).await {
        Ok(read) => read,
        Err(e) => Err(PluginFileError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// Whether `path` exists as a directory entry (a dangling symlink counts: reading it
/// then says why it cannot be used).
pub async fn exists(path: &Path) -> bool {
    tokio::fs::symlink_metadata(path).await.is_ok()
}

/// `path` with every symlink followed, if that stays inside `path`'s directory.
fn resolve_inside(path: &Path) -> Result<PathBuf, PluginFileError> {
    let io = |source| PluginFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(parent).map_err(io)?;
    let target = std::fs::canonicalize(path).map_err(io)?;
    if target.parent().is_some_and(|p| p.starts_with(&dir)) {
        return Ok(target);
    }
    Err(PluginFileError::Outside {
        path: path.to_path_buf(),
        target,
        dir,
    })
}

/// Reads `file` to its end, or `None` if it holds more than `max` bytes (it may have
/// grown since its size was read).
fn read_at_most(file: File, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ => "not a file",
    }
}

/// Whether `path` names a plugin: `*.wasm`, not hidden. Editors' and copy tools'
/// temporary files (`.x.wasm.swp`, `x.wasm.tmp`, `x.wasm~`) are not.
pub fn is_plugin_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && name.ends_with(".wasm") && name.len() > ".wasm".len()
}

/// The plugin files of `dir`, sorted.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if is_plugin_file(&path) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const SMALL: SizeLimit = SizeLimit {
        max: 16,
        hint: " (--test)",
    };

    #[test]
    fn the_identity_is_the_file_name_and_must_be_a_dns_label() {
        let ok = identity(Path::new("/plugins/pod-counter.wasm")).expect("valid");
        assert_eq!(ok, "pod-counter");
        for bad in [
            "My_Plugin.wasm",
            ".wasm",
            "-x.wasm",
            "x.wasm.tmp",
            "a.b.wasm",
        ] {
            let e = identity(&Path::new("/plugins").join(bad)).expect_err(bad);
            assert!(e.to_string().contains("rename the file"), "{e}");
        }
        let long = format!("{}.wasm", "a".repeat(64));
        assert!(identity(Path::new(&long)).is_err(), "64 characters");
    }

    #[test]
    fn regular_files_inside_the_directory_are_read_and_others_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let plugin = dir.path().join("p.wasm");
        std::fs::write(&plugin, b"bytes").expect("write");
        assert_eq!(read(&plugin, SMALL).expect("read"), b"bytes");

        // A ConfigMap volume's layout: a link to a file in a hidden subdirectory.
        std::fs::create_dir(dir.path().join("..data")).expect("mkdir");
        std::fs::write(dir.path().join("..data/q.wasm"), b"q").expect("write");
        symlink("..data/q.wasm", dir.path().join("q.wasm")).expect("link");
        assert_eq!(
            read(&dir.path().join("q.wasm"), SMALL).expect("inside"),
            b"q"
        );

        let secret = outside.path().join("kubeconfig");
        std::fs::write(&secret, b"token").expect("write");
        let leak = dir.path().join("leak.settings.yaml");
        symlink(&secret, &leak).expect("link");
        let e = read(&leak, SMALL).expect_err("outside").to_string();
        assert!(e.contains("outside its directory"), "{e}");

        let big = dir.path().join("big.wasm");
        std::fs::write(&big, [0u8; 17]).expect("write");
        let e = read(&big, SMALL).expect_err("large").to_string();
        assert!(
            e.contains("17 bytes, more than the limit of 16 (--test)"),
            "{e}"
        );

        let e = read(dir.path(), SMALL).expect_err("dir").to_string();
        assert!(e.contains("not a regular file (a directory)"), "{e}");
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("f.settings.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.expect("mkfifo runs").success(), "mkfifo");
        let e = read(&fifo, SMALL).expect_err("fifo").to_string();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");

        let zero = dir.path().join("zero.wasm");
        symlink("/dev/zero", &zero).expect("link");
        let e = read(&zero, SMALL).expect_err("device").to_string();
        assert!(e.contains("outside its directory"), "{e}");
    }

    #[test]
    fn only_visible_wasm_files_are_plugins() {
        for name in ["pod-counter.wasm", "a.b.wasm"] {
            assert!(is_plugin_file(Path::new(name)), "{name}");
        }
        for name in [
            ".pod-counter.wasm",
            "x.wasm.tmp",
            "x.wasm~",
            ".wasm",
            "x.wat",
            "dir/",
        ] {
            assert!(!is_plugin_file(Path::new(name)), "{name}");
        }
    }
}
