//! The plugin table as `wasm-controller-manager plugins` prints it: one line per
//! file, columns a person scans, the reason last and whole.

use super::PluginStatus;

/// The header and one line per row.
pub fn render(rows: &[PluginStatus]) -> String {
    let mut out = line(&[
        "FILE", "STATE", "PLUGIN", "VERSION", "CONTRACT", "HASH", "LOADED", "GRANTED", "HOLDER",
        "REASON",
    ]);
    for row in rows {
        let hash = row.hash.as_deref().map(|h| &h[..h.len().min(12)]);
        // The contract's version (`wcm:controller@0.3.0` is `0.3.0`).
        let contract = (row.contract.as_deref()).map(|c| c.rsplit('@').next().unwrap_or(c));
        out.push_str(&line(&[
            &row.file,
            row.state.name(),
            row.plugin.as_deref().unwrap_or("-"),
            row.version.as_deref().unwrap_or("-"),
            contract.unwrap_or("-"),
            hash.unwrap_or("-"),
            row.loaded_at.as_deref().unwrap_or("-"),
            &granted(row),
            &holder(row),
            &reason(row),
        ]));
    }
    out
}

/// One line, each column but the last padded to its width.
fn line(cells: &[&str; 10]) -> String {
    const WIDTHS: [usize; 9] = [28, 13, 24, 12, 9, 14, 21, 8, 20];
    let mut text = String::new();
    for (cell, width) in cells.iter().zip(WIDTHS) {
        text.push_str(&format!("{cell:<width$} "));
    }
    text.push_str(cells[9]);
    text.trim_end().to_string() + "\n"
}

/// Granted rules out of those declared; `shared` when plugins share the host's
/// identity.
fn granted(row: &PluginStatus) -> String {
    match &row.rights {
        Some(r) => format!("{}/{}", r.granted, r.declared),
        None if row.plugin.is_some() => "shared".to_string(),
        None => "-".to_string(),
    }
}

/// The replica holding the plugin's Lease and its hand-overs (`replica-b/3`), `none`
/// while no replica does; `-` without a Lease per plugin.
fn holder(row: &PluginStatus) -> String {
    match &row.lease {
        Some(lease) if lease.holder.is_empty() => format!("none/{}", lease.transitions),
        Some(lease) => format!("{}/{}", lease.holder, lease.transitions),
        None => "-".to_string(),
    }
}

/// Why the row is as it is: its reason, a name it registers under that is not its
/// own, the rules not granted.
fn reason(row: &PluginStatus) -> String {
    let mut parts = Vec::new();
    if let Some(claimed) = &row.registered_as {
        parts.push(format!("registers as {claimed}; runs as its file's name"));
    }
    parts.extend(row.reason.clone().filter(|r| !r.is_empty()));
    if let Some(rights) = row.rights.as_ref().filter(|r| !r.denied.is_empty()) {
        parts.push(format!("not granted: {}", rights.denied.join("; ")));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Rights, State};

    fn row(file: &str, contract: &str) -> PluginStatus {
        PluginStatus {
            file: file.into(),
            state: State::Running,
            plugin: Some(file.trim_end_matches(".wasm").into()),
            registered_as: None,
            version: Some("0.1.0".into()),
            hash: Some("74a8ce553c12ffffffff".into()),
            loaded_at: Some("2026-12-05T10:00:00Z".into()),
            reason: None,
            limits: None,
            contract: Some(contract.into()),
            rights: None,
            lease: None,
        }
    }

    #[test]
    fn each_row_names_its_contract_and_its_reasons_last() {
        let old = row("old.wasm", "wcm:controller@0.2.0");
        let mut denied = row("new.wasm", "wcm:controller@0.3.0");
        denied.state = State::Forbidden;
        denied.registered_as = Some("other".into());
        denied.rights = Some(Rights {
            user: "u".into(),
            declared: 6,
            granted: 4,
            denied: vec!["list secrets".into(), "watch secrets".into()],
        });
        denied.lease = Some(crate::status::LeaseHolder {
            holder: "replica-b".into(),
            transitions: 3,
        });
        let text = render(&[old, denied]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("FILE") && lines[0].contains(" CONTRACT "));
        let contract = lines[0].find("CONTRACT").expect("column");
        assert_eq!(&lines[1][contract..contract + 5], "0.2.0", "{text}");
        assert_eq!(&lines[2][contract..contract + 5], "0.3.0", "{text}");
        let holder = lines[0].find("HOLDER").expect("column");
        assert!(
            lines[1][holder..].starts_with('-'),
            "no Lease per plugin: {text}"
        );
        assert!(
            lines[2].ends_with(
                "4/6      replica-b/3          registers as other; runs as its file's name; \
                 not granted: list secrets; watch secrets"
            ),
            "{text}"
        );
    }
}
