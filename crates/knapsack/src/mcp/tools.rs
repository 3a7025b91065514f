//! An advertised tool list becomes the module `env.mcp.<name>`: names mapped onto the
//! guest grammar, schemas through the capabilities subset, replay from `readOnlyHint`.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;
use shiitake_capabilities::{Module, ModulePath, Operation, OperationHandler, Replay};

use super::error::McpError;
use crate::computer::check_schema;
use crate::limits::MCP_TOOL_LIMIT;

/// Builds the module of server `name` at `path` from its tool list; `handler` makes
/// the handler that calls one tool by its advertised name.
///
/// More than [`MCP_TOOL_LIMIT`] tools, a name with nothing to map, two names that
/// map to one identifier, or an input schema that does not describe an object make
/// the whole list unusable. A schema outside the subset is kept: the operation then
/// accepts any JSON object and the server validates it.
pub(crate) fn build_module(
    name: &str,
    path: &ModulePath,
    tools: &[Tool],
    handler: impl Fn(&Tool) -> Arc<dyn OperationHandler>,
) -> Result<Module, McpError> {
    if tools.len() > MCP_TOOL_LIMIT {
        return Err(McpError::TooManyTools {
            name: name.to_owned(),
            count: tools.len(),
            limit: MCP_TOOL_LIMIT,
        });
    }
    let mut module = Module::new(path.clone(), format!("Tools of the MCP server `{name}`."));
    for tool in tools {
        let unusable = |reason: String| McpError::Unusable {
            name: name.to_owned(),
            tool: tool.name.to_string(),
            reason,
        };
        let input_schema = Value::Object(tool.input_schema.as_ref().clone());
        check_schema(&input_schema).map_err(|reason| unusable(reason.to_owned()))?;
        let mut operation = Operation::foreign(&tool.name, description(tool), handler(tool))
            .map_err(|error| unusable(error.to_string()))?
            .with_input_schema(input_schema)
            .with_replay(replay(tool));
        if let Some(output) = &tool.output_schema {
            operation = operation.with_output_schema(Value::Object(output.as_ref().clone()));
        }
        module
            .add_operation(operation)
            .map_err(|error| unusable(error.to_string()))?;
    }
    Ok(module)
}

/// Only a tool the server marks `readOnlyHint: true` may run again after a crash.
pub(crate) fn replay(tool: &Tool) -> Replay {
    match tool.annotations.as_ref().and_then(|a| a.read_only_hint) {
        Some(true) => Replay::Safe,
        _ => Replay::Unsafe,
    }
}

