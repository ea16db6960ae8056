//! The files of a new project per language, compiled into the binary from
//! `host/tooling/templates/`, the SDK sources and the contract, with the project's name and
//! the tool versions filled in.

/// A language a project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// Rust with the SDK's `Controller` trait, built for wasm32-wasip2 by cargo.
    Rust,
    /// Go 1.26 with the Go SDK, built for wasip1 and made a component by `componentize`.
    Go,
    /// Python, built by componentize-py.
    Python,
    /// JavaScript, built by componentize-js.
    #[value(alias = "js")]
    Javascript,
}

const CONTRACT: &str = include_str!("../../../../wit/controller.wit");
const WORKSPACE: &str = include_str!("../../../../Cargo.toml");
const TOOLS: &str = include_str!("../../../../scripts/tools.env");

const COMMON: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../templates/common/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/common/gitignore"),
    ),
    (
        "testdata/cluster.yaml",
        include_str!("../../templates/common/cluster.yaml"),
    ),
    (
        "testdata/expected.yaml",
        include_str!("../../templates/common/expected.yaml"),
    ),
];

const RUST: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/rust/Cargo.toml"),
    ),
    ("Makefile", include_str!("../../templates/rust/Makefile")),
    ("src/lib.rs", include_str!("../../templates/rust/lib.rs")),
    (
        "tests/plugin.rs",
        include_str!("../../templates/rust/plugin_test.rs"),
    ),
    (
        "sdk/Cargo.toml",
        include_str!("../../templates/rust/sdk-Cargo.toml"),
    ),
    (
        "sdk/src/lib.rs",
        include_str!("../../../../guest-sdk/src/lib.rs"),
    ),
    (
        "sdk/src/cluster.rs",
        include_str!("../../../../guest-sdk/src/cluster.rs"),
    ),
    (
        "sdk/src/config.rs",
        include_str!("../../../../guest-sdk/src/config.rs"),
    ),
    (
        "sdk/src/error.rs",
        include_str!("../../../../guest-sdk/src/error.rs"),
    ),
    (
        "sdk/src/finalizer.rs",
        include_str!("../../../../guest-sdk/src/finalizer.rs"),
    ),
    (
        "sdk/src/log.rs",
        include_str!("../../../../guest-sdk/src/log.rs"),
    ),
    (
        "sdk/src/metrics.rs",
        include_str!("../../../../guest-sdk/src/metrics.rs"),
    ),
    (
        "sdk/src/owner.rs",
        include_str!("../../../../guest-sdk/src/owner.rs"),
    ),
    (
        "sdk/src/partial.rs",
        include_str!("../../../../guest-sdk/src/partial.rs"),
    ),
    (
        "sdk/src/types.rs",
        include_str!("../../../../guest-sdk/src/types.rs"),
    ),
    (
        "sdk/words/Cargo.toml",
        include_str!("../../templates/rust/words-Cargo.toml"),
    ),
    (
        "sdk/words/src/lib.rs",
        include_str!("../../../../contract-words/src/lib.rs"),
    ),
];

const GO: &[(&str, &str)] = &[
    ("go.mod", include_str!("../../templates/go/go.mod")),
    ("Makefile", include_str!("../../templates/go/Makefile")),
    ("main.go", include_str!("../../templates/go/main.go")),
    (
        "main_test.go",
        include_str!("../../templates/go/main_test.go"),
    ),
    (
        "plugin_test.go",
        include_str!("../../templates/go/plugin_test.go"),
    ),
    (
        "sdk/go.mod",
        include_str!("../../../../guest-sdk-go/go.mod"),
    ),
    (
        "sdk/controller/abi.go",
        include_str!("../../../../guest-sdk-go/controller/abi.go"),
    ),
    (
        "sdk/controller/api.go",
        include_str!("../../../../guest-sdk-go/controller/api.go"),
    ),
    (
        "sdk/controller/cluster.go",
        include_str!("../../../../guest-sdk-go/controller/cluster.go"),
    ),
    (
        "sdk/controller/errors.go",
        include_str!("../../../../guest-sdk-go/controller/errors.go"),
    ),
    (
        "sdk/controller/exports.go",
        include_str!("../../../../guest-sdk-go/controller/exports.go"),
    ),
    (
        "sdk/controller/host.go",
        include_str!("../../../../guest-sdk-go/controller/host.go"),
    ),
    (
        "sdk/controller/log.go",
        include_str!("../../../../guest-sdk-go/controller/log.go"),
    ),
    (
        "sdk/controller/metrics.go",
        include_str!("../../../../guest-sdk-go/controller/metrics.go"),
    ),
    (
        "sdk/controller/native.go",
        include_str!("../../../../guest-sdk-go/controller/native.go"),
    ),
    (
        "sdk/controller/registration.go",
        include_str!("../../../../guest-sdk-go/controller/registration.go"),
    ),
    (
        "sdk/controller/types.go",
        include_str!("../../../../guest-sdk-go/controller/types.go"),
    ),
    (
        "sdk/controller/writes.go",
        include_str!("../../../../guest-sdk-go/controller/writes.go"),
    ),
];

const PYTHON: &[(&str, &str)] = &[
    ("Makefile", include_str!("../../templates/python/Makefile")),
    ("app.py", include_str!("../../templates/python/app.py")),
    ("logic.py", include_str!("../../templates/python/logic.py")),
    (
        "test_logic.py",
        include_str!("../../templates/python/test_logic.py"),
    ),
    (
        "test_plugin.py",
        include_str!("../../templates/python/test_plugin.py"),
    ),
    (
        "wasm_controller.py",
        include_str!("../../../../guest-sdk-python/wasm_controller.py"),
    ),
];

