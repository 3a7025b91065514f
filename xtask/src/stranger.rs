//! Not built yet.

/// Not built yet.
pub fn run(_args: &[String]) -> Result<(), String> {
    Err("`stranger` is not built yet".to_owned())
}
