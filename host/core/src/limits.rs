//! The per-plugin limits a plugin can run into and the reasons a reused instance is
//! retired: the host's words for what held a plugin back, below the budgets that
//! enforce them, the runtime that retires instances and the metrics that count both
//! (each is a label value: `limit="api_rate"`, `reason="memory"`).

/// Declares an enum of label values (lower-case on the wire, as the variants are
/// named) and its `ALL`, from one list: what an unloaded plugin's series are dropped by
/// cannot miss a value a series was made with.
macro_rules! label_values {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$variant_meta:meta])* $variant:ident,)+
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelValue)]
        #[allow(non_camel_case_types)] // label values are lower-case on the wire
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every value, for removing a plugin's series.
            pub const ALL: &[$name] = &[$($name::$variant),+];
        }
    };
}

pub(crate) use label_values;

label_values! {
    /// A per-plugin limit that refused, dropped, cut, delayed or stopped something.
    pub enum Limit {
        /// A request waited for the plugin's API rate (`--plugin-api-qps`).
        api_rate,
        /// A `get` or `list` answer was larger than `--max-result-mib`.
        result_size,
        /// An Event was dropped by the per-object spam filter.
        events,
        /// A log line was dropped over the plugin's log rate.
        log_rate,
        /// A log line was cut at its maximum size.
        log_size,
        /// An instance hit its memory limit.
        memory,
        /// A call ran past its deadline.
        timeout,
        /// A call hit the bound on host handles or guest tables.
        handles,
        /// A metric update would have made one series more than the plugin's bound.
        metric_series,
    }
}

label_values! {
    /// Why a reused plugin instance was retired (`--plugin-override NAME:reuse-instance-calls=N`).
    pub enum Recycle {
        /// It served its number of reconciles.
        calls,
        /// Its linear memory grew past the bound since its first reconcile.
        memory,
        /// A call trapped, timed out or hit a limit: its state is unknown.
        failure,
        /// A new version of the plugin replaced the one it runs.
        upgrade,
    }
}
