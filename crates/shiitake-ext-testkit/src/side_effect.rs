//! A host tool with a side effect, for tests of what decides whether a call runs (a
//! tool gate, an approval): `<module>.<operation>` counts its runs and answers
//! `done`; it is not replay-safe, so a call a restart finds in flight is never run
//! again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};

/// How many times a [`counted`] tool ran.
#[derive(Clone, Debug, Default)]
pub struct Runs(Arc<AtomicUsize>);

impl Runs {
    /// The runs so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A catalog with one tool, `<module>.<operation>` (the model calls
/// `<module>__<operation>`), and the count of its runs.
pub async fn counted(
    module: &str,
    operation: &str,
) -> Result<(Arc<Catalog>, Runs), Box<dyn std::error::Error + Send + Sync>> {
    let runs = Runs::default();
    let counter = runs.0.clone();
    let tool = Operation::from_fn(
        OperationName::new(operation)?,
        "Does something that must happen at most once.",
        move |_input: Value, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(Value::from("done"))
            }
        },
    )
    .with_replay(Replay::Unsafe);
    let module =
        Module::new(ModulePath::new(module)?, "A tool with a side effect.").with_operation(tool)?;
    let catalog = Catalog::new();
    let source = StaticSource::new(SourceId::new("side-effect"), vec![module]);
    catalog.add_source(Arc::new(source)).await?;
    Ok((Arc::new(catalog), runs))
}
