//! A question the agent asks (the Question extension's Ask) over ACP, which has no
//! stable request for one: the question and its options come as the agent's message
//! (`reply::ask_text`), the prompt's turn ends (`end_turn`: the Session needs the
//! person), and the editor's next prompt is the answer (`reply::answer_from_reply`).
//! Its run then goes on in that prompt's turn.

pub(crate) use shiitake_ext_question::reply::{
    answer_from_reply as answer, ask_text as message, waiting_asks as waiting,
};
