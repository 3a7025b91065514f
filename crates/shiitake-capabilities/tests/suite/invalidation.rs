//! Sources change, fail and close; the catalog follows with a diff and never polls.
#![allow(clippy::expect_used)] // fixture helpers outside #[test] functions

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use shiitake_capabilities::{
    CapabilitySource, Catalog, CatalogDiff, CatalogError, CatalogProblem, ExecutionId,
    ForModelKind, Invalidations, Invalidator, InvocationContext, Module, ModulePath, Operation,
    OperationName, OperationPath, SourceError, SourceId, StaticSource, ToolError, handler_fn,
    to_guest_identifier,
};
use tokio_util::sync::CancellationToken;

const WAKE: Duration = Duration::from_secs(2);
const QUIET: Duration = Duration::from_millis(100);

fn module(path: &str, ops: &[&str]) -> Module {
    let mut module = Module::new(
        ModulePath::new(path).expect("path"),
        format!("{path} module"),
    );
    for op in ops {
        let op = Operation::new(
            OperationName::new(*op).expect("name"),
            format!("{op} op"),
            handler_fn(|_, _| async { Ok(json!("ok")) }),
        );
        module.add_operation(op).expect("unique");
    }
    module
}

fn paths(list: &[&str]) -> Vec<ModulePath> {
    list.iter()
        .map(|p| ModulePath::new(*p).expect("path"))
        .collect()
}

/// A Computers-like source: a host-owned list of names, one module per Computer.
struct Computers {
    id: SourceId,
    names: Mutex<Vec<String>>,
    failing: Mutex<Option<String>>,
    invalidator: Invalidator,
    closes: AtomicUsize,
}

impl Computers {
    fn new(names: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            id: SourceId::new("computers"),
            names: Mutex::new(names.iter().map(|n| (*n).to_owned()).collect()),
            failing: Mutex::new(None),
            invalidator: Invalidator::new(),
            closes: AtomicUsize::new(0),
        })
    }

    fn set_names(&self, names: &[&str]) {
        *self.names.lock().expect("lock") = names.iter().map(|n| (*n).to_owned()).collect();
        self.invalidator.invalidate();
    }

    fn set_failing(&self, failure: Option<&str>) {
        *self.failing.lock().expect("lock") = failure.map(str::to_owned);
        self.invalidator.invalidate();
    }
}

#[async_trait]
impl CapabilitySource for Computers {
    fn id(&self) -> &SourceId {
        &self.id
    }

    async fn modules(&self) -> Result<Vec<Module>, SourceError> {
        if let Some(failure) = self.failing.lock().expect("lock").clone() {
            return Err(SourceError::Unavailable(failure));
        }
        let names = self.names.lock().expect("lock").clone();
        Ok(names
            .iter()
            .map(|name| {
                let segment = to_guest_identifier(name).expect("mappable");
                module(&format!("env.computers.{segment}"), &["run"])
            })
            .collect())
    }

    fn subscribe(&self) -> Invalidations {
        self.invalidator.subscribe()
    }

    async fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        self.invalidator.close();
    }
}

fn listed(catalog: &Catalog) -> Vec<String> {
    catalog
        .list()
        .into_iter()
        .map(|m| m.path.to_string())
        .collect()
}

#[tokio::test]
async fn replacing_modules_wakes_the_catalog_and_diffs() {
    let source = Arc::new(StaticSource::new(
        SourceId::new("ext"),
        vec![module("question", &["ask"]), module("ui", &["discover"])],
    ));
    let catalog = Catalog::new();
    let first = catalog.add_source(source.clone()).await.expect("added");
    assert_eq!(
        first,
        CatalogDiff {
            added: paths(&["question", "ui"]),
            ..CatalogDiff::default()
        }
    );

    assert!(
        tokio::time::timeout(QUIET, catalog.changed())
            .await
            .is_err(),
        "nothing changed yet"
    );
    source.replace(vec![
        module("question", &["ask", "cancel"]),
        module("files", &["read"]),
    ]);
    tokio::time::timeout(WAKE, catalog.changed())
        .await
        .expect("woken by the invalidation");
    let diff = catalog.refresh().await;
    assert_eq!(
        diff,
        CatalogDiff {
            added: paths(&["files"]),
            removed: paths(&["ui"]),
            changed: paths(&["question"]),
            problems: vec![],
        }
    );
    assert_eq!(listed(&catalog), ["files", "question"]);
    assert_eq!(
        catalog.refresh().await,
        CatalogDiff::default(),
        "a second refresh is a no-op"
    );
}