const JAVASCRIPT: &[(&str, &str)] = &[
    (
        "Makefile",
        include_str!("../../templates/javascript/Makefile"),
    ),
    (
        "package.json",
        include_str!("../../templates/javascript/package.json"),
    ),
    (
        "index.js",
        include_str!("../../templates/javascript/index.js"),
    ),
    (
        "logic.js",
        include_str!("../../templates/javascript/logic.js"),
    ),
    (
        "logic.test.js",
        include_str!("../../templates/javascript/logic.test.js"),
    ),
    (
        "plugin.test.js",
        include_str!("../../templates/javascript/plugin.test.js"),
    ),
    (
        "wasm-controller.js",
        include_str!("../../../../guest-sdk-js/wasm-controller.js"),
    ),
];

impl Language {
    fn own_files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Language::Rust => RUST,
            Language::Go => GO,
            Language::Python => PYTHON,
            Language::Javascript => JAVASCRIPT,
        }
    }

    /// What the README says about the language: its name, where the reconcile is,
    /// what builds it, what the unit tests run on.
    fn words(self) -> [(&'static str, &'static str); 4] {
        let (language, source, toolchain, unit) = match self {
            Language::Rust => (
                "Rust",
                "src/lib.rs",
                "Rust with the `wasm32-wasip2` target (`rustup target add wasm32-wasip2`)",
                "`cargo test`",
            ),
            Language::Go => ("Go", "main.go", "Go 1.26 or later", "`go test`"),
            Language::Python => (
                "Python",
                "app.py",
                "Python 3 and componentize-py (`pip install componentize-py`)",
                "`python3 -m unittest`",
            ),
            Language::Javascript => (
                "JavaScript",
                "index.js",
                "Node.js with npm (`make build` runs `npm install` for componentize-js)",
                "`node --test`",
            ),
        };
        [
            ("language", language),
            ("source", source),
            ("toolchain", toolchain),
            ("unit", unit),
        ]
    }
}

/// Every file of a project for plugin `name` in `language`, filled in.
pub fn files(name: &str, language: Language) -> Vec<(String, String)> {
    let crate_name = name.replace('-', "_");
    let mut values = vec![
        ("name", name.to_string()),
        ("crate", crate_name),
        ("host_version", env!("CARGO_PKG_VERSION").to_string()),
        ("wit_bindgen_version", dependency_version("wit-bindgen")),
        (
            "componentize_py_version",
            tool_version("COMPONENTIZE_PY_VERSION"),
        ),
        (
            "componentize_js_version",
            tool_version("COMPONENTIZE_JS_VERSION"),
        ),
    ];
    values.extend(language.words().map(|(k, v)| (k, v.to_string())));
    let fill = |text: &str| {
        (values.iter()).fold(text.to_string(), |t, (k, v)| {
            t.replace(&format!("{{{{{k}}}}}"), v)
        })
    };
    let mut files: Vec<(String, String)> = (COMMON.iter().chain(language.own_files()))
        .map(|(path, text)| (path.to_string(), fill(text)))
        .collect();
    files.push(("wit/controller.wit".into(), CONTRACT.into()));
    files
}

/// The version requirement of a workspace dependency, as this host was built with.
fn dependency_version(crate_name: &str) -> String {
    let prefix = format!("{crate_name} = ");
    let line = WORKSPACE.lines().find(|l| l.starts_with(&prefix));
    let spec = line.map_or("", |l| &l[prefix.len()..]);
    let version = spec.split('"').nth(1).unwrap_or("*");
    version.to_string()
}

/// A pinned tool's version from `scripts/tools.env` (`NAME=1.2.3`).
fn tool_version(variable: &str) -> String {
    let prefix = format!("{variable}=");
    let line = TOOLS.lines().find(|l| l.starts_with(&prefix));
    line.map_or("", |l| &l[prefix.len()..]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The source files of an SDK directory of this repository, relative to it (Go's
    /// own tests stay behind).
    fn sources(dir: &str, extension: &str) -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
        let mut found = Vec::new();
        let mut pending = vec![root.clone()];
        while let Some(at) = pending.pop() {
            for entry in std::fs::read_dir(&at).expect("SDK directory").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == extension)
                    && !path.to_string_lossy().ends_with("_test.go")
                {
                    let relative = path.strip_prefix(&root).expect("below the root");
                    found.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        found
    }

    #[test]
    fn a_new_project_carries_every_source_file_of_its_sdk() {
        let sdks = [
            (RUST, "guest-sdk/src", "rs"),
            (RUST, "contract-words/src", "rs"),
            (GO, "guest-sdk-go", "go"),
        ];
        for (files, dir, extension) in sdks {
            for source in sources(dir, extension) {
                let target = match dir {
                    "guest-sdk/src" => format!("sdk/src/{source}"),
                    "contract-words/src" => format!("sdk/words/src/{source}"),
                    _ => format!("sdk/{source}"),
                };
                let carried = files.iter().any(|(path, _)| *path == target);
                assert!(
                    carried,
                    "{dir}/{source} is not carried into new projects as {target}"
                );
            }
        }
    }

    #[test]
    fn every_placeholder_is_filled_in_every_language() {
        for language in [
            Language::Rust,
            Language::Go,
            Language::Python,
            Language::Javascript,
        ] {
            for (path, text) in files("keys", language) {
                let left = text.split("{{").skip(1).find(|rest| {
                    let key = rest.split("}}").next().unwrap_or_default();
                    !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                });
                assert_eq!(left, None, "{language:?} {path}");
            }
        }
    }

    #[test]
    fn versions_come_from_what_this_host_was_built_with() {
        assert!(dependency_version("wit-bindgen").starts_with("0."));
        assert!(tool_version("COMPONENTIZE_PY_VERSION").starts_with("0."));
    }
}
