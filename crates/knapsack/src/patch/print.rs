//! The printer: [`Patch`] back to grammar text; `parse_patch(&print_patch(p)) == p`.

use super::{ChunkLine, FileOperation, Patch};

/// Prints a patch in the canonical form of the grammar (every hunk starts with `@@`).
pub fn print_patch(patch: &Patch) -> String {
    let mut out = String::from("*** Begin Patch\n");
    for operation in &patch.operations {
        match operation {
            FileOperation::Add { path, lines } => {
                out.push_str(&format!("*** Add File: {path}\n"));
                for line in lines {
                    out.push_str(&format!("+{line}\n"));
                }
            }
            FileOperation::Delete { path } => out.push_str(&format!("*** Delete File: {path}\n")),
            FileOperation::Update {
                path,
                move_to,
                chunks,
            } => {
                out.push_str(&format!("*** Update File: {path}\n"));
                if let Some(to) = move_to {
                    out.push_str(&format!("*** Move to: {to}\n"));
                }
                for chunk in chunks {
                    match &chunk.context {
                        Some(context) => out.push_str(&format!("@@ {context}\n")),
                        None => out.push_str("@@\n"),
                    }
                    for line in &chunk.lines {
                        let (mark, text) = match line {
                            ChunkLine::Context(t) => (' ', t),
                            ChunkLine::Remove(t) => ('-', t),
                            ChunkLine::Add(t) => ('+', t),
                        };
                        out.push(mark);
                        out.push_str(text);
                        out.push('\n');
                    }
                    if chunk.end_of_file {
                        out.push_str("*** End of File\n");
                    }
                }
            }
        }
    }
    out.push_str("*** End Patch\n");
    out
}
