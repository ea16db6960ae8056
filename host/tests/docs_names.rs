//! Every flag, metric and chart value the docs name exists, so a runbook never sends an
//! operator after a flag that was renamed or a metric that never was: the flags named
//! in inline code (`--flag`, or a `wasm-controller-manager ...` command) against every
//! subcommand's `--help` and the scripts' flags; the metrics (`wcm_...`, and the
//! client-go and controller-runtime names the host exports) against the names the
//! host's source registers; the chart values (`rbac.roles`, `prometheusRule.runbookBaseURL`)
//! against `values.yaml`.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::support::docs::repo;

/// Flags docs name that belong to other programs (kubectl, helm, cosign, cargo, the
/// control plane's components), in spans that do not say whose.
const OTHERS: [&str; 31] = [
    "--unsafe-no-fsync",
    "--controllers",
    "--authorization-mode",
    "--use-service-account-credentials",
    "--force-conflicts",
    "--take-ownership",
    "--include-crds",
    "--kube-version",
    "--wait",
    "--namespace",
    "--create-namespace",
    "--set",
    "--values",
    "--reuse-values",
    "--reset-then-reuse-values",
    "--timeout",
    "--for",
    "--field-selector",
    "--grace-period",
    "--from-literal",
    "--docker-server",
    "--docker-username",
    "--docker-password",
    "--type",
    "--tlog-upload",
    "--key",
    "--locked",
    "--release",
    "--target",
    "--validate",
    "--dry-run",
];

/// Metric name prefixes of the host's own series and of those it exports under
/// client-go's and controller-runtime's names.
const METRIC_PREFIXES: [&str; 6] = [
    "wcm_",
    "controller_runtime_",
    "workqueue_",
    "rest_client_",
    "leader_election_",
    "process_",
];

/// The docs a user reads.
fn documents() -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for doc in ["README.md", "charts/wasm-controller-manager/README.md"] {
        found.push((doc.to_string(), std::fs::read_to_string(repo(doc))?));
    }
    for entry in std::fs::read_dir(repo("docs"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = format!(
                "docs/{}",
                path.file_name().context("name")?.to_string_lossy()
            );
            found.push((name, std::fs::read_to_string(&path)?));
        }
    }
    Ok(found)
}

/// The inline code spans of `text` outside fenced blocks (a span may run over a line
/// break), each with the paragraph it stands in.
fn spans_in_context(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut fenced = false;
    let mut paragraph = String::new();
    let flush = |paragraph: &mut String, found: &mut Vec<(String, String)>| {
        let parts: Vec<&str> = paragraph.split('`').collect();
        for span in parts.iter().skip(1).step_by(2) {
            found.push((span.replace('\n', " "), paragraph.clone()));
        }
        paragraph.clear();
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            flush(&mut paragraph, &mut found);
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut paragraph, &mut found);
        } else {
            paragraph.push_str(line);
            paragraph.push('\n');
        }
    }
    flush(&mut paragraph, &mut found);
    found
}

/// The inline code spans of `text` outside fenced blocks.
fn spans(text: &str) -> Vec<String> {
    spans_in_context(text)
        .into_iter()
        .map(|(span, _)| span)
        .collect()
}

/// The flags a span names as the host's: a span that is a flag, or a command of the host.
fn host_flags(span: &str) -> Vec<String> {
    let words: Vec<&str> = span.split_whitespace().collect();
    let command = words
        .first()
        .is_some_and(|w| *w == "wasm-controller-manager");
    let flag_span = words.first().is_some_and(|w| w.starts_with("--"));
    if !command && !flag_span {
        return Vec::new();
    }
    let words = if command { &words[..] } else { &words[..1] };
    (words.iter())
        .flat_map(|w| w.split('/'))
        .filter(|w| w.starts_with("--") && w[2..].starts_with(|c: char| c.is_ascii_lowercase()))
        .map(|w| {
            let name = w.split(['=', ',', ')', ';', '.', ':']).next().unwrap_or(w);
            name.trim_end_matches(['[', ']']).to_string()
        })
        // A flag cut at the end of a line (`--access-review-`) is not read.
        .filter(|f| !f.ends_with('-') && !OTHERS.contains(&f.as_str()))
        .collect()
}

