//! `#[support::test]`: the attribute every test of the host's integration-test binary
//! carries, so none can forget its file's turn on the shared control plane.
//!
//! The tests of one file may run beside each other, those of two files may not (see
//! `host/tests/support/turns.rs`): each test holds its file's turn while it runs. Taking
//! it by hand, first thing in every test, was forgotten; this attribute takes it before
//! the body runs, and a test of the binary refuses any test declared with a bare
//! `#[test]` or `#[tokio::test]`. `#[support::test(offline)]` declares a test that
//! touches no cluster and so needs no turn.

use proc_macro::TokenStream;
use quote::quote;
use syn::{ItemFn, parse_macro_input};

/// Makes `fn` a test (`#[tokio::test]` when it is `async`, else `#[test]`) whose body
/// runs while it holds its file's turn (`crate::support::turns`); with `offline`,
/// without one.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let offline = match args.to_string().as_str() {
        "" => false,
        "offline" => true,
        other => {
            let message = format!("#[support::test] takes nothing or `offline`, not `{other}`");
            return quote!(compile_error!(#message);).into();
        }
    };
    let mut function = parse_macro_input!(item as ItemFn);
    let body = &function.block;
    let turn = (!offline)
        .then(|| quote!(let _turn = crate::support::turns::one_file_at_a_time(module_path!());));
    *function.block = syn::parse_quote!({ #turn #body });
    let harness = match function.sig.asyncness {
        Some(_) => quote!(#[tokio::test]),
        None => quote!(#[test]),
    };
    quote!(#harness #function).into()
}
