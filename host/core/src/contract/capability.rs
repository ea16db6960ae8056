//! One descriptor per capability: what a plugin may call on the host, described once —
//! its name (the WIT function, and `wcm_host_calls_total{function}`'s label), the WIT
//! interface and functions it is, the API verb that authorizes it, and whether it
//! writes. The host's strings and matches about a capability derive from here, so a new
//! one is a new variant and its descriptor, and the compiler points at every match
//! that must learn it.

/// What the host knows of a capability.
#[derive(Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Its name: the WIT function (or the interface, for the metrics), and the label
    /// of its series.
    pub name: &'static str,
    /// The WIT interface its functions are in.
    pub interface: &'static str,
    /// Its WIT functions.
    pub functions: &'static [&'static str],
    /// The API verb that authorizes it, if it reaches the API server.
    pub api_verb: Option<&'static str>,
    /// Whether it changes the cluster.
    pub writes: bool,
}

/// The descriptor of a `cluster` function `name`, authorized by `api_verb`.
macro_rules! cluster {
    ($name:literal, $api_verb:literal, writes: $writes:literal) => {
        Descriptor {
            name: $name,
            interface: "cluster",
            functions: &[$name],
            api_verb: Some($api_verb),
            writes: $writes,
        }
    };
}

/// Declares [`Capability`], its `ALL` and its descriptors from one list, so no
/// capability can lack a descriptor or be missing from `ALL`.
macro_rules! capabilities {
    ($($(#[$doc:meta])* $variant:ident => $descriptor:expr,)+) => {
        /// A capability a plugin calls.
        #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Capability {
            $($(#[$doc])* $variant,)+
        }

        impl Capability {
            /// Every capability, for dropping a plugin's series and checking the SDKs.
            pub const ALL: &[Capability] = &[$(Capability::$variant),+];

            /// Its descriptor.
            pub fn descriptor(self) -> &'static Descriptor {
                match self {
                    $(Capability::$variant => {
                        const DESCRIPTOR: Descriptor = $descriptor;
                        &DESCRIPTOR
                    })+
                }
            }
        }
    };
}

capabilities! {
    /// `get`: one object.
    Get => cluster!("get", "get", writes: false),
    /// `list`: the objects of a watched kind.
    List => cluster!("list", "list", writes: false),
    /// `list-first`: the first objects of a watched kind.
    ListFirst => cluster!("list-first", "list", writes: false),
    /// `count`: how many objects of a watched kind.
    Count => cluster!("count", "list", writes: false),
    /// `patch-labels`.
    PatchLabels => cluster!("patch-labels", "patch", writes: true),
    /// `patch-finalizers`.
    PatchFinalizers => cluster!("patch-finalizers", "patch", writes: true),
    /// The plugin's own metrics (`add`, `set`, `observe`).
    Metrics => Descriptor {
        name: "metrics",
        interface: "metrics",
        functions: &["add", "set", "observe"],
        api_verb: None,
        writes: false,
    },
    /// `create`.
    Create => cluster!("create", "create", writes: true),
    /// `patch`.
    Patch => cluster!("patch", "patch", writes: true),
    /// `update`.
    Update => cluster!("update", "update", writes: true),
    /// `record-event`.
    RecordEvent => cluster!("record-event", "create", writes: true),
    /// `apply`.
    Apply => cluster!("apply", "patch", writes: true),
    /// `patch-status`.
    PatchStatus => cluster!("patch-status", "patch", writes: true),
    /// `delete`.
    Delete => cluster!("delete", "delete", writes: true),
}

impl Capability {
    /// Its name (`patch-labels`): the WIT function, the metric label, and what its
    /// errors begin with.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The sources under `dir` (of the repository) whose names end in `extension`.
    fn sources(dir: &str, extension: &str) -> String {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
        let mut text = String::new();
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == extension) {
                text += &std::fs::read_to_string(&path).expect("a source file");
            }
        }
        text
    }

    /// How each SDK calls a WIT function of an interface: the Rust SDK by its generated
    /// binding (`host::patch_labels(`), the Go SDK by its `//go:wasmimport`, the Python
    /// SDK by componentize-py's binding (`_cluster.patch_labels`), the JavaScript SDK
    /// by componentize-js's (`host.patchLabels`, `hostMetrics.add`).
    fn calls(sdk: &str, interface: &str, function: &str) -> Vec<String> {
        let snake = function.replace('-', "_");
        let mut camel = String::new();
        for (i, part) in function.split('-').enumerate() {
            let mut chars = part.chars();
            match (i, chars.next()) {
                (0, Some(c)) => camel.push(c),
                (_, Some(c)) => camel.extend(c.to_uppercase()),
                _ => {}
            }
            camel.extend(chars);
        }
        let js_module = match interface {
            "cluster" => "host".to_string(),
            other => format!("host{}{}", other[..1].to_uppercase(), &other[1..]),
        };
        match sdk {
            "rust" => vec![format!("::{snake}(")],
            "go" => vec![format!("{interface}@"), format!(" {function}\n")],
            "python" => vec![format!("_{interface}.{snake}")],
            _ => vec![format!("{js_module}.{camel}")],
        }
    }

    /// Whether `text` has `name` as a whole name (`host.list`, not `host.listFirst`).
    fn mentions(text: &str, name: &str) -> bool {
        text.match_indices(name).any(|(at, _)| {
            let next = text[at + name.len()..].chars().next();
            !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    }

    /// The WIT declares every function of every capability in its interface, and every
    /// SDK — Rust, Go, Python, JavaScript — calls it, so a capability no SDK exposes
    /// fails here, naming the SDK and the function.
    #[test]
    fn every_capability_is_in_the_contract_and_every_sdk() {
        let wit = sources("wit", "wit");
        let sdks = [
            ("rust", sources("guest-sdk/src", "rs")),
            ("go", sources("guest-sdk-go/controller", "go")),
            ("python", sources("guest-sdk-python", "py")),
            ("javascript", sources("guest-sdk-js", "js")),
        ];
        let mut missing = Vec::new();
        for capability in Capability::ALL {
            let d = capability.descriptor();
            let interface = (wit.split(&format!("interface {} {{", d.interface)).nth(1))
                .and_then(|rest| rest.split("\n}").next())
                .unwrap_or_default();
            for function in d.functions {
                let declared = [
                    format!("\n    {function}: func("),
                    format!("\n    %{function}: func("),
                ];
                if !declared.iter().any(|d| interface.contains(d.as_str())) {
                    missing.push(format!("wit: {}/{function}", d.interface));
                }
                for (sdk, text) in &sdks {
                    let wanted = calls(sdk, d.interface, function);
                    let found = match *sdk {
                        "go" => text.lines().any(|l| {
                            l.starts_with("//go:wasmimport")
                                && l.contains(&wanted[0])
                                && format!("{l}\n").ends_with(&wanted[1])
                        }),
                        "rust" => text.contains(&wanted[0]),
                        _ => mentions(text, &wanted[0]),
                    };
                    if !found {
                        missing.push(format!("{sdk} SDK: {}/{function}", d.interface));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "capabilities not exposed: {missing:?}");
    }

    #[test]
    fn names_are_distinct_and_writes_need_an_api_verb() {
        let names: std::collections::BTreeSet<_> =
            Capability::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Capability::ALL.len());
        for capability in Capability::ALL {
            let d = capability.descriptor();
            assert!(!d.writes || d.api_verb.is_some(), "{capability:?}");
        }
    }
}
