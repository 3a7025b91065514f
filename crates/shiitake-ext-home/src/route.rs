//! Addresses: a bare path and `computer://home/<path>` are on Home; `computer://<name>/<path>`
//! is on another captured attachment. Pure text rules, tested without a disk.

use crate::contract::{HOME_ALIAS, SCHEME};

/// Which attachment an address names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// Home.
    Home,
    /// The attachment with this name.
    Named(&'a str),
}

/// Why an address names no attachment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// `computer://` without a name before the next `/`.
    #[error("`{0}` names no Computer: write computer://<name>/<path>")]
    MissingName(String),
}

/// Splits `address` into its target and the path on that target. The path after
/// `computer://<name>` (without its leading `/`) may be empty: the target's root.
pub fn route(address: &str) -> Result<(Target<'_>, &str), RouteError> {
    let Some(rest) = address.strip_prefix(SCHEME) else {
        return Ok((Target::Home, address));
    };
    let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
    if name.is_empty() {
        return Err(RouteError::MissingName(address.to_owned()));
    }
    let target = if name == HOME_ALIAS {
        Target::Home
    } else {
        Target::Named(name)
    };
    Ok((target, path))
}

/// The path a directory tool uses: the target's root (`.`) when the address gave none.
pub fn or_root(path: &str) -> &str {
    if path.is_empty() { "." } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn addresses_route_to_home_or_a_named_computer() {
        let cases = [
            ("src/lib.rs", Target::Home, "src/lib.rs"),
            ("computer://home/src/lib.rs", Target::Home, "src/lib.rs"),
            ("computer://home", Target::Home, ""),
            ("computer://home/", Target::Home, ""),
            (
                "computer://build-box/a/b",
                Target::Named("build-box"),
                "a/b",
            ),
            ("computer://notes", Target::Named("notes"), ""),
            ("computer://notes//x", Target::Named("notes"), "/x"),
            ("/abs/path", Target::Home, "/abs/path"),
            ("computer:/home/x", Target::Home, "computer:/home/x"),
        ];
        for (address, target, path) in cases {
            assert_eq!(route(address), Ok((target, path)), "{address}");
        }
        assert!(route("computer://").is_err());
        assert!(route("computer:///etc/passwd").is_err());
        assert_eq!(or_root(""), ".");
        assert_eq!(or_root("a"), "a");
    }

    proptest! {
        /// Any address without the scheme is a Home path, unchanged.
        #[test]
        fn bare_paths_are_home_paths(path in "[^c].{0,60}") {
            prop_assert_eq!(route(&path), Ok((Target::Home, path.as_str())));
        }

        /// `computer://<name>/<path>` always gives back the name and path it was built from.
        #[test]
        fn computer_addresses_round_trip(name in "[A-Za-z0-9._-]{1,64}", path in ".{0,60}") {
            let address = format!("{SCHEME}{name}/{path}");
            let expected = if name == HOME_ALIAS { Target::Home } else { Target::Named(&name) };
            prop_assert_eq!(route(&address), Ok((expected, path.as_str())));
        }
    }
}
