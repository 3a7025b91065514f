//! Foreign names onto the guest identifier grammar, and operation paths onto provider tool names.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use shiitake_capabilities::names::is_guest_identifier;
use shiitake_capabilities::tool_name::is_provider_tool_name;
use shiitake_capabilities::{
    Catalog, CatalogProblem, Module, ModulePath, NameError, Operation, OperationName,
    OperationPath, SourceId, StaticSource, ToolName, flatten, handler_fn, map_foreign_names,
    to_guest_identifier, unflatten,
};

fn identifier() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,5}(_[a-z0-9]{1,5}){0,3}"
}

fn operation_path() -> impl Strategy<Value = OperationPath> {
    (
        prop::collection::vec(prop_oneof![identifier(), "[a-z]{20,40}"], 1..5),
        identifier(),
    )
        .prop_filter_map("valid path", |(module, name)| {
            let module = ModulePath::new(module.join(".")).ok()?;
            Some(module.operation(&OperationName::new(name).ok()?))
        })
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_maps_into_the_grammar_or_is_refused(text in "\\PC{0,80}") {
        match to_guest_identifier(&text) {
            Ok(name) => prop_assert!(is_guest_identifier(name.as_str()), "{name}"),
            Err(NameError::Unmappable { original } | NameError::TooLong { original, .. }) => {
                prop_assert_eq!(original, text)
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    #[test]
    fn identifiers_map_to_themselves(name in identifier()) {
        prop_assert_eq!(to_guest_identifier(&name).map(|n| n.to_string()), Ok(name));
    }

    #[test]
    fn word_styles_map_to_snake_case(words in prop::collection::vec("[a-z]{2,6}", 1..5)) {
        let snake = words.join("_");
        let camel = words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { w.clone() } else { capitalise(w) })
            .collect::<String>();
        let styles = [
            words.join("-"),
            words.join(" "),
            words.join("."),
            camel,
            words.iter().map(|w| capitalise(w)).collect(),
            words.iter().map(|w| w.to_uppercase()).collect::<Vec<_>>().join("_"),
        ];
        for style in styles {
            prop_assert_eq!(
                to_guest_identifier(&style).map(|n| n.to_string()),
                Ok(snake.clone()),
                "{}", style
            );
        }
    }

    #[test]
    fn collisions_are_reported_with_both_originals(
        originals in prop::collection::btree_set("[a-cA-C_ -]{1,6}", 1..8)
    ) {
        let mapped: Vec<(String, Result<OperationName, NameError>)> = originals
            .iter()
            .map(|o| (o.clone(), to_guest_identifier(o)))
            .collect();
        let result = map_foreign_names(originals.iter().map(String::as_str));
        if let Some((original, Err(error))) = mapped.iter().find(|(_, m)| m.is_err()) {
            // The first unmappable name fails the whole set, unless a collision came first.
            if !matches!(result, Err(NameError::Collision { .. })) {
                prop_assert_eq!(result, Err(error.clone()), "{}", original);
            }
            return Ok(());
        }
        let distinct: BTreeSet<_> = mapped.iter().filter_map(|(_, m)| m.as_ref().ok()).collect();
        match result {
            Ok(table) => {
                prop_assert_eq!(distinct.len(), originals.len());
                let back: BTreeSet<_> = table.values().cloned().collect();
                prop_assert_eq!(back, originals);
            }
            Err(NameError::Collision { first, second, mapped: target }) => {
                prop_assert!(distinct.len() < originals.len());
                prop_assert_ne!(&first, &second);
                prop_assert_eq!(to_guest_identifier(&first).map(|n| n.to_string()), Ok(target.clone()));
                prop_assert_eq!(to_guest_identifier(&second).map(|n| n.to_string()), Ok(target));
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    #[test]
    fn distinct_paths_get_distinct_valid_tool_names(
        paths in prop::collection::btree_set(operation_path(), 1..24)
    ) {
        let mut seen: BTreeMap<ToolName, OperationPath> = BTreeMap::new();
        for path in &paths {
            let name = flatten(path);
            prop_assert!(is_provider_tool_name(name.as_str()), "{name}");
            if !name.is_hashed() {
                prop_assert_eq!(unflatten(name.as_str()), Some(path.clone()));
            }
            if let Some(other) = seen.insert(name.clone(), path.clone()) {
                prop_assert!(false, "{path} and {other} both flatten to {name}");
            }
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_catalog_maps_every_tool_name_back(
        paths in prop::collection::btree_set(operation_path(), 1..16)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut modules: BTreeMap<ModulePath, Module> = BTreeMap::new();
        for path in &paths {
            let module = modules
                .entry(path.module().clone())
                .or_insert_with(|| Module::new(path.module().clone(), "generated"));
            let op = Operation::new(path.name().clone(), "op", handler_fn(|_, _| async { Ok(json!(null)) }));
            prop_assert!(module.add_operation(op).is_ok());
        }
        let catalog = Catalog::new();
        let source = StaticSource::new(SourceId::new("generated"), modules.into_values().collect());
        let diff = runtime.block_on(catalog.add_source(Arc::new(source)));
        prop_assert_eq!(diff.map(|d| d.problems), Ok(vec![]));
        let tools = catalog.tools();
        prop_assert_eq!(tools.len(), paths.len());
        for tool in tools {
            prop_assert_eq!(catalog.resolve_tool_name(tool.name.as_str()), Some(tool.path));
        }
    }
}

#[test]
fn module_refuses_two_originals_with_one_identifier() {
    let noop = || handler_fn(|_, _| async { Ok(json!(null)) });
    let result = Operation::foreign("create-note", "a", noop()).and_then(|a| {
        let b = Operation::foreign("CreateNote", "b", noop())?;
        Module::new(ModulePath::new("env.mcp.notes")?, "notes")
            .with_operation(a)?
            .with_operation(b)
    });
    assert_eq!(
        result.map(|m| m.path().clone()),
        Err(NameError::Collision {
            first: "create-note".into(),
            second: "CreateNote".into(),
            mapped: "create_note".into(),
        })
    );
}

#[test]
fn hashed_tool_name_collisions_are_reported() -> Result<(), NameError> {
    // Paths that share the 53-byte prefix differ only in the hash; search for two
    // with the same 32-bit hash (deterministic, found well within the bound).
    let module = ModulePath::new("m".repeat(60))?;
    let mut by_name: HashMap<ToolName, OperationName> = HashMap::new();
    let mut pair = None;
    for i in 0..2_000_000u32 {
        let name = OperationName::new(format!("o{i}"))?;
        let tool = flatten(&module.operation(&name));
        if let Some(first) = by_name.insert(tool.clone(), name.clone()) {
            pair = Some((first, name, tool));
            break;
        }
    }
    let (first, second, tool_name) = pair.expect("a 32-bit collision within 2M tries");
    let noop = || handler_fn(|_, _| async { Ok(json!(null)) });
    let module = Module::new(module, "long")
        .with_operation(Operation::new(first.clone(), "first", noop()))?
        .with_operation(Operation::new(second.clone(), "second", noop()))?;
    let first_path = module.path().operation(&first);
    let second_path = module.path().operation(&second);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let catalog = Catalog::new();
    let diff = runtime
        .block_on(catalog.add_source(Arc::new(StaticSource::new(
            SourceId::new("long"),
            vec![module],
        ))))
        .expect("added");
    assert_eq!(
        diff.problems,
        vec![CatalogProblem::ToolNameCollision {
            tool_name: tool_name.clone(),
            first: first_path.clone(),
            second: second_path.clone(),
        }]
    );
    let tools: Vec<_> = catalog
        .tools()
        .into_iter()
        .map(|t| (t.name, t.path))
        .collect();
    assert_eq!(tools, vec![(tool_name.clone(), first_path.clone())]);
    assert_eq!(
        catalog.resolve_tool_name(tool_name.as_str()),
        Some(first_path)
    );
    assert!(
        catalog.describe(&second_path).is_some(),
        "still reachable by path"
    );
    Ok(())
}
