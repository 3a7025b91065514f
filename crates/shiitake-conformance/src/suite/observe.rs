//! Observation: replay after a cursor, reset, race-safe watch, paging.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use shiitake_model::{Script, Turn};
use shiitake_protocol::*;

use crate::Fixture;
use crate::support::*;

/// `subscribe {after}` replays exactly what was committed after the cursor, then goes live.
pub async fn subscribe_replays_strictly_after_a_cursor<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("one"), Turn::text("two")])).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    let cursor = session
        .read(ReadOptions::default())
        .await
        .unwrap()
        .cursor
        .expect("history has a cursor");
    let second = send(&session, "p2").await;
    terminal_of(&session, &second).await;

    let options = SubscribeOptions {
        include_sandbox_failures: None,
        after: Some(cursor),
    };
    let mut frames = session.subscribe(options).await.unwrap();
    let Some(Ok(SessionFrame::Update(replay))) = frames.next().await else {
        panic!("the first frame replays");
    };
    assert_eq!(replay.delivery, FrameDelivery::Replay);
    let messages: Vec<_> = replay.messages.iter().map(|m| m.value.clone()).collect();
    assert_eq!(outline(&messages), vec!["user: p2", "assistant: two"]);
    let terminals: Vec<_> = replay
        .terminals
        .iter()
        .map(|t| t.command_id.clone())
        .collect();
    assert_eq!(terminals, vec![second]);
    assert_eq!(
        replay.cursor,
        session.read(ReadOptions::default()).await.unwrap().cursor
    );
}

/// A cursor that cannot be served yields exactly one `reset`, then live frames.
pub async fn an_unknown_cursor_gets_one_reset<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("one"), Turn::text("two")])).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    let options = SubscribeOptions {
        include_sandbox_failures: None,
        after: Some(Cursor::new("not-a-cursor-of-this-session").unwrap()),
    };
    let mut frames = session.subscribe(options).await.unwrap();
    let Some(Ok(SessionFrame::Reset(reset))) = frames.next().await else {
        panic!("the first frame is a reset");
    };
    assert_eq!(reset.reason, ResetReason::HistoryUnavailable);
    assert_eq!(reset.baseline.messages.len(), 2);
    let second = send(&session, "p2").await;
    tokio::time::timeout(PATIENCE, async {
        while let Some(frame) = frames.next().await {
            match frame.unwrap() {
                SessionFrame::Reset(_) => panic!("only one reset"),
                SessionFrame::Update(update)
                    if update.terminals.iter().any(|t| t.command_id == second) =>
                {
                    return;
                }
                _ => {}
            }
        }
        panic!("the frame stream ended before the second prompt's terminal");
    })
    .await
    .expect("the second prompt's terminal arrived in time");
}

/// Many watchers started while a writer commits in a tight loop each rebuild
/// exactly the final transcript: no gap, no duplicate.
pub async fn watch_has_no_gap_and_no_duplicate<F: Fixture>() {
    const PROMPTS: usize = 20;
    const WATCHERS: usize = 12;
    let fixture = F::start(Script::new(vec![Turn::text("ok")]).cycle(true)).await;
    let session = Arc::new(new_session(fixture.agent()).await);
    let writer = {
        let session = session.clone();
        tokio::spawn(async move {
            let mut last = None;
            for n in 0..PROMPTS {
                last = Some(send(&*session, &format!("prompt {n}")).await);
            }
            last
        })
    };
    let mut watchers = Vec::new();
    for n in 0..WATCHERS {
        let session = session.clone();
        watchers.push(tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(n as u64 * 7)).await;
            let options = ReadOptions {
                limit: Some(PageLimit::new(200).unwrap()),
                ..ReadOptions::default()
            };
            let watch = session.watch(options).await.unwrap();
            let mut ids: Vec<EntryId> = watch
                .snapshot
                .messages
                .iter()
                .map(|m| m.id.clone())
                .collect();
            let mut changes = watch.changes;
            let deadline = tokio::time::Instant::now() + PATIENCE;
            while ids.len() < PROMPTS * 2 {
                let frame = tokio::time::timeout_at(deadline, changes.next())
                    .await
                    .expect("the watcher saw every message in time")
                    .expect("the stream stays open")
                    .unwrap();
                match frame {
                    SessionFrame::Update(update) => {
                        ids.extend(update.messages.iter().map(|m| m.id.clone()))
                    }
                    SessionFrame::Reset(reset) => {
                        ids = reset
                            .baseline
                            .messages
                            .iter()
                            .map(|m| m.id.clone())
                            .collect();
                    }
                    SessionFrame::Progress(_) => {}
                }
            }
            ids
        }));
    }
    let last = writer.await.unwrap().unwrap();
    terminal_of(&*session, &last).await;
    let options = ReadOptions {
        limit: Some(PageLimit::new(200).unwrap()),
        ..ReadOptions::default()
    };
    let fin: Vec<EntryId> = session
        .read(options)
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(fin.len(), PROMPTS * 2);
    assert_eq!(fin.iter().collect::<HashSet<_>>().len(), fin.len());
    for watcher in watchers {
        assert_eq!(watcher.await.unwrap(), fin);
    }
}

/// Pages read backwards with `before` = `oldestCursor` rebuild the whole lineage.
pub async fn read_pages_backwards<F: Fixture>() {
    const PROMPTS: usize = 6;
    let fixture = F::start(Script::new(vec![Turn::text("ok")]).cycle(true)).await;
    let session = new_session(fixture.agent()).await;
    let mut last = None;
    for n in 0..PROMPTS {
        last = Some(send(&session, &format!("prompt {n}")).await);
    }
    terminal_of(&session, &last.unwrap()).await;
    let all = transcript(&session).await;
    assert_eq!(all.len(), PROMPTS * 2);

    let limit = Some(PageLimit::new(5).unwrap());
    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = session
            .read(ReadOptions {
                limit,
                before: before.clone(),
                ..ReadOptions::default()
            })
            .await
            .unwrap();
        assert!(page.messages.len() <= 5);
        let has_more = page.has_more;
        before = page.oldest_cursor.clone().flatten();
        pages.push(page.messages);
        if !has_more {
            break;
        }
    }
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![5, 5, 2]
    );
    let rebuilt: Vec<_> = pages.into_iter().rev().flatten().map(|m| m.value).collect();
    assert_eq!(rebuilt, all);
}