#[tokio::test]
async fn a_changed_host_list_moves_computers_in_and_out() {
    let computers = Computers::new(&["Work Laptop", "build-box"]);
    let catalog = Catalog::new();
    catalog.add_source(computers.clone()).await.expect("added");
    assert_eq!(
        listed(&catalog),
        ["env.computers.build_box", "env.computers.work_laptop"]
    );

    computers.set_names(&["build-box", "Studio"]);
    tokio::time::timeout(WAKE, catalog.changed())
        .await
        .expect("woken");
    assert_eq!(
        catalog.refresh().await,
        CatalogDiff {
            added: paths(&["env.computers.studio"]),
            removed: paths(&["env.computers.work_laptop"]),
            ..CatalogDiff::default()
        }
    );

    let gone = OperationPath::parse("env.computers.work_laptop.run").expect("path");
    let ctx = InvocationContext::new(ExecutionId::generate(), CancellationToken::new());
    let result = catalog.execute(&gone, json!({}), &ctx).await;
    assert!(
        matches!(&result, Err(ToolError::ForModel(e)) if e.kind == ForModelKind::UnknownOperation),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_failing_source_is_dropped_and_reported_while_others_stay() {
    let computers = Computers::new(&["alpha"]);
    let files = Arc::new(StaticSource::new(
        SourceId::new("files"),
        vec![module("files", &["read"])],
    ));
    let catalog = Catalog::new();
    catalog.add_source(files).await.expect("files");
    catalog
        .add_source(computers.clone())
        .await
        .expect("computers");

    computers.set_failing(Some("advertisement timed out"));
    assert_eq!(
        catalog.refresh().await,
        CatalogDiff {
            removed: paths(&["env.computers.alpha"]),
            problems: vec![CatalogProblem::SourceFailed {
                source_id: SourceId::new("computers"),
                error: SourceError::Unavailable("advertisement timed out".into()),
            }],
            ..CatalogDiff::default()
        }
    );
    assert_eq!(listed(&catalog), ["files"]);

    computers.set_failing(None);
    tokio::time::timeout(WAKE, catalog.changed())
        .await
        .expect("woken");
    assert_eq!(
        catalog.refresh().await,
        CatalogDiff {
            added: paths(&["env.computers.alpha"]),
            ..CatalogDiff::default()
        }
    );
}

#[tokio::test]
async fn a_closed_source_disappears() {
    let source = Arc::new(StaticSource::new(
        SourceId::new("ext"),
        vec![module("question", &["ask"])],
    ));
    let catalog = Catalog::new();
    catalog.add_source(source.clone()).await.expect("added");
    source.close_now();
    tokio::time::timeout(WAKE, catalog.changed())
        .await
        .expect("woken by closing");
    assert_eq!(
        catalog.refresh().await,
        CatalogDiff {
            removed: paths(&["question"]),
            ..CatalogDiff::default()
        }
    );
    assert_eq!(catalog.source_ids().await, Vec::<SourceId>::new());
    assert!(catalog.list().is_empty());
}

#[tokio::test]
async fn removing_and_closing_call_close_on_sources() {
    let computers = Computers::new(&["alpha"]);
    let catalog = Catalog::new();
    catalog.add_source(computers.clone()).await.expect("added");
    assert_eq!(
        catalog.add_source(computers.clone()).await,
        Err(CatalogError::DuplicateSource(SourceId::new("computers")))
    );
    let diff = catalog.remove_source(&SourceId::new("computers")).await;
    assert_eq!(
        diff,
        Ok(CatalogDiff {
            removed: paths(&["env.computers.alpha"]),
            ..CatalogDiff::default()
        })
    );
    assert_eq!(computers.closes.load(Ordering::SeqCst), 1);
    assert_eq!(
        catalog.remove_source(&SourceId::new("computers")).await,
        Err(CatalogError::UnknownSource(SourceId::new("computers")))
    );

    let other = Computers::new(&["beta"]);
    catalog.add_source(other.clone()).await.expect("added");
    assert_eq!(
        catalog.close().await,
        CatalogDiff {
            removed: paths(&["env.computers.beta"]),
            ..CatalogDiff::default()
        }
    );
    assert_eq!(other.closes.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_same_module_from_two_sources_is_reported() {
    let catalog = Catalog::new();
    let a = StaticSource::new(SourceId::new("a"), vec![module("files", &["read"])]);
    let b = StaticSource::new(
        SourceId::new("b"),
        vec![module("files", &["write"]), module("ui", &["discover"])],
    );
    catalog.add_source(Arc::new(a)).await.expect("a");
    let diff = catalog.add_source(Arc::new(b)).await.expect("b");
    assert_eq!(
        diff,
        CatalogDiff {
            added: paths(&["ui"]),
            problems: vec![CatalogProblem::DuplicateModule {
                path: ModulePath::new("files").expect("path"),
                first: SourceId::new("a"),
                second: SourceId::new("b"),
            }],
            ..CatalogDiff::default()
        }
    );
    let read = OperationPath::parse("files.read").expect("path");
    assert!(
        catalog.describe(&read).is_some(),
        "the first source keeps the module"
    );
}
