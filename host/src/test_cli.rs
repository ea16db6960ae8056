//! `wasm-controller-manager test`: a plugin run offline on fixtures (and steps), its
//! report printed or compared with the expected one, faults explored, or recorded
//! transcripts replayed; the exit status says whether anything went wrong.

use anyhow::Context;
use wcm_core::config::{Limits, default_compile_cache};
use wcm_tooling::testkit::{
    Exploration, ExploreOptions, Outcome, Replay, TestOptions, explore, replay, run as run_once,
};

use crate::cli::TestArgs;

/// Runs the plugin as `args` say: prints the report; fails on a difference from the
/// expected one, on a failed reconcile without one, on a fault that ends in another
/// state, or on a replay that differs from its transcript.
pub async fn run(args: TestArgs) -> anyhow::Result<()> {
    let options = options_of(&args);
    if let Some(dir) = &args.replay {
        return replayed(replay(&options, dir).await?, dir);
    }
    let (outcome, exploration) = match args.faults.clone() {
        None => (run_once(&options).await?, None),
        Some(kinds) => {
            let asked = ExploreOptions {
                kinds,
                ignore: args.ignore.clone(),
                max_runs: args.max_fault_runs,
            };
            let (outcome, found) = explore(&options, &asked).await?;
            (outcome, Some(found))
        }
    };
    let plugin = outcome.report.plugin.clone();
    compare(&args, &outcome)?;
    let failed = problems(&args, &outcome);
    let differing = exploration.as_ref().map_or(0, |e| e.differences.len());
    if let Some(exploration) = &exploration {
        eprint!("{}", explored(&plugin, exploration));
    }
    anyhow::ensure!(
        failed == 0 && differing == 0,
        "plugin {plugin}: {failed} problem(s), {differing} fault(s) ending in another state"
    );
    Ok(())
}

/// The test kit's options for `args`.
fn options_of(args: &TestArgs) -> TestOptions {
    let own_files = args.expect.iter().chain(&args.settings).chain(&args.steps);
    TestOptions {
        plugin: args.plugin.clone(),
        fixtures: args.fixtures.clone(),
        max_reconciles: args.max_reconciles,
        limits: Limits {
            reconcile_timeout: args.reconcile_timeout,
            max_memory_bytes: args.max_memory_mib << 20,
            ..Limits::default()
        },
        compile_cache: Some(default_compile_cache()),
        not_fixtures: own_files.cloned().collect(),
        settings: args.settings.clone(),
        run_for: args.run_for,
        steps: args.steps.clone(),
    }
}

/// Prints the report, writes it into the `--expect` file (`--update`), or compares
/// it with that file, failing on a difference.
fn compare(args: &TestArgs, outcome: &Outcome) -> anyhow::Result<()> {
    let yaml = outcome.report.to_yaml()?;
    let plugin = &outcome.report.plugin;
    match (&args.expect, args.update) {
        (Some(file), true) => std::fs::write(file, &yaml)
            .with_context(|| format!("cannot write {}", file.display()))?,
        (Some(file), false) => {
            print!("{yaml}");
            let expected = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            if let Some(diff) = outcome.report.differences(&expected)? {
                eprintln!("{diff}");
                anyhow::bail!(
                    "plugin {plugin}: the report differs from {}",
                    file.display()
                );
            }
        }
        (None, _) => print!("{yaml}"),
    }
    Ok(())
}

/// Names the keys still scheduled and the problems that fail the run (every failed
/// reconcile without `--expect`; with it, only a run stopped at the bound), on
/// standard error; how many problems fail it.
fn problems(args: &TestArgs, outcome: &Outcome) -> usize {
    let plugin = &outcome.report.plugin;
    for pending in &outcome.report.pending {
        eprintln!(
            "plugin {plugin}: {} still scheduled when the time was up (next at {}): \
             a periodic check, or a key that never settles",
            pending.key, pending.at
        );
    }
    let unsettled = |p: &&String| p.contains("--max-reconciles");
    let failed: Vec<&String> = match args.expect {
        Some(_) => outcome.problems.iter().filter(unsettled).collect(),
        None => outcome.problems.iter().collect(),
    };
    for problem in &failed {
        eprintln!("{problem}");
    }
    failed.len()
}

/// Prints each replayed reconcile and whether it went as recorded; fails on any
/// difference (`test --replay`).
fn replayed(replay: Replay, dir: &std::path::Path) -> anyhow::Result<()> {
    let plugin = &replay.plugin;
    let mut differing = 0;
    for r in &replay.reconciles {
        let file = r
            .file
            .file_name()
            .map(|f| f.to_string_lossy())
            .unwrap_or_default();
        println!(
            "- transcript: {file}\n  key: {:?}\n  recorded: {:?}\n  replayed: {:?}",
            r.key, r.recorded, r.replayed
        );
        if let Some(difference) = &r.difference {
            differing += 1;
            eprintln!(
                "plugin {plugin}, transcript {file} ({}): {difference}",
                r.key
            );
        }
        if r.leftover > 0 {
            eprintln!(
                "plugin {plugin}, transcript {file} ({}): {} recorded call(s) the plugin \
                 did not make",
                r.key, r.leftover
            );
        }
    }
    let count = replay.reconciles.len();
    anyhow::ensure!(
        count > 0,
        "{}: no transcripts (*.yaml) to replay",
        dir.display()
    );
    anyhow::ensure!(
        differing == 0,
        "plugin {plugin}: {differing} of {count} replayed reconcile(s) differ from their transcript"
    );
    eprintln!("plugin {plugin}: {count} reconcile(s) replayed as recorded");
    Ok(())
}

/// The first few of `names`, and how many more there are.
fn shortened(names: &[String]) -> String {
    const SHOWN: usize = 6;
    let shown = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// What a fault exploration found, as `test --faults` prints it.
fn explored(plugin: &str, exploration: &Exploration) -> String {
    use std::fmt::Write;
    let planned: Vec<String> = (exploration.planned.iter())
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    let mut text = format!(
        "plugin {plugin}: {} runs with a fault ({}); {} ended in another state than the run \
         without\n",
        exploration.ran,
        planned.join(", "),
        exploration.differences.len()
    );
    for difference in &exploration.differences {
        let _ = writeln!(
            text,
            "\nplugin {plugin}: with {}, the run ends in another state: {}",
            difference.fault,
            shortened(&difference.objects)
        );
        if !difference.same.is_empty() {
            let same: Vec<String> = difference.same.iter().map(ToString::to_string).collect();
            let _ = writeln!(text, "(so do: {})", same.join("; "));
        }
        let _ = write!(text, "{}", difference.diff);
        let _ = writeln!(text, "the calls on those objects in that run:");
        for line in &difference.calls {
            let _ = writeln!(text, "  {line}");
        }
    }
    text
}
