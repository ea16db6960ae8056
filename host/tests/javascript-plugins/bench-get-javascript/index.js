// Benchmark plugin in JavaScript: each reconcile reads the requested ConfigMap from the
// host's cache once, parses it, and returns done -- the work of the Rust `bench-get`,
// so `benches/reconcile.rs` compares languages on the same reconcile.
import {
  CONFIG_MAP, Registration, Watch, cluster, done, exportController,
} from '../../../../guest-sdk-js/wasm-controller.js';

export const reconciler = exportController({
  registration() {
    return new Registration('bench-get-javascript', '0.1.0')
      .watch(Watch.all(CONFIG_MAP).labels('wcm.bench/target'));
  },

  reconcile(request) {
    cluster.get(request.object());
    return done();
  },
});
