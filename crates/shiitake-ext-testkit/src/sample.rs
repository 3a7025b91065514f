//! An extension whose footer row no client has heard of, for client tests: the CLI
//! and the web page show its row and run its action without knowing it, which is the
//! promise of footer rows (an extension adds a row, no client changes).
//!
//! `example-weather` keeps one sky per Session, set by its Session-scope command
//! `forecast` (`{"sky": "..."}`). Its row (key `weather`, kind `weather`) reads
//! `weather: <sky>`, wants attention while a storm comes, has the note `/forecast`,
//! progress 2 of 3, two detail lines, and a *Clear skies* action (`clear`) that calls
//! `forecast` with `clear skies`.

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{StateScope, StateView};
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0, FooterTone};
use shiitake_protocol::{contract_commands, extension_contract};

extension_contract! {
    /// The weather's contract; its projection is the sky.
    pub WeatherContract = "example-weather", projection String
}

/// `forecast`: sets the Session's sky; answers it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// The sky, such as `storm ahead`.
    pub sky: String,
    /// The caller's idempotency key.
    #[serde(default)]
    pub request_id: Option<String>,
}
contract_commands!(WeatherContract { Forecast => "forecast" in SessionScope -> String });

fn sky(state: &StateView<'_>) -> Option<String> {
    state.get(StateScope::Session, "weather", "sky")
}

/// The row of a Session whose sky is `sky`.
pub fn row(id: &shiitake_protocol::ExtensionId, sky: &str) -> FooterRowV0 {
    let tone = if sky.contains("storm") {
        FooterTone::Attention
    } else {
        FooterTone::Calm
    };
    FooterRowV0::new(id.clone(), "weather", "weather", format!("weather: {sky}"))
        .with_tone(tone)
        .with_note("/forecast")
        .with_progress(2, 3)
        .with_detail(vec!["Mon: rain".into(), "Tue: sun".into()])
        .with_action(FooterActionV0::command(
            "clear",
            "Clear skies",
            "forecast",
            json!({"sky": "clear skies"}),
        ))
}

/// The weather extension; register it with `AgentBuilder::kit_extension`.
pub fn weather() -> Result<KitExtension<WeatherContract>, KitError> {
    ExtensionKit::<WeatherContract>::new("weather")?
        .session_state()
        .command(|tx, input: Forecast| {
            tx.put(StateScope::Session, "weather", "sky", &input.sky)?;
            Ok(input.sky)
        })
        .projection(sky)
        .footer(|state, id| sky(state).map(|sky| row(id, &sky)).into_iter().collect())
        .build()
}
