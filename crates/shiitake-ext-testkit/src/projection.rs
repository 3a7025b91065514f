//! The extension's projection, decoded through its contract
//! ([`shiitake_protocol::extension::view`]): what a client of the extension sees.
//!
//! Every function is generic over the extension's [`ExtensionContract`] and names the
//! extension (its `EXTENSION_ID`) when it fails.

use std::fmt::Debug;

use futures::StreamExt;
use shiitake_protocol::extension::{ExtensionContract, ExtensionViewV0, view};
use shiitake_protocol::{ReadOptions, SessionApi, SessionExtensionSlots, SessionFrame};

use crate::PATIENCE;

/// The extension's slot in `slots`: unavailable, stopped (with why) or running (with
/// its projection); panics naming the extension when the slot does not decode.
pub fn slot<C: ExtensionContract>(slots: &SessionExtensionSlots) -> ExtensionViewV0<C::Projection> {
    match view::<C>(slots) {
        Ok(view) => view,
        Err(error) => panic!("the slot of `{}` does not decode: {error}", C::EXTENSION_ID),
    }
}

/// The projection of the running extension in `slots` (`None` when it published
/// none); panics naming the extension when it is not running.
pub fn running<C>(slots: &SessionExtensionSlots) -> Option<C::Projection>
where
    C: ExtensionContract,
    C::Projection: Debug,
{
    match slot::<C>(slots) {
        ExtensionViewV0::Running { value } => value,
        other => panic!("`{}` is not running: {other:?}", C::EXTENSION_ID),
    }
}

/// Reads the Session once and returns the running extension's projection
/// (see [`running`]).
pub async fn read<C>(session: &impl SessionApi) -> Option<C::Projection>
where
    C: ExtensionContract,
    C::Projection: Debug,
{
    let snapshot = match session.read(ReadOptions::default()).await {
        Ok(snapshot) => snapshot,
        Err(error) => panic!("the Session did not read: {error}"),
    };
    running::<C>(&snapshot.extensions)
}

/// Waits until the running extension publishes a projection for which `wanted`
/// holds, and returns it.
///
/// It follows the Session's frames (no polling) for at most [`PATIENCE`]; then it
/// panics naming the extension and the last slot it saw. A stopped or absent
/// extension, or one that published nothing, is a value that does not hold yet.
pub async fn until<C>(
    session: &impl SessionApi,
    wanted: impl Fn(&C::Projection) -> bool,
) -> C::Projection
where
    C: ExtensionContract,
    C::Projection: Debug,
{
    let mut last: Option<ExtensionViewV0<C::Projection>> = None;
    let mut check = |slots: &SessionExtensionSlots| match slot::<C>(slots) {
        ExtensionViewV0::Running { value: Some(value) } if wanted(&value) => Some(value),
        other => {
            last = Some(other);
            None
        }
    };
    let waited = tokio::time::timeout(PATIENCE, async {
        let watch = match session.watch(ReadOptions::default()).await {
            Ok(watch) => watch,
            Err(error) => panic!("the Session did not watch: {error}"),
        };
        if let Some(value) = check(&watch.snapshot.extensions) {
            return Some(value);
        }
        let mut changes = watch.changes;
        while let Some(frame) = changes.next().await {
            let slots = match &frame {
                Ok(SessionFrame::Update(update)) => &update.extensions,
                Ok(SessionFrame::Reset(reset)) => &reset.baseline.extensions,
                Ok(SessionFrame::Progress(_)) => continue,
                Err(error) => panic!("the Session's frames failed: {error}"),
            };
            if let Some(value) = check(slots) {
                return Some(value);
            }
        }
        None
    })
    .await;
    match waited {
        Ok(Some(value)) => value,
        Ok(None) => panic!(
            "the frames of the Session ended before `{}` showed what the test waited for; last seen: {last:?}",
            C::EXTENSION_ID
        ),
        Err(_) => panic!(
            "`{}` did not show what the test waited for within {PATIENCE:?}; last seen: {last:?}",
            C::EXTENSION_ID
        ),
    }
}
