//! The user messages that lines of every origin become when they enter the lineage:
//! prompts, operator and party lines, and lines extensions add.

use shiitake_protocol::message::{Message, UserContent, UserMessage};
use shiitake_protocol::{OperatorAuthor, PromptText};

use crate::clock::now_ms;

/// An operator or party line as it enters the lineage: a user message marked with its author.
pub(crate) fn operator_message(author: OperatorAuthor, text: &PromptText) -> Message {
    let mut message = UserMessage::text(text.as_str(), now_ms());
    let author = match author {
        OperatorAuthor::Operator => "operator",
        OperatorAuthor::Party => "party",
    };
    message.extra.insert("author".to_owned(), author.into());
    Message::User(message)
}

/// A chat line an extension added ([`crate::extension::Tx::append_line`]): a user
/// message marked with its author `extension` and the extension's id.
pub(crate) fn extension_line(
    extension_id: &shiitake_protocol::ExtensionId,
    text: &PromptText,
) -> Message {
    let mut message = UserMessage::text(text.as_str(), now_ms());
    message
        .extra
        .insert("author".to_owned(), "extension".into());
    message
        .extra
        .insert("extensionId".to_owned(), extension_id.as_str().into());
    Message::User(message)
}

/// The user message a prompt becomes when it enters the conversation.
pub(crate) fn prompt_message(text: &PromptText) -> Message {
    Message::User(UserMessage {
        content: UserContent::Text(text.as_str().to_owned()),
        timestamp: now_ms(),
        extra: Default::default(),
    })
}
