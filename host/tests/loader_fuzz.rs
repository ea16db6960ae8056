//! The loader meets arbitrary bytes: random files, real plugins with bytes flipped,
//! cut or spliced, and valid components around random core modules from wasm-smith.
//! Whatever it is fed, it answers with a named error (or a loaded plugin whose
//! `register` ends in one), never a panic. No cluster is needed.

use crate::support;

use std::sync::{Arc, OnceLock};

use arbitrary::Unstructured;
use proptest::prelude::*;
use wcm_core::config::Limits;
use wcm_core::runtime::artifacts::content_hash;
use wcm_core::runtime::{PluginFile, Runtime};

fn runtime() -> &'static Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let limits = Limits {
            pooling: false,
            ..Limits::default()
        };
        Arc::new(Runtime::new(limits, None).expect("runtime"))
    })
}

fn tokio() -> &'static tokio::runtime::Runtime {
    static TOKIO: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    TOKIO.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio")
    })
}

/// Loads `bytes` and registers what loads; returns the error text, if any. A panic
/// anywhere fails the property.
fn load(bytes: Vec<u8>) -> Option<String> {
    tokio().block_on(async {
        let file = PluginFile {
            hash: content_hash(&bytes),
            bytes,
            read: Default::default(),
        };
        match runtime().prepare(file).await {
            Err(e) => Some(e.to_string()),
            Ok(loaded) => loaded
                .code
                .register("fuzzed.wasm")
                .await
                .err()
                .map(|e| e.to_string()),
        }
    })
}

/// The smallest real plugin, built by `make plugins`.
fn real_plugin() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/test-plugins/hostile-registration.wasm"
        );
        std::fs::read(path).expect("run `make plugins` first")
    })
}

/// A component holding `module` (a core module) and nothing else.
fn component_around(module: &[u8]) -> Vec<u8> {
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::RawSection {
        id: wasm_encoder::ComponentSectionId::CoreModule as u8,
        data: module,
    });
    component.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[support::test]
    fn random_bytes_get_a_named_error(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let error = load(bytes).expect("random bytes never load");
        prop_assert!(!error.is_empty());
    }

    #[support::test]
    fn random_bytes_after_a_component_header_get_a_named_error(
        body in proptest::collection::vec(any::<u8>(), 0..4096)
    ) {
        let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
        bytes.extend(body);
        let error = load(bytes).expect("a header and noise never load");
        prop_assert!(!error.is_empty());
    }

    #[support::test]
    fn a_real_plugin_with_bytes_flipped_cut_or_spliced_never_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        splice in any::<bool>(),
    ) {
        let mut bytes = real_plugin().to_vec();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value | 1;
        }
        if splice {
            let at = cut.index(bytes.len());
            let tail = bytes[at..].to_vec();
            bytes.extend_from_slice(&tail);
        } else {
            bytes.truncate(cut.index(bytes.len()).max(8));
        }
        if let Some(error) = load(bytes) {
            prop_assert!(!error.is_empty());
        }
    }

    #[support::test]
    fn components_around_random_modules_are_refused_by_name(
        seed in proptest::collection::vec(any::<u8>(), 64..2048)
    ) {
        let mut u = Unstructured::new(&seed);
        let Ok(module) = wasm_smith::Module::new(wasm_smith::Config::default(), &mut u) else {
            return Ok(());
        };
        let error = load(component_around(&module.to_bytes())).expect("no reconciler export");
        prop_assert!(
            error.contains("does not export") || error.contains("invalid component")
                || error.contains("cannot be linked"),
            "{}", error
        );
    }
}
