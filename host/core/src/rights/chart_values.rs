//! Writes plugins' rights as values of the Helm chart (`charts/wasm-controller-manager`):
//! the same [`Document`] `render` writes for `kubectl`, as data — each plugin's
//! ServiceAccount and every role set with its rules — so the chart's template only
//! wraps each in its object and the rights are decided in one place. What
//! `wasm-controller-manager rbac --output chart-values` prints; the chart refuses
//! values written for another namespace than the release's.

use std::fmt::Write;

use super::render::{Document, RoleSet, rule};

/// `document` as a values file: `rbac.namespace`, `rbac.serviceAccount`,
/// `rbac.serviceAccountPrefix`, `rbac.plugins` and `rbac.roles`.
pub fn chart_values(document: &Document) -> String {
    let names: Vec<&str> = document.plugins.iter().map(|p| p.plugin.as_str()).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Values of the chart charts/wasm-controller-manager: the RBAC of the host and of\n\
         # the plugins {}, written by `wasm-controller-manager rbac --output\n\
         # chart-values` from their registrations. Each plugin acts as its own\n\
         # ServiceAccount (the host impersonates it); review the rules as any RBAC, then\n\
         #   helm upgrade --install wcm charts/wasm-controller-manager -n {} -f THIS_FILE",
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        },
        document.namespace
    );
    let _ = write!(
        out,
        "rbac:\n  namespace: {}\n  serviceAccount: {}\n  serviceAccountPrefix: {}\n",
        document.namespace, document.host, document.account_prefix
    );
    out.push_str(if document.plugins.is_empty() {
        "  plugins: []\n"
    } else {
        "  plugins:\n"
    });
    for part in &document.plugins {
        let _ = write!(
            out,
            "    # plugin {} {}\n    - plugin: {}\n      serviceAccount: {}\n",
            part.plugin, part.version, part.plugin, part.account
        );
        for guessed in &part.guessed {
            let _ = writeln!(
                out,
                "      # ({guessed} is not a built-in kind: its plural and namespaced scope \
                 are assumed)"
            );
        }
    }
    out.push_str("  roles:\n");
    let sets = document.host_roles.iter();
    for set in sets.chain(document.plugins.iter().flat_map(|p| &p.roles)) {
        role_set(&mut out, set);
    }
    out
}

fn role_set(out: &mut String, set: &RoleSet) {
    let _ = write!(out, "    # {}\n    - name: {}\n", set.what, set.name);
    if let Some(namespace) = &set.namespace {
        let _ = writeln!(out, "      namespace: {namespace}");
    }
    if let Some(plugin) = &set.plugin {
        let _ = writeln!(out, "      plugin: {plugin}");
    }
    let _ = write!(out, "      subject: {}\n      rules:\n", set.subject);
    for (target, verbs) in &set.rules {
        out.push_str(&rule(target, verbs, "        "));
    }
}