/// The description, else the title, else nothing.
fn description(tool: &Tool) -> String {
    tool.description
        .as_deref()
        .map(str::to_owned)
        .or_else(|| tool.title.clone())
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rmcp::model::ToolAnnotations;
    use serde_json::json;
    use shiitake_capabilities::{ExecutionId, InvocationContext, OperationName, handler_fn};

    use super::*;

    fn tool(name: &str, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("schema must be an object")
        };
        Tool::new(name.to_owned(), format!("does {name}"), Arc::new(schema))
    }

    fn object() -> Value {
        json!({ "type": "object", "properties": { "text": { "type": "string" } } })
    }

    fn path() -> ModulePath {
        ModulePath::new("env.mcp.notes").unwrap()
    }

    fn echo(_: &Tool) -> Arc<dyn OperationHandler> {
        handler_fn(|input, _ctx| async move { Ok(input) })
    }

    #[test]
    fn names_map_onto_the_guest_grammar_and_keep_the_original() {
        let tools = [tool("create-note", object()), tool("listNotes", object())];
        let module = build_module("notes", &path(), &tools, echo).unwrap();
        let names: Vec<_> = module
            .operations()
            .iter()
            .map(|op| (op.name().to_string(), op.foreign_name().map(str::to_owned)))
            .collect();
        assert_eq!(
            names,
            [
                ("create_note".to_owned(), Some("create-note".to_owned())),
                ("list_notes".to_owned(), Some("listNotes".to_owned())),
            ]
        );
    }

    #[test]
    fn a_collision_makes_the_list_unusable_and_names_both() {
        let tools = [tool("create-note", object()), tool("create_note", object())];
        let error = build_module("notes", &path(), &tools, echo).unwrap_err();
        let McpError::Unusable { tool, reason, .. } = error else {
            panic!("expected Unusable, got {error:?}")
        };
        assert_eq!(tool, "create_note");
        assert!(
            reason.contains("create-note") && reason.contains("create_note"),
            "{reason}"
        );
    }

    #[test]
    fn only_read_only_tools_replay() {
        let plain = tool("a", object());
        let read_only = tool("b", object()).annotate(ToolAnnotations::new().read_only(true));
        let not_read_only = tool("c", object()).annotate(ToolAnnotations::new().read_only(false));
        let module =
            build_module("notes", &path(), &[plain, read_only, not_read_only], echo).unwrap();
        let replays: Vec<_> = module.operations().iter().map(Operation::replay).collect();
        assert_eq!(replays, [Replay::Unsafe, Replay::Safe, Replay::Unsafe]);
    }

    #[test]
    fn a_schema_outside_the_subset_stays_usable_and_opaque() {
        let schema = json!({ "type": "object", "properties": { "id": { "oneOf": [ { "type": "string" }, { "type": "integer" } ] } } });
        let module = build_module("notes", &path(), &[tool("get", schema)], echo).unwrap();
        let op = module
            .operation(&OperationName::new("get").unwrap())
            .unwrap();
        let opaque = op.input_schema().opaque_reason().unwrap();
        assert_eq!(opaque.path, "/properties/id/oneOf");
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_is_unusable() {
        let error = build_module(
            "notes",
            &path(),
            &[tool("get", json!({ "type": "string" }))],
            echo,
        )
        .unwrap_err();
        assert!(matches!(error, McpError::Unusable { .. }), "{error:?}");
    }

    #[test]
    fn an_unmappable_name_is_unusable() {
        let error = build_module("notes", &path(), &[tool("---", object())], echo).unwrap_err();
        assert!(matches!(error, McpError::Unusable { .. }), "{error:?}");
    }

    #[test]
    fn the_tool_limit_holds_at_its_edge_and_fails_one_past_it() {
        let tools: Vec<_> = (0..MCP_TOOL_LIMIT)
            .map(|i| tool(&format!("tool-{i}"), object()))
            .collect();
        let module = build_module("notes", &path(), &tools, echo).unwrap();
        assert_eq!(module.operations().len(), MCP_TOOL_LIMIT);
        let mut one_more = tools;
        one_more.push(tool("extra", object()));
        assert_eq!(
            build_module("notes", &path(), &one_more, echo).unwrap_err(),
            McpError::TooManyTools {
                name: "notes".into(),
                count: MCP_TOOL_LIMIT + 1,
                limit: MCP_TOOL_LIMIT
            }
        );
    }

    #[test]
    fn an_output_schema_is_described() {
        let Value::Object(output) = json!({ "type": "object" }) else {
            unreachable!()
        };
        let with_output = tool("get", object()).with_raw_output_schema(Arc::new(output));
        let module = build_module("notes", &path(), &[with_output], echo).unwrap();
        let descriptor = module.descriptor();
        assert_eq!(
            descriptor.operations[0].output_schema,
            Some(json!({ "type": "object" }))
        );
    }

    #[tokio::test]
    async fn handlers_are_made_per_tool() {
        let module = build_module("notes", &path(), &[tool("get", object())], |t| {
            let name = t.name.to_string();
            handler_fn(move |_input, _ctx| {
                let name = name.clone();
                async move { Ok(json!(name)) }
            })
        })
        .unwrap();
        let ctx = InvocationContext::new(
            ExecutionId::generate(),
            tokio_util::sync::CancellationToken::new(),
        );
        let out = module.operations()[0]
            .handler()
            .call(json!({}), &ctx)
            .await
            .unwrap();
        assert_eq!(out, json!("get"));
    }
}
