//! `skill.load`: reads a skill's body or a file beside it through the skill's own
//! Knapsack Files port, so the port's jail (its folder) and read bound apply.

use knapsack::{Files, ListInput, ReadInput, to_tool_error, validate_path};
use serde_json::json;
use shiitake_capabilities::{ForModelError, ForModelKind, Replay, ToolError};
use shiitake_core::extension::kit::{KitError, Tool};

use crate::contract::{LoadInput, LoadOutput, SKILL_FILE};
use crate::extension::RunLibrary;
use crate::frontmatter;
use crate::library::SkillLibrary;

const DESCRIPTION: &str = "Loads a skill: with its name alone, the instructions of its SKILL.md \
(without front matter) and the list of files beside it; with a path, that file of the skill's \
folder. At most 128 KiB; `truncated` says when a file is longer.";

/// `skill.load`, offered to the runs that may read the library (the `files` grant).
pub(crate) fn load_tool() -> Result<Tool<RunLibrary>, KitError> {
    let tool =
        Tool::<RunLibrary>::waiting("load", DESCRIPTION, |call, input: LoadInput| async move {
            let Some(library) = call.call.run else {
                return Err(ToolError::for_model(
                    "the skill library is not open to this run",
                ));
            };
            let output = tokio::select! {
                biased;
                () = call.ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
                output = load(&library, input) => output?,
            };
            serde_json::to_value(output)
                .map_err(|e| ToolError::fatal_from("a skill.load result did not serialise", e))
        })?;
    Ok(tool.replay(Replay::Safe).offered_when(Option::is_some))
}

/// Reads what `input` asks for.
pub(crate) async fn load(
    library: &SkillLibrary,
    input: LoadInput,
) -> Result<LoadOutput, ToolError> {
    let Some(skill) = library.get(&input.name) else {
        let known: Vec<&str> = library.skills().map(|s| s.name.as_str()).collect();
        let message = format!("there is no skill named `{}`", input.name);
        let error = ForModelError::new(ForModelKind::Failed, message)
            .with_details(json!({"kind": "unknown_skill", "known": known}));
        return Err(ToolError::ForModel(error));
    };
    let port = skill.port.as_ref();
    match input.path {
        Some(path) => {
            validate_path(&path).map_err(to_tool_error)?;
            let read = read(port, &path).await?;
            Ok(LoadOutput {
                name: input.name,
                path,
                content: read.content,
                truncated: read.truncated,
                files: None,
            })
        }
        None => {
            let read = read(port, SKILL_FILE).await?;
            let body = match frontmatter::split(&read.content) {
                Ok(split) => split.body.to_owned(),
                Err(problem) => {
                    let message = format!("SKILL.md of `{}` changed: {problem}", input.name);
                    return Err(ToolError::for_model(message));
                }
            };
            Ok(LoadOutput {
                name: input.name,
                path: SKILL_FILE.into(),
                content: body,
                truncated: read.truncated,
                files: Some(beside(port).await?),
            })
        }
    }
}

async fn read(port: &dyn Files, path: &str) -> Result<knapsack::ReadOutput, ToolError> {
    port.read(ReadInput {
        path: path.into(),
        offset: 0,
        limit: None,
    })
    .await
    .map_err(to_tool_error)
}

/// The files of the skill's folder other than `SKILL.md` (visible, at most 256).
async fn beside(port: &dyn Files) -> Result<Vec<String>, ToolError> {
    let listed = port
        .list(ListInput {
            path: ".".into(),
            recursive: true,
        })
        .await
        .map_err(to_tool_error)?;
    Ok(listed
        .entries
        .into_iter()
        .filter(|entry| entry.kind == knapsack::EntryKind::File && entry.path != SKILL_FILE)
        .map(|entry| entry.path)
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::contract::MAX_NAME_CHARS;
    use crate::library::SkillLibrary;

    /// The schema the old hand-written `skill.load` advertised, derived now from
    /// [`crate::contract::LoadInput`]: the same bounds, required field and closed object
    /// (the type's own doc line is not advertised: the model reads the tool's description).
    #[test]
    fn the_derived_schema_carries_the_bounds_and_refuses_unknown_fields() {
        let extension = crate::extension(std::sync::Arc::new(SkillLibrary::default()))
            .expect("the skills extension builds");
        let (name, schema) = extension.tool_schemas().next().expect("one tool");
        assert_eq!(name, "load");
        assert_eq!(
            *schema,
            json!({
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_NAME_CHARS,
                        "description": "The skill's name, as listed in the Skills section."
                    },
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": knapsack::limits::PATH_LIMIT_BYTES,
                        "description": "A file inside the skill's folder, relative to it; omit for the instructions."
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            })
        );
    }
}
