//! `describe` answers for every live operation, and the tool list agrees with it.
#![allow(clippy::expect_used)] // fixture helpers outside #[test] functions

use std::sync::Arc;

use serde_json::json;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationDescriptor, OperationName, OperationPath,
    Replay, SourceId, StaticSource, ToolSpec, handler_fn,
};

async fn catalog() -> Catalog {
    let noop = || handler_fn(|_, _| async { Ok(json!(null)) });
    let read = Operation::new(
        OperationName::new("read").expect("name"),
        "Reads a text file.",
        noop(),
    )
    .with_input_schema(json!({
        "type": "object",
        "properties": { "path": { "type": "string", "minLength": 1 } },
        "required": ["path"]
    }))
    .with_output_schema(json!({ "type": "object", "properties": { "text": { "type": "string" } } }))
    .with_replay(Replay::Safe);
    let write = Operation::new(
        OperationName::new("write").expect("name"),
        "Writes a text file.",
        noop(),
    );
    let files = Module::new(
        ModulePath::new("files").expect("path"),
        "Files under the root.",
    )
    .with_operation(read)
    .and_then(|m| m.with_operation(write))
    .expect("files");
    let create = Operation::foreign("create-note", "Creates a note.", noop())
        .expect("mappable")
        .with_input_schema(
            json!({ "type": "object", "properties": { "tags": { "$ref": "#/$defs/tags" } } }),
        );
    let notes = Module::new(
        ModulePath::new("env.mcp.notes").expect("path"),
        "The notes server.",
    )
    .with_operation(create)
    .expect("notes");
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("files"),
            vec![files],
        )))
        .await
        .expect("files source");
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("mcp:notes"),
            vec![notes],
        )))
        .await
        .expect("mcp source");
    catalog
}

#[tokio::test]
async fn every_listed_operation_is_described() {
    let catalog = catalog().await;
    let listed: Vec<OperationDescriptor> = catalog
        .list()
        .into_iter()
        .flat_map(|m| m.operations)
        .collect();
    assert_eq!(listed.len(), 3);
    for descriptor in &listed {
        assert_eq!(
            catalog.describe(&descriptor.path).as_ref(),
            Some(descriptor)
        );
        assert_eq!(catalog.replay(&descriptor.path), Some(descriptor.replay));
        assert_eq!(
            catalog
                .resolve_tool_name(descriptor.tool_name.as_str())
                .as_ref(),
            Some(&descriptor.path)
        );
    }
}

#[tokio::test]
async fn a_descriptor_is_camel_case_json() {
    let catalog = catalog().await;
    let read = catalog
        .describe(&OperationPath::parse("files.read").expect("path"))
        .expect("described");
    let value = serde_json::to_value(&read).expect("serialises");
    assert_eq!(
        value,
        json!({
            "path": "files.read",
            "toolName": "files__read",
            "description": "Reads a text file.",
            "inputSchema": {
                "type": "object",
                "properties": { "path": { "type": "string", "minLength": 1 } },
                "required": ["path"]
            },
            "outputSchema": { "type": "object", "properties": { "text": { "type": "string" } } },
            "replay": "safe"
        })
    );
    let back: OperationDescriptor = serde_json::from_value(value).expect("deserialises");
    assert_eq!(back, read);
}

#[tokio::test]
async fn a_foreign_operation_with_an_opaque_schema_says_so() {
    let catalog = catalog().await;
    let create = catalog
        .describe(&OperationPath::parse("env.mcp.notes.create_note").expect("path"))
        .expect("described");
    assert_eq!(
        serde_json::to_value(&create).expect("serialises"),
        json!({
            "path": "env.mcp.notes.create_note",
            "toolName": "env__mcp__notes__create_note",
            "foreignName": "create-note",
            "description": "Creates a note.",
            "inputSchema": { "type": "object", "properties": { "tags": { "$ref": "#/$defs/tags" } } },
            "replay": "unsafe",
            "opaqueInput": { "path": "/properties/tags/$ref", "reason": "keyword outside the subset" }
        })
    );
    assert_eq!(
        catalog.describe(&OperationPath::parse("env.mcp.notes.delete_note").expect("path")),
        None
    );
}

#[tokio::test]
async fn tools_follow_module_order_then_advertised_order() {
    let catalog = catalog().await;
    let tools: Vec<(String, String, Replay)> = catalog
        .tools()
        .into_iter()
        .map(|ToolSpec { name, path, .. }| {
            let replay = catalog.replay(&path).expect("live");
            (name.to_string(), path.to_string(), replay)
        })
        .collect();
    assert_eq!(
        tools,
        vec![
            (
                "env__mcp__notes__create_note".into(),
                "env.mcp.notes.create_note".into(),
                Replay::Unsafe
            ),
            ("files__read".into(), "files.read".into(), Replay::Safe),
            ("files__write".into(), "files.write".into(), Replay::Unsafe),
        ]
    );
}