/// Every long flag of every subcommand of the host and of the project's scripts, with
/// the values it takes when it names them (`--leader-elect-mode`: single, per-plugin).
fn flags_of_the_host() -> Result<BTreeMap<String, Vec<String>>> {
    let binary = env!("CARGO_BIN_EXE_wasm-controller-manager");
    let help = |args: &[&str]| -> Result<String> {
        let out = Command::new(binary).args(args).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let top = help(&["-h"])?;
    let commands: Vec<String> = (top.lines())
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let mut flags = BTreeMap::new();
    // The project's scripts take flags of their own (`scripts/deploy.sh --rbac`).
    for script in std::fs::read_dir(repo("scripts"))? {
        let text = std::fs::read_to_string(script?.path()).unwrap_or_default();
        for line in text.lines().map(str::trim) {
            if let Some((flag, _)) = line.split_once(')')
                && flag.starts_with("--")
                && !flag.contains(' ')
            {
                flags.insert(flag.to_string(), Vec::new());
            }
        }
    }
    let helps = commands
        .iter()
        .map(|c| help(&[c, "-h"]).unwrap_or_default());
    for text in std::iter::once(top).chain(helps) {
        read_help(&text, &mut flags);
    }
    Ok(flags)
}

/// The flags of one `-h` text, and the values each takes (`[possible values: a, b]`,
/// said on the flag's line or the next).
fn read_help(text: &str, flags: &mut BTreeMap<String, Vec<String>>) {
    let mut last = None;
    for line in text.lines() {
        let words = line.split(|c: char| c.is_whitespace() || c == ',');
        for word in words.filter(|w| w.starts_with("--") && w.len() > 2) {
            let name = word
                .split(['=', '<', '['])
                .next()
                .unwrap_or(word)
                .to_string();
            flags.entry(name.clone()).or_default();
            last = Some(name);
        }
        if let (Some(flag), Some((_, values))) = (&last, line.split_once("[possible values: ")) {
            let values = values.split(']').next().unwrap_or_default();
            let values = values.split(", ").map(str::to_string).collect();
            flags.insert(flag.clone(), values);
        }
    }
}

#[support::test(offline)]
fn every_flag_the_docs_name_is_one_of_the_hosts() -> Result<()> {
    let flags = flags_of_the_host()?;
    let mut missing = Vec::new();
    for (doc, text) in documents()? {
        for span in spans(&text) {
            for flag in host_flags(&span) {
                let value = (span.split_once(&format!("{flag}=")))
                    .and_then(|(_, rest)| rest.split([' ', ')', ',', '`']).next());
                match flags.get(&flag) {
                    None => missing.push(format!("{doc}: {flag} (in `{span}`)")),
                    Some(values) if !values.is_empty() => {
                        if let Some(value) = value.filter(|v| !values.iter().any(|k| k == v)) {
                            missing.push(format!("{doc}: {flag}={value} (takes {values:?})"));
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "flags the docs name that the host does not have:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// The metric a span names, if it names one of the host's.
fn metric_of(span: &str) -> Option<String> {
    let name = span.split(['{', ' ', '[', '(']).next()?;
    let known = METRIC_PREFIXES.iter().any(|p| name.starts_with(p));
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    (known && plain && !name.ends_with('_')).then(|| name.to_string())
}

/// The string literals of the host's crates (`host/src`, `host/core/src`,
/// `host/daemon/src`, `host/tooling/src`), each with its white space folded (a literal
/// continued with `\` at a line's end read as one).
fn literals_of_the_source() -> Result<Vec<String>> {
    let mut literals = Vec::new();
    let crates = [
        "host/src",
        "host/core/src",
        "host/daemon/src",
        "host/tooling/src",
    ];
    let mut dirs: Vec<_> = crates.into_iter().map(repo).collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let text = text.replace("\\\n", "");
            for literal in text.split('"').skip(1).step_by(2) {
                literals.push(literal.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    Ok(literals)
}

/// Every name the host's source gives a metric: the literals that could be one (a
/// family is registered under such a literal, its prefix and `_total` added by the
/// registry; a collector writes its names whole).
fn metric_names_in_the_source() -> Result<BTreeSet<String>> {
    let plain = |literal: &String| {
        !literal.is_empty()
            && literal
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    Ok(literals_of_the_source()?
        .into_iter()
        .filter(plain)
        .collect())
}

#[support::test(offline)]
fn every_metric_the_docs_name_is_one_the_host_registers() -> Result<()> {
    let names = metric_names_in_the_source()?;
    let registered = |metric: &str| {
        let stem = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| metric.strip_suffix(s))
            .unwrap_or(metric);
        // Registered in a registry of its prefix (`workqueue` + `depth`).
        let bare = (METRIC_PREFIXES.iter())
            .find_map(|p| stem.strip_prefix(p))
            .unwrap_or(stem);
        names.contains(metric) || names.contains(stem) || names.contains(bare)
    };
    let mut missing = Vec::new();
    for (doc, text) in documents()? {
        for span in spans(&text) {
            // A plugin's own metrics (`wcm_plugin_<plugin>__<name>`) are its own.
            if let Some(metric) = metric_of(&span)
                && !metric.contains("__")
                && !registered(&metric)
            {
                missing.push(format!("{doc}: {metric}"));
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "metrics the docs name that the host does not register:\n{}",
        missing.join("\n")
    );
    Ok(())
}

#[support::test(offline)]
fn every_log_line_the_docs_quote_is_one_the_host_writes() -> Result<()> {
    let literals = literals_of_the_source()?.join("\n");
    let mut missing = Vec::new();
    for (doc, text) in documents()? {
        for (span, paragraph) in spans_in_context(&text) {
            // A log line is quoted right after saying so: "its log says `...`".
            let quoted = format!("`{span}`");
            let before = paragraph.split(&quoted).next().unwrap_or_default();
            let before: String = before.chars().rev().take(12).collect::<String>();
            let before: String = before.chars().rev().collect();
            let said = ["says ", "log ", "logs "]
                .iter()
                .any(|m| before.ends_with(m));
            let message = span
                .chars()
                .all(|c| c.is_ascii_lowercase() || " :;,'".contains(c));
            let words = span.split_whitespace().count();
            let field = span.ends_with(": true") || span.ends_with(": false"); // YAML, not a log
            if said && message && !field && words >= 2 && !literals.contains(&span) {
                missing.push(format!("{doc}: `{span}`"));
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "log lines the docs quote that the host never writes:\n{}",
        missing.join("\n")
    );
    Ok(())
}

#[support::test(offline)]
fn every_chart_value_the_docs_name_is_in_values_yaml() -> Result<()> {
    let values: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(repo(
        "charts/wasm-controller-manager/values.yaml",
    ))?)?;
    let top: BTreeSet<String> = values
        .as_object()
        .context("a map")?
        .keys()
        .cloned()
        .collect();
    let mut missing = Vec::new();
    for (doc, text) in documents()? {
        // Spans in paragraphs about the chart: elsewhere `a.b` is a file or an attribute.
        let about_chart = spans_in_context(&text).into_iter();
        let about_chart = about_chart.filter(|(_, p)| p.to_lowercase().contains("chart"));
        for (span, _) in about_chart {
            let path: Vec<&str> = span.split('=').next().unwrap_or("").split('.').collect();
            let file = ["rs", "md", "yaml", "yml", "json", "sh", "txt", "tpl"];
            if path.last().is_some_and(|last| file.contains(last)) {
                continue;
            }
            let plain = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '[' || c == ']')
            };
            let first = path[0].trim_end_matches("[]");
            if path.len() < 2 || !top.contains(first) || !path.iter().all(|p| plain(p)) {
                continue;
            }
            let mut at = &values;
            for part in &path {
                let part = part.trim_end_matches("[]");
                let next = match at {
                    serde_json::Value::Array(items) => items.first().and_then(|i| i.get(part)),
                    _ => at.get(part),
                };
                match next {
                    Some(value) => at = value,
                    None if at.is_null() || at.as_array().is_some_and(Vec::is_empty) => break,
                    None => {
                        missing.push(format!("{doc}: {span}"));
                        break;
                    }
                }
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "chart values the docs name that values.yaml lacks:\n{}",
        missing.join("\n")
    );
    Ok(())
}
