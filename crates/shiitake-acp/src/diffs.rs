//! What an edit changes, as the diffs and file locations an editor shows on a tool
//! call: `files__edit` (its old and new text) and `files__apply_patch` (each file of
//! the patch: an added file's lines, an updated file's hunks as the lines they had and
//! have). Paths are the Computer's, relative; they are read from the editor's folder
//! (`cwd` of `session/new`) when it is known.

use std::path::{Path, PathBuf};

use agent_client_protocol::{Diff, ToolCallContent, ToolCallLocation};
use serde_json::Value;
use shiitake_protocol::message::ToolCall;

/// The diffs of an edit call and the files it touches; nothing for another tool.
pub(crate) fn of_call(
    call: &ToolCall,
    folder: Option<&Path>,
) -> (Vec<ToolCallContent>, Vec<ToolCallLocation>) {
    let operation = call.name.rsplit("__").next().unwrap_or(&call.name);
    let text = |key: &str| call.arguments.get(key).and_then(Value::as_str);
    let changes: Vec<(String, Option<String>, String)> = match operation {
        "edit" => match (text("path"), text("oldText"), text("newText")) {
            (Some(path), Some(old), Some(new)) => {
                vec![(path.to_owned(), Some(old.to_owned()), new.to_owned())]
            }
            _ => Vec::new(),
        },
        "apply_patch" => text("patch").map(patch_changes).unwrap_or_default(),
        _ => Vec::new(),
    };
    let place = |path: &str| -> PathBuf {
        match folder {
            Some(folder) if Path::new(path).is_relative() && !path.contains("://") => {
                folder.join(path)
            }
            _ => PathBuf::from(path),
        }
    };
    let locations = changes
        .iter()
        .map(|(path, ..)| ToolCallLocation::new(place(path)))
        .collect();
    let diffs = changes
        .into_iter()
        .map(|(path, old, new)| ToolCallContent::from(Diff::new(place(&path), new).old_text(old)))
        .collect();
    (diffs, locations)
}

/// Each file of an apply_patch patch: its path, what it had (none for a new file) and
/// what it has. An update's hunks are shown as the lines they had and have, run
/// together; a deleted file as its path with nothing now.
fn patch_changes(patch: &str) -> Vec<(String, Option<String>, String)> {
    let mut changes: Vec<(String, Option<String>, String)> = Vec::new();
    for line in patch.lines() {
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            changes.push((path.trim().to_owned(), None, String::new()));
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            changes.push((path.trim().to_owned(), Some(String::new()), String::new()));
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            changes.push((path.trim().to_owned(), Some(String::new()), String::new()));
        } else if line.starts_with("*** ") || line.starts_with("@@") {
            continue;
        } else if let Some((_, old, new)) = changes.last_mut() {
            let (had, has) = match line.chars().next() {
                Some('+') => (false, true),
                Some('-') => (true, false),
                _ => (true, true),
            };
            let body = line.get(1..).unwrap_or("");
            if had && let Some(old) = old {
                old.push_str(body);
                old.push('\n');
            }
            if has {
                new.push_str(body);
                new.push('\n');
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        serde_json::from_value(json!({"id": "c", "name": name, "arguments": arguments})).unwrap()
    }

    fn wire(content: &[ToolCallContent]) -> Vec<Value> {
        content
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .collect()
    }

    #[test]
    fn an_edit_is_its_old_and_new_text_in_the_editors_folder() {
        let edit = call(
            "files__edit",
            json!({"path": "src/a.rs", "oldText": "x", "newText": "y"}),
        );
        let (diffs, locations) = of_call(&edit, Some(Path::new("/w")));
        let diffs = wire(&diffs);
        assert_eq!(diffs[0]["type"], "diff");
        assert_eq!(diffs[0]["path"], "/w/src/a.rs");
        assert_eq!(diffs[0]["oldText"], "x");
        assert_eq!(diffs[0]["newText"], "y");
        assert_eq!(
            serde_json::to_value(&locations[0]).unwrap()["path"],
            "/w/src/a.rs"
        );
        let (none, _) = of_call(&call("files__read", json!({"path": "a"})), None);
        assert!(none.is_empty());
    }

    #[test]
    fn a_patch_is_a_diff_per_file() {
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+one\n+two\n\
                     *** Update File: old.txt\n@@ fn main\n keep\n-gone\n+come\n\
                     *** Delete File: dead.txt\n*** End Patch";
        let (diffs, locations) =
            of_call(&call("files__apply_patch", json!({"patch": patch})), None);
        let diffs = wire(&diffs);
        assert_eq!(diffs.len(), 3);
        assert_eq!(diffs[0]["path"], "new.txt");
        assert_eq!(diffs[0]["newText"], "one\ntwo\n");
        assert!(diffs[0]["oldText"].is_null(), "{}", diffs[0]);
        assert_eq!(diffs[1]["oldText"], "keep\ngone\n");
        assert_eq!(diffs[1]["newText"], "keep\ncome\n");
        assert_eq!(diffs[2]["path"], "dead.txt");
        assert_eq!(diffs[2]["newText"], "");
        assert_eq!(locations.len(), 3);
    }
}
